// Reading the journal back: replay at start and `bloomery --check-journal`.

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <unordered_map>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/persist/journal.hpp"
#include "journal_format.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

namespace jf = journal_format;
using format::errno_text;
using format::get_u32;
using format::get_u64;

namespace {

// A whole segment file, mapped read-only.
class MappedFile {
public:
    bool open(const std::string& path, std::string& error) {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            error = path + ": cannot open: " + errno_text(errno);
            return false;
        }
        struct stat st {};
        if (::fstat(fd, &st) != 0) {
            error = path + ": cannot stat: " + errno_text(errno);
            ::close(fd);
            return false;
        }
        size_ = static_cast<std::size_t>(st.st_size);
        if (size_ != 0) {
            void* data = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
            if (data == MAP_FAILED) {
                error = path + ": cannot map: " + errno_text(errno);
                ::close(fd);
                return false;
            }
            ::madvise(data, size_, MADV_SEQUENTIAL);
            data_ = static_cast<const unsigned char*>(data);
        }
        ::close(fd);
        return true;
    }
    ~MappedFile() {
        if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
    }
    const unsigned char* data() const { return data_; }
    std::size_t size() const { return size_; }

private:
    const unsigned char* data_ = nullptr;
    std::size_t size_ = 0;
};

struct SegmentHeader {
    std::uint64_t id = 0;
    std::uint64_t start = 0;
};

bool parse_segment_header(const MappedFile& file, const std::string& path, SegmentHeader& out,
                          std::string& error) {
    if (file.size() < jf::kSegmentHeaderBytes) {
        error = path + ": " + std::to_string(file.size()) +
                " bytes, shorter than a journal header (" +
                std::to_string(jf::kSegmentHeaderBytes) + ")";
        return false;
    }
    const unsigned char* in = file.data();
    if (std::memcmp(in, jf::kMagic, 8) != 0) {
        error = path + ": not a bloomery journal (bad magic)";
        return false;
    }
    if (get_u32(in + 8) != jf::kVersion) {
        error = path + ": journal format version " + std::to_string(get_u32(in + 8)) +
                " is not supported (this build reads " + std::to_string(jf::kVersion) + ")";
        return false;
    }
    if (get_u64(in + 32) != XXH64(in, 32, 0)) {
        error = path + ": journal header checksum mismatch";
        return false;
    }
    out.id = get_u64(in + 16);
    out.start = get_u64(in + 24);
    return true;
}

// One record, as framed; body points into the mapping.
struct Record {
    std::uint8_t type;
    const unsigned char* body;
    std::size_t body_size;
    std::uint64_t file_offset;  // of the record's first byte
};

enum class Scan { ok, torn, corrupt };

// A record's frame at `pos` when it fits in [pos, size): length, type,
// body, checksum. No check of the body.
bool frame_at(const unsigned char* base, std::size_t size, std::size_t pos, Record& out) {
    if (size - pos < jf::kRecordOverhead) return false;
    const std::uint64_t body = get_u32(base + pos);
    if (body > jf::kMaxRecordBody || body > size - pos - jf::kRecordOverhead) return false;
    out = Record{base[pos + 4], base + pos + 5, static_cast<std::size_t>(body), pos};
    return true;
}

bool checksum_ok(const unsigned char* base, const Record& record) {
    const std::size_t pos = record.file_offset;
    return get_u64(base + pos + 5 + record.body_size) == XXH64(base + pos, 5 + record.body_size, 0);
}

