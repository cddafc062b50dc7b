// The streaming snapshot writer (format: proto/snapshot.md).
//
// Durability follows Redis' rdbSave(): temporary file in the target's
// directory (rename is only atomic within one file system), fsync the file,
// rename over the target, fsync the directory so the rename itself survives a
// power loss.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "bloomery/bloom/age_header.hpp"
#include "bloomery/core/file_io.hpp"
#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "filter_body.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {
namespace {

// Thrown inside the writer only, caught by save_snapshot(): I/O errors unwind
// through the nested loops without an error check after every append.
struct WriteFailure {
    std::string message;
};

// Whether appended bytes belong to the record being written, so that its
// checksum covers them, or only to the file (headers, checksums, the end).
enum class Hashed { in_record, file_only };

// Where the bytes go: a file descriptor (a snapshot file) or a callback (a
// replica's socket, stream_snapshot()).
class SnapshotFileWriter {
public:
    SnapshotFileWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
        buffer_.reserve(format::kIoBufferBytes);
    }
    SnapshotFileWriter(const SnapshotSink& sink, std::string name)
        : sink_(&sink), path_(std::move(name)) {
        buffer_.reserve(format::kIoBufferBytes);
    }

    // Bytes between begin_record() and record_checksum() are hashed into
    // the record's checksum as well: in the buffer, once per record or per
    // flush, not once per field. A file-only append ends a record's bytes.
    void begin_record() {
        record_hash_.reset();
        record_from_ = buffer_.size();
        in_record_ = true;
    }
    std::uint64_t record_checksum() {
        hash_record_bytes();
        in_record_ = false;
        return record_hash_.digest();
    }

    void append(const void* data, std::size_t size, Hashed hashed = Hashed::in_record) {
        if (hashed == Hashed::file_only && in_record_) {
            hash_record_bytes();
            in_record_ = false;
        }
        const auto* bytes = static_cast<const unsigned char*>(data);
        while (size > 0) {
            const std::size_t room = format::kIoBufferBytes - buffer_.size();
            const std::size_t take = size < room ? size : room;
            buffer_.insert(buffer_.end(), bytes, bytes + take);
            bytes += take;
            size -= take;
            if (buffer_.size() == format::kIoBufferBytes) flush();
        }
    }
    void append_u8(std::uint8_t v) { append(&v, 1); }
    void append_u32(std::uint32_t v) {
        unsigned char b[4];
        format::put_u32(b, v);
        append(b, sizeof b);
    }
    void append_u64(std::uint64_t v, Hashed hashed = Hashed::in_record) {
        unsigned char b[8];
        format::put_u64(b, v);
        append(b, sizeof b, hashed);
    }
    void append_i64(std::int64_t v) { append_u64(static_cast<std::uint64_t>(v)); }
    void append_f64(double v) { append_u64(std::bit_cast<std::uint64_t>(v)); }

    // The whole-file checksum covers every byte handed to write(), so it is
    // taken here over whole buffers rather than per field.
    void flush() {
        hash_record_bytes();
        record_from_ = 0;
        file_hash_.update(buffer_.data(), buffer_.size());
        if (sink_ != nullptr) {
            if (!buffer_.empty() && !(*sink_)(buffer_.data(), buffer_.size())) {
                throw WriteFailure{"cannot send the snapshot to " + path_ + ": it went away"};
            }
            written_ += buffer_.size();
            buffer_.clear();
            return;
        }
        if (const int failed = core::write_all(fd_, buffer_.data(), buffer_.size()); failed != 0) {
            fail("write", failed);
        }
        written_ += buffer_.size();
        buffer_.clear();
    }

    // Checksum of every byte appended so far (flushes first).
    std::uint64_t file_checksum() {
        flush();
        return file_hash_.digest();
    }

    std::uint64_t bytes_written() const { return written_; }

    [[noreturn]] void fail(const char* operation, int error_number) const {
        throw WriteFailure{"cannot " + std::string(operation) + " '" + path_ +
                           "': " + format::errno_text(error_number)};
    }

private:
    // The open record's bytes in the buffer not yet hashed.
    void hash_record_bytes() {
        if (in_record_ && buffer_.size() > record_from_) {
            record_hash_.update(buffer_.data() + record_from_, buffer_.size() - record_from_);
        }
        record_from_ = buffer_.size();
    }

    int fd_ = -1;
    const SnapshotSink* sink_ = nullptr;
    std::string path_;
    std::vector<unsigned char> buffer_;
    format::Xxh64 record_hash_;
    std::size_t record_from_ = 0;
    bool in_record_ = false;
    format::Xxh64 file_hash_;
    std::uint64_t written_ = 0;
};