// A cursor over a record's body that refuses to read past it.
class Body {
public:
    explicit Body(const Record& record) : at_(record.body), end_(record.body + record.body_size) {}
    bool u8(std::uint8_t& v) {
        if (end_ - at_ < 1) return false;
        v = *at_++;
        return true;
    }
    bool u32(std::uint32_t& v) {
        if (end_ - at_ < 4) return false;
        v = get_u32(at_);
        at_ += 4;
        return true;
    }
    bool u64(std::uint64_t& v) {
        if (end_ - at_ < 8) return false;
        v = get_u64(at_);
        at_ += 8;
        return true;
    }
    bool bytes(std::string_view& v) {
        std::uint32_t n;
        if (!u32(n) || static_cast<std::size_t>(end_ - at_) < n) return false;
        v = std::string_view(reinterpret_cast<const char*>(at_), n);
        at_ += n;
        return true;
    }
    bool done() const { return at_ == end_; }
    std::size_t left() const { return static_cast<std::size_t>(end_ - at_); }

private:
    const unsigned char* at_;
    const unsigned char* end_;
};

// A record's body decoded.
struct Decoded {
    std::string_view key, other, data;
    std::int64_t deadline = 0;
    std::uint64_t filter_id = 0;
    std::int64_t iter = 0;
    std::uint32_t count = 0;
    const unsigned char* adds = nullptr;
};

bool decode(const Record& record, Decoded& d, std::string& why) {
    Body body(record);
    std::uint64_t v = 0;
    bool ok = false;
    switch (record.type) {
        case jf::kCreate:
            ok = body.bytes(d.key) && body.u64(v) && body.u64(d.filter_id) && body.bytes(d.data) &&
                 d.filter_id <= bloom::ScalableFilter::kMaxFilterId;
            d.deadline = static_cast<std::int64_t>(v);
            break;
        case jf::kAdd:
            ok = body.u64(d.filter_id) && body.u32(d.count) && d.count != 0 &&
                 d.filter_id <= bloom::ScalableFilter::kMaxFilterId &&
                 body.left() == std::uint64_t{d.count} * jf::kAddEntryBytes;
            if (ok) {
                d.adds = record.body + 12;
                return true;
            }
            break;
        case jf::kDelete:
            ok = body.bytes(d.key);
            break;
        case jf::kRename:
            ok = body.bytes(d.key) && body.bytes(d.other);
            break;
        case jf::kExpire:
            ok = body.bytes(d.key) && body.u64(v);
            d.deadline = static_cast<std::int64_t>(v);
            break;
        case jf::kFlushAll:
        case jf::kPing:
            ok = true;
            break;
        case jf::kChunk:
            ok = body.u64(d.filter_id) && body.u64(v) && body.bytes(d.data) &&
                 d.filter_id <= bloom::ScalableFilter::kMaxFilterId;
            d.iter = static_cast<std::int64_t>(v);
            break;
        default:
            why = "unknown record type " + std::to_string(record.type);
            return false;
    }
    if (!ok || !body.done()) {
        why = std::string("malformed ") + jf::type_name(record.type) + " record";
        return false;
    }
    return true;
}

// Whether a whole, valid record (its body decodes and its checksum holds)
// starts anywhere in (from, size): a crash leaves nothing valid after the
// record it cut short.
bool valid_record_after(const unsigned char* base, std::size_t size, std::size_t from) {
    for (std::size_t q = from + 1; q + jf::kRecordOverhead <= size; ++q) {
        Record record{};
        if (!frame_at(base, size, q, record)) continue;
        Decoded decoded;
        std::string why;
        // Cheap checks first (type, lengths inside the body), the hash last.
        if (decode(record, decoded, why) && checksum_ok(base, record)) return true;
    }
    return false;
}

// Reads the record at `pos`. torn: only what a crash can leave, a last
// record the file ends inside of (shorter than its length says) with no
// valid record after it. corrupt: anything else that is not a valid record
// (a bad checksum, a length that runs past the end with records after it,
// zeros where a record should be).
Scan next_record(const unsigned char* base, std::size_t size, std::size_t pos, Record& out,
                 std::string& why) {
    const std::size_t left = size - pos;
    if (!frame_at(base, size, pos, out)) {
        const bool header_cut = left < jf::kRecordOverhead;
        if (!header_cut && get_u32(base + pos) > jf::kMaxRecordBody) {
            why = "a record length of " + std::to_string(get_u32(base + pos)) +
                  " bytes, above the limit";
            return Scan::corrupt;
        }
        if (valid_record_after(base, size, pos)) {
            why = header_cut ? "a record header cut short before valid records"
                             : "a record length that runs past the end of the file, with "
                               "valid records after it";
            return Scan::corrupt;
        }
        why = header_cut ? "the file ends inside a record header"
                         : "the file ends inside a record of " +
                               std::to_string(get_u32(base + pos)) + " bytes";
        return Scan::torn;
    }
    if (!checksum_ok(base, out)) {
        why = "record checksum mismatch";
        return Scan::corrupt;
    }
    return Scan::ok;
}

Scan next_record(const MappedFile& file, std::size_t pos, Record& out, std::string& why) {
    return next_record(file.data(), file.size(), pos, out, why);
}

// Applies records to a keyspace, finding filters by the id they were
// journaled under. Every record is redone as it says (keyspace.hpp's write
// path, which records it again in the keyspace's own log if it has one: a
// replica's journal); nothing is decided again.
class Applier {
public:
    explicit Applier(store::Keyspace& keyspace) : keyspace_(keyspace) {
        const store::KeyspaceView view = keyspace.view(/*for_snapshot=*/false);
        for (std::size_t i = 0; i < view.size(); ++i) {
            const bloom::FilterRef& filter = view.entry(i).filter;
            by_id_[filter->id()] = filter;
            max_id_ = std::max(max_id_, filter->id());
        }
    }
    std::uint64_t max_id() const { return max_id_; }

    bool apply(std::uint8_t type, const Decoded& d, std::string& why) {
        switch (type) {
            case jf::kCreate: {
                bloom::DumpHeader header;
                std::string error;
                if (!bloom::parse_header(d.data, header, error)) {
                    why = "CREATE record: " + error;
                    return false;
                }
                bloom::FilterRef filter = bloom::build_filter(header);
                filter->set_id(d.filter_id);
                max_id_ = std::max(max_id_, d.filter_id);
                // A replica promoted later names its new filters past every
                // id it holds.
                bloom::ScalableFilter::reserve_ids_through(d.filter_id);
                forget(d.key);
                keyspace_.put(d.key, filter, d.deadline);
                by_id_[d.filter_id] = std::move(filter);
                return true;
            }
            case jf::kAdd: {
                auto it = by_id_.find(d.filter_id);
                if (it == by_id_.end()) return true;  // deleted before this add landed
                bloom::ScalableFilter& filter = *it->second;
                adds_.resize(d.count);
                for (std::uint32_t i = 0; i < d.count; ++i) {
                    const unsigned char* entry = d.adds + i * jf::kAddEntryBytes;
                    adds_[i] = {entry[0], {get_u64(entry + 1), get_u64(entry + 9)}};
                }
                // Prefetch every item's block or word first, so the cache
                // misses of a large filter overlap (10M adds into a 1 GiB
                // filter replayed at 2.7 µs per add without this).
                const std::size_t layers = filter.num_layers();
                for (const store::Keyspace::RecordedAdd& add : adds_) {
                    if (add.layer < layers) filter.layer(add.layer).prefetch(add.hash);
                }
                if (!keyspace_.redo_adds(filter, adds_)) {
                    why = "ADD record: a layer beyond what the filter can grow to";
                    return false;
                }
                return true;
            }
            case jf::kDelete:
                forget(d.key);
                keyspace_.erase(d.key);
                return true;
            case jf::kRename:
                if (d.key != d.other) forget(d.other);
                keyspace_.rename(d.key, d.other);
                return true;
            case jf::kExpire:
                if (d.deadline != 0 && d.deadline <= store::now_ms()) forget(d.key);
                keyspace_.set_expiry(d.key, d.deadline);
                return true;
            case jf::kFlushAll:
                by_id_.clear();
                keyspace_.clear();
                return true;
            case jf::kPing:
                return true;
            case jf::kChunk: {
                auto it = by_id_.find(d.filter_id);
                if (it == by_id_.end()) return true;
                // A server writes only chunks it checked; one that does not
                // fit comes from a journal of an older version, which
                // recorded chunks before checking them (and applied none).
                std::string error;
                keyspace_.redo_chunk(*it->second, d.iter, d.data, error);
                return true;
            }
            default:
                why = "unknown record type";
                return false;
        }
    }

private:
    // The filter under `key` leaves the keyspace: adds journaled for it
    // later (they raced the change) go nowhere, as they did.
    void forget(std::string_view key) {
        if (auto entry = keyspace_.get(key)) by_id_.erase(entry->filter->id());
    }