// A Cuckoo filter as it is now, with the number of its last change
// (cuckoo_object.hpp: replay skips the changes it holds). Copied under its
// lock and written from the copy, so its writers wait for a copy, not for
// the disk or a replica's socket.
void write_cuckoo_record(SnapshotFileWriter& out, std::string_view key,
                         const store::KeyspaceView::Entry& entry) {
    const cuckoo::CuckooObject& object = entry.value.cuckoo();
    const cuckoo::CuckooObject::Copy copy = object.copy();
    out.begin_record();
    out.append_u8(format::kRecordCuckoo);
    out.append_u32(static_cast<std::uint32_t>(key.size()));
    out.append(key.data(), key.size());
    out.append_i64(entry.expire_at_ms);
    out.append_u64(object.id());
    out.append_u64(copy.changes);
    const std::string header = copy.filter.header();
    out.append(header.data(), header.size());
    for (std::uint16_t i = 0; i < copy.filter.num_filters(); ++i) {
        const std::string_view data = copy.filter.filter_data(i);
        out.append(data.data(), data.size());
    }
    out.append_u64(out.record_checksum(), Hashed::file_only);
}

// An expiring filter: its generation, last shift and counts at the cut
// (SnapshotCounts), its words copied live (replaying the records after the
// cut gives back the live bits whatever moment they were copied at:
// proto/journal.md, "Expiring filters").
void write_age_record(SnapshotFileWriter& out, const store::KeyspaceView& view, std::size_t index,
                      std::vector<std::uint64_t>& words) {
    const std::string_view key = view.key(index);
    const store::KeyspaceView::Entry& entry = view.entry(index);
    const bloom::AgeFilter& filter = entry.value.age();
    const store::KeyspaceView::AtCut at_cut = view.at_cut(index);
    out.begin_record();
    out.append_u8(format::kRecordAge);
    out.append_u32(static_cast<std::uint32_t>(key.size()));
    out.append(key.data(), key.size());
    out.append_i64(entry.expire_at_ms);
    out.append_u64(filter.id());
    const std::string header =
        bloom::encode_age_header(filter, at_cut.generation, at_cut.shifted_ms);
    out.append(header.data(), header.size());
    out.append_u32(static_cast<std::uint32_t>(at_cut.counts.size()));
    for (const std::uint64_t count : at_cut.counts) out.append_u64(count);
    format::write_layer_runs(out, filter, words);
    out.append_u64(out.record_checksum(), Hashed::file_only);
}

void write_filter_record(SnapshotFileWriter& out, const store::KeyspaceView& view,
                         std::size_t index, std::vector<std::uint64_t>& words) {
    const std::string_view key = view.key(index);
    const store::KeyspaceView::Entry& entry = view.entry(index);
    if (entry.value.cuckoo_or_null() != nullptr) {
        write_cuckoo_record(out, key, entry);
        return;
    }
    if (entry.value.age_or_null() != nullptr) {
        write_age_record(out, view, index, words);
        return;
    }
    const bloom::ScalableFilter& filter = entry.value.filter();

    out.begin_record();
    out.append_u8(format::kRecordFilter);
    out.append_u32(static_cast<std::uint32_t>(key.size()));
    out.append(key.data(), key.size());
    out.append_i64(entry.expire_at_ms);
    out.append_u64(filter.id());
    // The counts of the view's position (exactly the adds before it, with a
    // journal), read before the layer count: a layer created since counts 0.
    // Bits are copied live: they hold every add before the position, and
    // replaying the records after it sets the rest again, so a restart gives
    // back the live filter bit for bit and count for count.
    // A counting filter's cells are not bits: its copy as it was at the
    // position (SnapshotCounts) is written instead.
    const store::KeyspaceView::AtCut at_cut = view.at_cut(index);
    const bloom::ScalableFilter& body = at_cut.copy ? *at_cut.copy : filter;
    format::write_filter_body(out, body, body.num_layers(), at_cut.counts, words);
    out.append_u64(out.record_checksum(), Hashed::file_only);
}

// How many records ahead the writer asks for a filter's lines.
constexpr std::size_t kRecordsAhead = 4;

// The whole snapshot into `out`; returns the filter records written.
std::uint64_t write_snapshot(const store::Keyspace& keyspace, SnapshotFileWriter& out,
                             SaveStats& stats, const SnapshotPositionListener& on_position) {
    std::vector<std::uint64_t> words;  // grown to format::kWordChunk as needed
    // Every key at one instant (all shard locks held together for the copy
    // of references only), so a key renamed, deleted or re-created during
    // the save is in the file exactly once, as it was then. The (possibly
    // gigabytes of) words are copied with no lock held: bits only go 0 -> 1.
    // With a journal, the view is taken at a cut: every add recorded before
    // its position has set its bits and counted by then.
    const store::KeyspaceView view = keyspace.view();
    stats.journal_id = view.log_id();
    stats.journal_offset = view.log_position();
    if (on_position) on_position(view.log_position());

    unsigned char header[format::kFileHeaderBytes];
    std::memcpy(header, kSnapshotMagic, format::kMagicBytes);
    format::put_u32(header + 8, kSnapshotFormatVersion);
    format::put_u64(header + 12, static_cast<std::uint64_t>(store::now_ms()));
    format::put_u64(header + 20, view.log_id());
    format::put_u64(header + 28, view.log_position());
    out.append(header, sizeof header, Hashed::file_only);
    std::uint64_t records = 0;
    for (std::size_t i = 0; i < view.size(); ++i) {
        // A small filter is its object and its words right after it: asked
        // for a few records ahead, its misses overlap the writing.
        if (i + kRecordsAhead < view.size()) view.entry(i + kRecordsAhead).value.prefetch(4);
        write_filter_record(out, view, i, words);
        ++records;
    }
    out.append_u8(format::kRecordEnd);
    out.append_u64(records);
    out.append_u64(out.file_checksum(), Hashed::file_only);
    out.flush();
    stats.bytes = out.bytes_written();
    return records;
}