    store::Keyspace& keyspace_;
    std::vector<store::Keyspace::RecordedAdd> adds_;
    std::unordered_map<std::uint64_t, bloom::FilterRef> by_id_;
    std::uint64_t max_id_ = 0;
};

struct SegmentFile {
    std::uint64_t start;
    std::string path;
    SegmentHeader header;
};

// Segment files in `dir` named "<basename>.<20 digits>", oldest first. A
// name whose number does not fit 64 bits is no segment of ours: left alone.
std::vector<SegmentFile> list_segments(const std::string& dir, const std::string& basename) {
    std::vector<SegmentFile> out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        std::uint64_t start = 0;
        if (!jf::parse_segment_name(name, basename, start)) {
            if (name.rfind(basename + ".", 0) == 0 && name.size() == basename.size() + 21) {
                spdlog::warn("journal: ignoring {}: not a segment name this server writes",
                             entry.path().string());
            }
            continue;
        }
        out.push_back({start, entry.path().string(), {}});
    }
    std::sort(out.begin(), out.end(),
              [](const SegmentFile& a, const SegmentFile& b) { return a.start < b.start; });
    return out;
}

}  // namespace

bool replay_journal(const std::string& dir, const std::string& basename, bool have_snapshot,
                    std::uint64_t snapshot_id, std::uint64_t snapshot_position,
                    store::Keyspace& keyspace, ReplayStats& stats, std::string& error) {
    const auto began = std::chrono::steady_clock::now();
    std::vector<SegmentFile> segments = list_segments(dir, basename);
    // Read every header; keep the segments of the snapshot's journal (or,
    // without a snapshot, of the one journal there is).
    // A crash while a segment was being created can leave the newest one
    // shorter than its header (nothing was ever appended to it): drop it.
    if (!segments.empty()) {
        std::error_code ec;
        const SegmentFile& newest = segments.back();
        const auto size = std::filesystem::file_size(newest.path, ec);
        if (!ec && size < jf::kSegmentHeaderBytes) {
            spdlog::warn(
                "journal: {} is {} bytes, a segment cut short while it was created; "
                "removing it",
                newest.path, size);
            std::filesystem::remove(newest.path, ec);
            segments.pop_back();
        }
    }
    for (SegmentFile& segment : segments) {
        MappedFile file;
        if (!file.open(segment.path, error) ||
            !parse_segment_header(file, segment.path, segment.header, error)) {
            return false;
        }
        if (segment.header.start != segment.start) {
            error = segment.path + ": header says it starts at offset " +
                    std::to_string(segment.header.start) + ", its name at " +
                    std::to_string(segment.start);
            return false;
        }
    }
    std::uint64_t id = snapshot_id;
    if (!have_snapshot && !segments.empty()) id = segments.front().header.id;
    std::vector<SegmentFile> ours;
    for (SegmentFile& segment : segments) {
        if (segment.header.id == id) {
            ours.push_back(std::move(segment));
            continue;
        }
        // Another history (written before the snapshot was made without a
        // journal, or by another server): kept aside, never replayed.
        const std::string aside = segment.path + ".stale";
        std::error_code ec;
        std::filesystem::rename(segment.path, aside, ec);
        spdlog::warn(
            "journal: {} belongs to another journal than the snapshot's; renamed to {} and not "
            "loaded",
            segment.path, aside);
    }
    stats = ReplayStats{};
    stats.id = id;
    stats.end = snapshot_position;
    if (ours.empty()) {
        stats.seconds = 0;
        return true;
    }
    if (ours.front().start > snapshot_position) {
        error = ours.front().path + ": the journal starts at offset " +
                std::to_string(ours.front().start) + " but the snapshot covers it only up to " +
                std::to_string(snapshot_position) + "; the records in between are missing";
        return false;
    }
    Applier applier(keyspace);
    std::uint64_t expected_start = ours.front().start;
    for (std::size_t s = 0; s < ours.size(); ++s) {
        const SegmentFile& segment = ours[s];
        const bool last = s + 1 == ours.size();
        // A gap is harmless only below what the snapshot covers (a tail the
        // snapshot already held was lost in a crash, and a new segment began
        // at the snapshot's position).
        if (segment.start != expected_start &&
            !(segment.start > expected_start && segment.start <= snapshot_position)) {
            error = segment.path + ": starts at offset " + std::to_string(segment.start) +
                    " but the segment before it ends at " + std::to_string(expected_start);
            return false;
        }
        MappedFile file;
        if (!file.open(segment.path, error)) return false;
        std::size_t pos = jf::kSegmentHeaderBytes;
        while (pos < file.size()) {
            Record record{};
            std::string why;
            const Scan scan = next_record(file, pos, record, why);
            const std::uint64_t offset = segment.start + (pos - jf::kSegmentHeaderBytes);
            if (scan == Scan::torn && last) {
                stats.truncated_bytes = file.size() - pos;
                spdlog::warn(
                    "journal: {}: {} at offset {} (file byte {}); cutting {} bytes off the end "
                    "(a crash during a write)",
                    segment.path, why, offset, pos, stats.truncated_bytes);
                if (::truncate(segment.path.c_str(), static_cast<off_t>(pos)) != 0) {
                    error =
                        segment.path + ": cannot truncate the torn record: " + errno_text(errno);
                    return false;
                }
                break;
            }
            if (scan != Scan::ok) {
                error = segment.path + ": offset " + std::to_string(offset) + " (file byte " +
                        std::to_string(pos) + "): " + why + "; run bloomery --check-journal on it";
                return false;
            }
            Decoded decoded;
            if (!decode(record, decoded, why)) {
                error = segment.path + ": offset " + std::to_string(offset) + ": " + why;
                return false;
            }
            if (offset >= snapshot_position) {
                bool applied = false;
                try {
                    applied = applier.apply(record.type, decoded, why);
                } catch (const std::bad_alloc&) {
                    why = std::string("out of memory applying a ") + jf::type_name(record.type) +
                          " record";
                } catch (const std::length_error&) {
                    why = std::string("out of memory applying a ") + jf::type_name(record.type) +
                          " record";
                }
                if (!applied) {
                    error = segment.path + ": offset " + std::to_string(offset) + ": " + why;
                    return false;
                }
                ++stats.records;
            } else {
                ++stats.skipped;
            }
            pos += jf::kRecordOverhead + record.body_size;
        }
        const std::uint64_t end =
            segment.start + (std::min<std::size_t>(pos, file.size()) - jf::kSegmentHeaderBytes);
        expected_start = end;
        ++stats.segments;
        if (last) {
            stats.end = std::max(end, snapshot_position);
            stats.last_segment = segment.path;
        }
    }
    if (stats.end > expected_start) {
        // The snapshot covers more than the journal holds (its tail was cut
        // off as torn after the snapshot was made): start a new segment.
        stats.last_segment.clear();
    }
    stats.max_filter_id = applier.max_id();
    bloom::ScalableFilter::reserve_ids_through(stats.max_filter_id);
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    return true;
}

struct StreamApplier::Impl {
    explicit Impl(store::Keyspace& keyspace) : applier(keyspace) {}
    Applier applier;
    std::uint64_t records = 0;
};

StreamApplier::StreamApplier(store::Keyspace& keyspace) : impl_(std::make_unique<Impl>(keyspace)) {}

StreamApplier::~StreamApplier() = default;

std::uint64_t StreamApplier::records() const {
    return impl_->records;
}

bool StreamApplier::apply(std::string_view data, std::size_t& consumed, std::string& error) {
    const auto* base = reinterpret_cast<const unsigned char*>(data.data());
    consumed = 0;
    while (consumed < data.size()) {
        const std::size_t left = data.size() - consumed;
        // Wait for the whole record: a stream ends mid-record all the time.
        if (left < jf::kRecordOverhead) return true;
        const std::uint64_t body = get_u32(base + consumed);
        if (body > jf::kMaxRecordBody) {
            error = "replication stream: a record of " + std::to_string(body) + " bytes";
            return false;
        }
        if (left < jf::kRecordOverhead + body) return true;
        Record record{};
        std::string why;
        // Whole, so anything but ok (a bad checksum, zeros) is corruption.
        const std::size_t end = consumed + jf::kRecordOverhead + static_cast<std::size_t>(body);
        const Scan scan = next_record(base, end, consumed, record, why);
        if (scan != Scan::ok) {
            error = "replication stream: " + why;
            return false;
        }
        Decoded decoded;
        if (!decode(record, decoded, why)) {
            error = "replication stream: " + why;
            return false;
        }
        bool applied = false;
        try {
            applied = impl_->applier.apply(record.type, decoded, why);
        } catch (const std::exception&) {
            why = std::string("out of memory applying a ") + jf::type_name(record.type) + " record";
        }
        if (!applied) {
            error = std::string("replication stream: ") + why;
            return false;
        }
        ++impl_->records;
        consumed = end;
    }
    return true;
}