std::string directory_of(const std::string& path) {
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

std::string temporary_path_for(const std::string& path) {
    // The sequence number keeps two saves in one process (say, SAVE during a
    // BGSAVE) from sharing a temporary file.
    static std::atomic<std::uint64_t> sequence{0};
    return path + ".tmp-" + std::to_string(::getpid()) + "-" +
           std::to_string(sequence.fetch_add(1, std::memory_order_relaxed));
}

// Closes the descriptor and removes the temporary file unless released, so
// that every early exit (error or exception) leaves nothing behind.
class TemporaryFile {
public:
    explicit TemporaryFile(std::string path) : path_(std::move(path)) {}
    ~TemporaryFile() {
        if (fd_ >= 0) ::close(fd_);
        if (!released_) ::unlink(path_.c_str());
    }
    TemporaryFile(const TemporaryFile&) = delete;
    TemporaryFile& operator=(const TemporaryFile&) = delete;

    bool open() {
        fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        return fd_ >= 0;
    }
    int fd() const { return fd_; }
    const std::string& path() const { return path_; }
    // close() can report a delayed write error (NFS): it must be checked.
    int close() {
        const int result = ::close(fd_);
        fd_ = -1;
        return result;
    }
    void release() { released_ = true; }

private:
    std::string path_;
    int fd_ = -1;
    bool released_ = false;
};

}  // namespace

namespace {

// fsync, close and rename over `path` of a temporary file written whole, then
// the fsync of the directory that makes the rename durable.
core::Status make_durable(TemporaryFile& temporary, const std::string& path) {
    int result;
    const auto fsync_began = std::chrono::steady_clock::now();
    do {
        result = ::fsync(temporary.fd());
    } while (result != 0 && errno == EINTR);
    core::latency_add_sample_if_needed(
        core::kLatencySnapshotFsync,
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now() - fsync_began)
                                       .count()));
    if (result != 0) {
        return core::Error{"cannot fsync '" + temporary.path() + "': " + format::errno_text(errno)};
    }
    if (temporary.close() != 0) {
        return core::Error{"cannot close '" + temporary.path() + "': " + format::errno_text(errno)};
    }
    if (::rename(temporary.path().c_str(), path.c_str()) != 0) {
        return core::Error{"cannot rename '" + temporary.path() + "' to '" + path +
                           "': " + format::errno_text(errno)};
    }
    temporary.release();
    return core::fsync_directory(directory_of(path));
}

double seconds_since(std::chrono::steady_clock::time_point started) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

// Runs one snapshot write; what it throws becomes the error a save or a
// replica's copy reports: a write that failed says which file and why, and
// anything else is told after `what` ("cannot save 'PATH'", ...).
template <typename Write>
core::Result<SaveStats> reporting_failures(const std::string& what, Write&& write) {
    try {
        return write();
    } catch (const WriteFailure& failure) {
        return core::Error{failure.message};
    } catch (const std::bad_alloc&) {
        return core::Error{what + ": out of memory"};
    } catch (const std::exception& exception) {
        return core::Error{what + ": " + exception.what()};
    }
}

}  // namespace

core::Result<SaveStats> save_snapshot(const store::Keyspace& keyspace, const std::string& path) {
    const auto started = std::chrono::steady_clock::now();
    return reporting_failures("cannot save '" + path + "'", [&]() -> core::Result<SaveStats> {
        SaveStats stats;
        TemporaryFile temporary(temporary_path_for(path));
        if (!temporary.open()) {
            return core::Error{"cannot create '" + temporary.path() +
                               "': " + format::errno_text(errno)};
        }
        std::uint64_t records = 0;
        {
            SnapshotFileWriter out(temporary.fd(), temporary.path());
            records = write_snapshot(keyspace, out, stats, nullptr);
        }
        if (core::Status durable = make_durable(temporary, path); !durable) {
            return durable.failure();
        }
        stats.keys = records;
        stats.seconds = seconds_since(started);
        return stats;
    });
}

core::Result<SaveStats> stream_snapshot(const store::Keyspace& keyspace, const SnapshotSink& sink,
                                        const SnapshotPositionListener& on_position,
                                        const std::string& name) {
    const auto started = std::chrono::steady_clock::now();
    return reporting_failures("cannot send the snapshot to " + name,
                              [&]() -> core::Result<SaveStats> {
                                  SaveStats stats;
                                  SnapshotFileWriter out(sink, name);
                                  stats.keys = write_snapshot(keyspace, out, stats, on_position);
                                  stats.seconds = seconds_since(started);
                                  return stats;
                              });
}

}  // namespace bloomery::persist