bool check_journal(const std::string& path, bool fix, std::string& report, std::string& error) {
    MappedFile file;
    SegmentHeader header;
    if (!file.open(path, error) || !parse_segment_header(file, path, header, error)) return false;
    report += "journal " + path + "\n";
    report += "format version " + std::to_string(jf::kVersion) + ", journal id " +
              std::to_string(header.id) + ", starts at offset " + std::to_string(header.start) +
              "\n";
    std::uint64_t counts[jf::kLastRecordType + 1] = {};
    std::uint64_t adds = 0;
    std::size_t pos = jf::kSegmentHeaderBytes;
    std::string problem;
    while (pos < file.size()) {
        Record record{};
        std::string why;
        const Scan scan = next_record(file, pos, record, why);
        Decoded decoded;
        if (scan == Scan::ok && !decode(record, decoded, why)) {
            problem = why;
        } else if (scan != Scan::ok) {
            problem = why + (scan == Scan::torn ? " (a torn last write)" : "");
        }
        if (!problem.empty()) break;
        ++counts[record.type];
        if (record.type == jf::kAdd) adds += decoded.count;
        pos += jf::kRecordOverhead + record.body_size;
    }
    for (std::uint8_t type = jf::kCreate; type <= jf::kLastRecordType; ++type) {
        report += std::string(jf::type_name(type)) + " records: " + std::to_string(counts[type]);
        if (type == jf::kAdd) report += " (" + std::to_string(adds) + " items)";
        report += "\n";
    }
    const std::uint64_t good_end = header.start + (pos - jf::kSegmentHeaderBytes);
    report += "valid up to offset " + std::to_string(good_end) + " (file byte " +
              std::to_string(pos) + " of " + std::to_string(file.size()) + ")\n";
    if (problem.empty()) {
        report += "OK\n";
        return true;
    }
    const std::string where = path + ": offset " + std::to_string(good_end) + " (file byte " +
                              std::to_string(pos) + "): " + problem;
    if (!fix) {
        error = where + "; --fix cuts the file there, losing " + std::to_string(file.size() - pos) +
                " bytes";
        return false;
    }
    if (::truncate(path.c_str(), static_cast<off_t>(pos)) != 0) {
        error = where + "; cannot truncate: " + errno_text(errno);
        return false;
    }
    report +=
        "fixed: " + where + "; cut " + std::to_string(file.size() - pos) + " bytes off the end\n";
    return true;
}

}  // namespace bloomery::persist
