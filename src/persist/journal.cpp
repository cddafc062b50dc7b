#include "bloomery/persist/journal.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/core/memory.hpp"
#include "journal_format.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

namespace jf = journal_format;
static_assert(kJournalSegmentHeaderBytes == jf::kSegmentHeaderBytes);
using format::errno_text;
using format::put_u32;
using format::put_u64;

namespace {

std::int64_t steady_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// fdatasync of a directory entry's parent, so a created or removed segment
// survives a power loss.
bool sync_directory(const std::string& dir, std::string& error) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        error = "cannot open directory '" + dir + "': " + errno_text(errno);
        return false;
    }
    const bool ok = ::fsync(fd) == 0;
    if (!ok) error = "cannot fsync directory '" + dir + "': " + errno_text(errno);
    ::close(fd);
    return ok;
}

std::string segment_header(std::uint64_t id, std::uint64_t start) {
    std::string header(jf::kSegmentHeaderBytes, '\0');
    auto* out = reinterpret_cast<unsigned char*>(header.data());
    std::memcpy(out, jf::kMagic, 8);
    put_u32(out + 8, jf::kVersion);
    put_u32(out + 12, 0);
    put_u64(out + 16, id);
    put_u64(out + 24, start);
    put_u64(out + 32, XXH64(out, 32, 0));
    return header;
}

}  // namespace

bool parse_fsync_policy(std::string_view text, FsyncPolicy& out) {
    if (text == "always") {
        out = FsyncPolicy::always;
    } else if (text == "everysec") {
        out = FsyncPolicy::everysec;
    } else if (text == "no") {
        out = FsyncPolicy::no;
    } else {
        return false;
    }
    return true;
}

const char* fsync_policy_name(FsyncPolicy policy) {
    switch (policy) {
        case FsyncPolicy::always:
            return "always";
        case FsyncPolicy::everysec:
            return "everysec";
        default:
            return "no";
    }
}

std::uint64_t new_journal_id() {
    std::random_device device;
    std::uint64_t id = 0;
    while (id == 0) id = (std::uint64_t{device()} << 32) ^ device();
    return id;
}

namespace {
std::atomic<std::uint64_t> g_journal_serial{0};
}

Journal::Journal(std::string dir, std::string basename, FsyncPolicy policy,
                 std::uint64_t buffer_limit)
    : dir_(std::move(dir)),
      basename_(std::move(basename)),
      policy_(policy),
      buffer_limit_(buffer_limit),
      locals_(policy == FsyncPolicy::always ? nullptr : new LocalBuffer[kLocalBuffers]),
      serial_(g_journal_serial.fetch_add(1, std::memory_order_relaxed) + 1) {}

Journal::~Journal() {
    close();
    if (locals_ != nullptr) {
        for (std::size_t i = 0; i < kLocalBuffers; ++i) {
            core::memory_add(core::MemoryUse::other,
                             -static_cast<std::int64_t>(locals_[i].charged));
        }
    }
}

bool Journal::open(std::uint64_t id, std::uint64_t offset, const std::string& existing,
                   std::string& error) {
    id_ = id;
    appended_.store(offset, std::memory_order_relaxed);
    durable_.store(offset, std::memory_order_relaxed);
    written_ = offset;
    written_offset_.store(offset, std::memory_order_relaxed);
    // Every older segment of this journal is still on disk until a snapshot
    // covers it; list them so drop_covered() can remove them.
    std::error_code ec;
    std::uint64_t total = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
        const std::string name = entry.path().filename().string();
        const std::string prefix = basename_ + ".";
        if (name.size() != prefix.size() + 20 || name.rfind(prefix, 0) != 0) continue;
        if (!std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                         [](char c) { return c >= '0' && c <= '9'; })) {
            continue;
        }
        if (entry.path().string() == existing) continue;
        const std::uint64_t start = std::stoull(name.substr(prefix.size()));
        segments_.push_back({start, entry.path().string()});
        total += entry.file_size(ec);
    }
    std::sort(segments_.begin(), segments_.end(),
              [](const Segment& a, const Segment& b) { return a.start < b.start; });
    if (!existing.empty()) {
        fd_ = ::open(existing.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd_ < 0) {
            error = "cannot open journal '" + existing + "': " + errno_text(errno);
            return false;
        }
        const off_t end = ::lseek(fd_, 0, SEEK_END);
        if (end < 0) {
            error = "cannot seek in journal '" + existing + "': " + errno_text(errno);
            return false;
        }
        segment_size_ = synced_segment_size_ = static_cast<std::uint64_t>(end);
        const std::string name = std::filesystem::path(existing).filename().string();
        segments_.push_back({std::stoull(name.substr(basename_.size() + 1)), existing});
        total += segment_size_;
        current_path_ = existing;
        file_bytes_.store(total, std::memory_order_relaxed);
    } else {
        file_bytes_.store(total, std::memory_order_relaxed);
        if (!open_segment(offset, error)) return false;
        total += jf::kSegmentHeaderBytes;
    }
    base_bytes_.store(total, std::memory_order_relaxed);
    last_sync_ms_ = steady_ms();
    writer_ = std::thread([this] { run(); });
    return true;
}

// Creates the segment file for `start`, writes and syncs its header and the
// directory. Called by open() before the writer starts, and by the writer.
bool Journal::open_segment(std::uint64_t start, std::string& error) {
    const std::string path = dir_ + "/" + jf::segment_name(basename_, start);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        error = "cannot create journal '" + path + "': " + errno_text(errno);
        return false;
    }
    const std::string header = segment_header(id_, start);
    std::size_t done = 0;
    while (done < header.size()) {
        const ssize_t n = ::write(fd, header.data() + done, header.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            error = "cannot write journal '" + path + "': " + errno_text(n < 0 ? errno : ENOSPC);
            ::close(fd);
            ::unlink(path.c_str());
            return false;
        }
        done += static_cast<std::size_t>(n);
    }
    if (::fdatasync(fd) != 0 || !sync_directory(dir_, error)) {
        if (error.empty()) error = "cannot fsync journal '" + path + "': " + errno_text(errno);
        ::close(fd);
        ::unlink(path.c_str());
        return false;
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
    segment_size_ = synced_segment_size_ = header.size();
    current_path_ = path;
    file_bytes_.fetch_add(header.size(), std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    segments_.push_back({start, path});
    return true;
}

void Journal::close() {
    {
        std::lock_guard lock(mutex_);
        if (!writer_.joinable()) return;
        stop_ = true;
    }
    wake_.notify_all();
    writer_.join();
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    // Whoever still waits will not be answered (their clients are gone at
    // exit); run nothing.
    std::lock_guard lock(waiters_mutex_);
    waiters_.clear();
}

namespace {
thread_local std::uint64_t t_last_appended = 0;

// The buffer this thread claimed in the journal of serial `serial` (nullptr
// with a serial: none was left).
struct ThreadBuffer {
    std::uint64_t serial = 0;
    void* buffer = nullptr;
};
thread_local ThreadBuffer t_buffer;

// One record (u32 body length, type, body, XXH64) appended to `into`.
template <class Encode>
std::size_t encode_record(std::string& into, std::uint8_t type, std::size_t body_bytes,
                          Encode&& encode) {
    const std::size_t total = jf::kRecordOverhead + body_bytes;
    const std::size_t at = into.size();
    into.resize(at + total);
    auto* out = reinterpret_cast<unsigned char*>(into.data() + at);
    put_u32(out, static_cast<std::uint32_t>(body_bytes));
    out[4] = type;
    encode(out + 5);
    put_u64(out + 5 + body_bytes, XXH64(out, 5 + body_bytes, 0));
    return total;
}
}  // namespace

void Journal::reset_thread_mark() {
    t_last_appended = 0;
}

std::uint64_t Journal::thread_mark() {
    return t_last_appended;
}

Journal::LocalBuffer* Journal::local_buffer() {
    if (locals_ == nullptr) return nullptr;
    if (t_buffer.serial != serial_) {
        const std::size_t index = locals_claimed_.fetch_add(1, std::memory_order_relaxed);
        t_buffer.serial = serial_;
        t_buffer.buffer = index < kLocalBuffers ? &locals_[index] : nullptr;
        if (index >= kLocalBuffers) locals_claimed_.store(kLocalBuffers, std::memory_order_relaxed);
    }
    return static_cast<LocalBuffer*>(t_buffer.buffer);
}

void Journal::appended_bytes(std::size_t bytes) {
    const std::uint64_t end = appended_.load(std::memory_order_relaxed) + bytes;
    appended_.store(end, std::memory_order_release);
    t_last_appended = end;
    // The writer subtracts without the mutex: a read-modify-write.
    const std::uint64_t held = buffered_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    if (held > buffer_limit_ && !failing_.load(std::memory_order_relaxed)) {
        failing_.store(true, std::memory_order_relaxed);
    }
    core::memory_add(core::MemoryUse::other, static_cast<std::int64_t>(bytes));
}

bool Journal::take_local(LocalBuffer& local) {
    if (local.records.empty()) return false;
    pending_.append(local.records);
    const std::size_t bytes = local.records.size();
    local.records.clear();  // keeps its capacity, which the owner has counted
    local.bytes.store(0, std::memory_order_relaxed);
    appended_bytes(bytes);
    return true;
}

bool Journal::take_all_locals() {
    if (locals_ == nullptr) return false;
    bool any = false;
    const std::size_t claimed =
        std::min(locals_claimed_.load(std::memory_order_acquire), kLocalBuffers);
    for (std::size_t i = 0; i < claimed; ++i) {
        LocalBuffer& local = locals_[i];
        if (local.bytes.load(std::memory_order_seq_cst) == 0) continue;
        std::lock_guard local_lock(local.mutex);
        any = take_local(local) || any;
    }
    return any;
}

bool Journal::locals_pending() const {
    if (locals_ == nullptr) return false;
    const std::size_t claimed =
        std::min(locals_claimed_.load(std::memory_order_acquire), kLocalBuffers);
    for (std::size_t i = 0; i < claimed; ++i) {
        if (locals_[i].bytes.load(std::memory_order_seq_cst) != 0) return true;
    }
    return false;
}

void Journal::wake_writer() {
    // Pairs with run(): the writer stores writer_idle_ = true and then reads
    // every buffer's bytes; this thread stored its bytes and then reads
    // writer_idle_ (all seq_cst). Either the writer sees the bytes and does
    // not sleep, or this thread sees it idle and wakes it. Under load the
    // writer never sleeps, so this is a plain load of a line nobody writes.
    if (!writer_idle_.load(std::memory_order_seq_cst)) return;
    bool wake;
    {
        std::lock_guard lock(mutex_);
        wake = claim_idle_writer();
    }
    if (wake) wake_.notify_one();
}

bool Journal::claim_idle_writer() {
    if (!writer_idle_.load(std::memory_order_relaxed)) return false;
    writer_idle_.store(false, std::memory_order_relaxed);
    return true;
}

template <class Encode>
void Journal::append(std::uint8_t type, std::size_t body_bytes, Encode&& encode) {
    LocalBuffer* local = local_buffer();
    bool wake = false;
    {
        std::lock_guard lock(mutex_);
        // This thread's buffered adds go first, so its own records keep the
        // order in which it made them.
        if (local != nullptr && local->bytes.load(std::memory_order_relaxed) != 0) {
            std::lock_guard local_lock(local->mutex);
            take_local(*local);
        }
        appended_bytes(encode_record(pending_, type, body_bytes, encode));
        wake = claim_idle_writer();
    }
    if (wake) wake_.notify_one();
}

namespace {
unsigned char* put_bytes(unsigned char* out, std::string_view bytes) {
    put_u32(out, static_cast<std::uint32_t>(bytes.size()));
    if (!bytes.empty()) std::memcpy(out + 4, bytes.data(), bytes.size());
    return out + 4 + bytes.size();
}
}  // namespace

void Journal::adding(const bloom::ScalableFilter& filter, std::span<const bloom::LoggedAdd> adds) {
    const std::size_t body_bytes = 8 + 4 + adds.size() * jf::kAddEntryBytes;
    const auto encode = [&](unsigned char* out) {
        put_u64(out, filter.id());
        put_u32(out + 8, static_cast<std::uint32_t>(adds.size()));
        out += 12;
        for (const bloom::LoggedAdd& add : adds) {
            out[0] = static_cast<unsigned char>(add.layer);
            put_u64(out + 1, add.hash.h1);
            put_u64(out + 9, add.hash.h2);
            out += jf::kAddEntryBytes;
        }
    };
    if (LocalBuffer* local = local_buffer(); local != nullptr) {
        // everysec / no: into this thread's buffer. One journal mutex per
        // add made BF.ADD from 8 threads cost 4.2 µs of CPU against 1.1 µs
        // from one, on 16 cores (README, "Many cores"); the buffer's mutex is
        // taken by others only when the writer moves it, once a millisecond.
        std::size_t held = 0;
        {
            std::lock_guard local_lock(local->mutex);
            encode_record(local->records, jf::kAdd, body_bytes, encode);
            held = local->records.size();
            local->bytes.store(held, std::memory_order_seq_cst);
            if (local->records.capacity() != local->charged) {
                core::memory_add(core::MemoryUse::other,
                                 static_cast<std::int64_t>(local->records.capacity()) -
                                     static_cast<std::int64_t>(local->charged));
                local->charged = local->records.capacity();
            }
        }
        if (held >= kLocalFlushBytes) {
            std::lock_guard lock(mutex_);
            std::lock_guard local_lock(local->mutex);
            take_local(*local);
        }
        wake_writer();
    } else {
        append(jf::kAdd, body_bytes, encode);
    }
    // The caller sets the bits next, with relaxed atomics: order the record's
    // offset (appended_) before them for a reader that sees a bit and then
    // reads appended() after an acquire fence (net/connection.cpp), so it
    // waits for this record under appendfsync always.
    std::atomic_thread_fence(std::memory_order_release);
}

void Journal::created(std::string_view key, const bloom::ScalableFilter& filter,
                      std::int64_t expire_at_ms) {
    const std::string header = bloom::encode_header(filter);
    append(jf::kCreate, 4 + key.size() + 8 + 8 + 4 + header.size(), [&](unsigned char* out) {
        out = put_bytes(out, key);
        put_u64(out, static_cast<std::uint64_t>(expire_at_ms));
        put_u64(out + 8, filter.id());
        put_bytes(out + 16, header);
    });
}

void Journal::deleted(std::string_view key) {
    append(jf::kDelete, 4 + key.size(), [&](unsigned char* out) { put_bytes(out, key); });
}

void Journal::renamed(std::string_view from, std::string_view to) {
    append(jf::kRename, 8 + from.size() + to.size(),
           [&](unsigned char* out) { put_bytes(put_bytes(out, from), to); });
}

void Journal::expiry_set(std::string_view key, std::int64_t expire_at_ms) {
    append(jf::kExpire, 4 + key.size() + 8, [&](unsigned char* out) {
        put_u64(put_bytes(out, key), static_cast<std::uint64_t>(expire_at_ms));
    });
}

void Journal::cleared() {
    append(jf::kFlushAll, 0, [](unsigned char*) {});
}

void Journal::ping() {
    append(jf::kPing, 0, [](unsigned char*) {});
}

std::vector<Journal::SegmentFile> Journal::segment_files() const {
    std::lock_guard lock(mutex_);
    std::vector<SegmentFile> out;
    out.reserve(segments_.size());
    for (const Segment& segment : segments_) out.push_back({segment.start, segment.path});
    return out;
}

void Journal::chunk_loading(const bloom::ScalableFilter& filter, std::int64_t iter,
                            std::string_view data) {
    append(jf::kChunk, 8 + 8 + 4 + data.size(), [&](unsigned char* out) {
        put_u64(out, filter.id());
        put_u64(out + 8, static_cast<std::uint64_t>(iter));
        put_bytes(out + 16, data);
    });
}

std::uint64_t Journal::position() {
    bool wake = false;
    {
        std::lock_guard lock(mutex_);
        wake = take_all_locals() && claim_idle_writer();
    }
    if (wake) wake_.notify_one();
    return appended();
}

void Journal::when_durable(std::uint64_t offset, std::function<void()> fn) {
    {
        std::lock_guard lock(waiters_mutex_);
        // Checked under the lock notify_durable() takes after advancing
        // durable_, so a waiter is either seen by it or sees the new value.
        if (durable() < offset) {
            waiters_.emplace_back(offset, std::move(fn));
            return;
        }
    }
    fn();
}

std::size_t Journal::notify_durable() {
    std::vector<std::function<void()>> ready;
    {
        std::lock_guard lock(waiters_mutex_);
        const std::uint64_t done = durable();
        auto keep = std::partition(waiters_.begin(), waiters_.end(),
                                   [done](const auto& w) { return w.first > done; });
        for (auto it = keep; it != waiters_.end(); ++it) ready.push_back(std::move(it->second));
        waiters_.erase(keep, waiters_.end());
    }
    for (auto& fn : ready) fn();
    return ready.size();
}

std::string Journal::failure() const {
    std::lock_guard lock(mutex_);
    if (!failure_.empty()) return failure_;
    if (failing_.load(std::memory_order_relaxed)) {
        return "journal buffer over " + std::to_string(buffer_limit_) +
               " bytes (the disk is slower than the writes)";
    }
    return {};
}

void Journal::set_failure(const std::string& what) {
    std::lock_guard lock(mutex_);
    if (failure_ != what) spdlog::error("journal: {}", what);
    failure_ = what;
    write_failed_ = true;
    failing_.store(true, std::memory_order_relaxed);
}

// Writes unwritten_ to the current segment; what was written moves to
// unsynced_ with appendfsync always (kept until fdatasync succeeds).
bool Journal::write_unwritten() {
    std::size_t done = 0;
    bool ok = true;
    while (done < unwritten_.size()) {
        const ssize_t n = ::write(fd_, unwritten_.data() + done, unwritten_.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            set_failure("cannot write journal '" + current_path_ +
                        "': " + errno_text(n < 0 ? errno : ENOSPC));
            ok = false;
            break;
        }
        done += static_cast<std::size_t>(n);
    }
    written_ += done;
    written_offset_.store(written_, std::memory_order_release);
    segment_size_ += done;
    file_bytes_.fetch_add(done, std::memory_order_relaxed);
    if (done != 0 && write_listener_) write_listener_(written_);
    if (policy_ == FsyncPolicy::always) {
        unsynced_.append(unwritten_, 0, done);
    } else {
        // everysec and no keep nothing once written: a failed fdatasync can
        // then lose up to a second of records (the loss everysec accepts),
        // and holding a second of records would cost tens of megabytes.
        buffered_.fetch_sub(done, std::memory_order_relaxed);
        core::memory_add(core::MemoryUse::other, -static_cast<std::int64_t>(done));
        if (policy_ == FsyncPolicy::no) durable_.store(written_, std::memory_order_release);
    }
    unwritten_.erase(0, done);
    return ok;
}

bool Journal::sync() {
    if (unsynced_.empty() && segment_size_ == synced_segment_size_) return true;
    syncing_.store(true, std::memory_order_relaxed);
    const std::int64_t began = steady_ms();
    const int rc = ::fdatasync(fd_);
    const int saved_errno = errno;
    const std::int64_t took = steady_ms() - began;
    syncing_.store(false, std::memory_order_relaxed);
    fsyncs_.fetch_add(1, std::memory_order_relaxed);
    last_fsync_ms_.store(took, std::memory_order_relaxed);
    if (took > 2000) {
        delayed_fsyncs_.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("journal: fdatasync took {} ms (the disk is busy)", took);
    }
    last_sync_ms_ = steady_ms();
    if (rc != 0) {
        // After a failed fdatasync the kernel may have dropped the dirty
        // pages. With appendfsync always, cut the file back to what is known
        // durable and write the rest again from memory (nobody was answered
        // yet); otherwise retry the fdatasync.
        set_failure("cannot fsync journal '" + current_path_ + "': " + errno_text(saved_errno));
        if (policy_ == FsyncPolicy::always &&
            ::ftruncate(fd_, static_cast<off_t>(synced_segment_size_)) == 0 &&
            ::lseek(fd_, 0, SEEK_END) >= 0) {
            file_bytes_.fetch_sub(segment_size_ - synced_segment_size_, std::memory_order_relaxed);
            // The same bytes are written again from memory: a replica that
            // read them meanwhile read what the file will hold again.
            written_ -= segment_size_ - synced_segment_size_;
            segment_size_ = synced_segment_size_;
            unsynced_.append(unwritten_);
            unwritten_.swap(unsynced_);
            unsynced_.clear();
        }
        return false;
    }
    synced_segment_size_ = segment_size_;
    buffered_.fetch_sub(unsynced_.size(), std::memory_order_relaxed);
    core::memory_add(core::MemoryUse::other, -static_cast<std::int64_t>(unsynced_.size()));
    if (unsynced_.capacity() > (1u << 20)) {
        std::string().swap(unsynced_);
    } else {
        unsynced_.clear();
    }
    durable_.store(written_, std::memory_order_release);
    last_fsync_unix_ms_.store(store::now_ms(), std::memory_order_relaxed);
    return true;
}

void Journal::run() {
    std::unique_lock lock(mutex_);
    std::size_t released = 0;  // replies the last fdatasync let go
    std::int64_t last_sync_us = 0;
    auto last_take = std::chrono::steady_clock::time_point{};  // threads' buffers last taken
    for (;;) {
        if (policy_ == FsyncPolicy::always && released > 1 && !stop_ && !rotate_requested_) {
            // Group commit: the clients just answered send their next
            // command within a round trip. Without waiting for them, each
            // fdatasync took only what arrived during the previous one and
            // every client waited two fdatasyncs per command (BF.ADD at -P 1
            // with 50 clients reached half of Redis's rate on the VM).
            const auto linger =
                std::chrono::microseconds(std::clamp<std::int64_t>(last_sync_us / 2, 100, 500));
            wake_.wait_for(lock, linger, [this] { return stop_ || rotate_requested_; });
        }
        const auto wanted = [this] {
            return stop_ || rotate_requested_ || !pending_.empty() || locals_pending();
        };
        if (policy_ != FsyncPolicy::always && !stop_ && !rotate_requested_) {
            // Threads' buffers are taken at most once a millisecond, so that
            // taking them (their mutexes) costs the adding threads nothing
            // measurable however fast the disk is.
            const auto since = std::chrono::steady_clock::now() - last_take;
            if (since < std::chrono::milliseconds(1)) {
                wake_.wait_for(lock, std::chrono::milliseconds(1) - since,
                               [this] { return stop_ || rotate_requested_; });
            }
        }
        if (!wanted()) {
            // everysec: wake for the once-a-second fdatasync; after a failure,
            // retry once a second.
            const bool timed =
                write_failed_ || (policy_ == FsyncPolicy::everysec &&
                                  (segment_size_ != synced_segment_size_ || !unwritten_.empty()));
            // Stored before wanted() reads the threads' buffers (wake_writer()).
            writer_idle_.store(true, std::memory_order_seq_cst);
            if (timed) {
                wake_.wait_for(lock, std::chrono::milliseconds(200), wanted);
            } else {
                wake_.wait(lock, wanted);
            }
            writer_idle_.store(false, std::memory_order_relaxed);
            // everysec and no: linger up to 1 ms so one write() carries every
            // record appended meanwhile. Waking and writing per append
            // halved BF.ADD throughput at -P 16 on the 2-core VM (709k ->
            // 383k ops/s); always needs no linger: appends gather while the
            // previous fdatasync runs.
            if (policy_ != FsyncPolicy::always && !stop_ && !rotate_requested_) {
                wake_.wait_for(lock, std::chrono::milliseconds(1),
                               [this] { return stop_ || rotate_requested_; });
            }
        }
        const bool stopping = stop_;
        const bool rotating = rotate_requested_;
        take_all_locals();
        last_take = std::chrono::steady_clock::now();
        if (unwritten_.empty()) {
            unwritten_.swap(pending_);
        } else {
            unwritten_.append(pending_);
            pending_.clear();
        }
        if (pending_.capacity() > (1u << 20)) std::string().swap(pending_);
        lock.unlock();

        bool ok = write_unwritten();
        const bool sync_due =
            policy_ == FsyncPolicy::always || rotating || stopping ||
            (policy_ == FsyncPolicy::everysec && steady_ms() - last_sync_ms_ >= 1000);
        if (ok && sync_due) {
            const auto began = std::chrono::steady_clock::now();
            ok = sync();
            last_sync_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::steady_clock::now() - began)
                               .count();
        }
        if (ok && rotating && segment_size_ > jf::kSegmentHeaderBytes) {
            std::string error;
            if (!open_segment(written_, error)) {
                spdlog::warn("journal: {}; going on in the current segment", error);
            }
        }
        if (ok && policy_ == FsyncPolicy::no && sync_due && rotating) durable_.store(written_);
        released = notify_durable();

        lock.lock();
        if (ok && write_failed_) {
            spdlog::info("journal: writes succeed again");
            write_failed_ = false;
            failure_.clear();
        }
        if (!write_failed_) {
            failing_.store(buffered_.load(std::memory_order_relaxed) > buffer_limit_,
                           std::memory_order_relaxed);
        }
        if (rotating) {
            rotate_requested_ = false;
            rotated_to_ = segments_.back().start;
            ++rotations_done_;
            rotated_.notify_all();
        }
        if (stopping && pending_.empty() && !locals_pending() && (ok || unwritten_.empty())) break;
        if (stopping && !ok) {
            // Exiting with records that cannot be written: say so; they were
            // never acknowledged under appendfsync always.
            spdlog::error("journal: {} bytes could not be written at exit",
                          unwritten_.size() + pending_.size());
            break;
        }
        if (!ok) {
            // Back off before retrying a failing disk.
            wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
        }
    }
}

std::uint64_t Journal::rotate() {
    std::unique_lock lock(mutex_);
    if (!writer_.joinable()) return appended();
    const std::uint64_t ticket = rotations_done_ + 1;
    rotate_requested_ = true;
    if (claim_idle_writer()) wake_.notify_one();
    rotated_.wait(lock, [&] { return rotations_done_ >= ticket || stop_; });
    return rotated_to_;
}

void Journal::drop_covered(std::uint64_t offset) {
    std::vector<std::string> doomed;
    {
        std::lock_guard lock(mutex_);
        // Segment i ends where segment i + 1 starts; the last is open.
        std::size_t keep_from = 0;
        while (keep_from + 1 < segments_.size() && segments_[keep_from + 1].start <= offset) {
            ++keep_from;
        }
        for (std::size_t i = 0; i < keep_from; ++i) doomed.push_back(segments_[i].path);
        segments_.erase(segments_.begin(),
                        segments_.begin() + static_cast<std::ptrdiff_t>(keep_from));
    }
    std::uint64_t freed = 0;
    for (const std::string& path : doomed) {
        std::error_code ec;
        const std::uint64_t size = std::filesystem::file_size(path, ec);
        if (std::filesystem::remove(path, ec)) {
            freed += ec ? 0 : size;
        } else if (ec) {
            spdlog::warn("journal: cannot remove covered segment '{}': {}", path, ec.message());
        }
    }
    if (!doomed.empty()) {
        std::string error;
        if (!sync_directory(dir_, error)) spdlog::warn("journal: {}", error);
        file_bytes_.fetch_sub(std::min(freed, file_bytes_.load()), std::memory_order_relaxed);
        spdlog::info("journal: removed {} segment(s) covered by the snapshot", doomed.size());
    }
    base_bytes_.store(file_bytes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

core::JournalInfo Journal::info() const {
    core::JournalInfo info;
    info.enabled = true;
    info.fsync_policy = fsync_policy_name(policy_);
    {
        std::lock_guard lock(mutex_);
        info.last_write_ok = !write_failed_;
        info.last_write_error = failure_;
        info.segments = segments_.size();
    }
    info.current_size = file_bytes_.load(std::memory_order_relaxed);
    info.base_size = base_bytes_.load(std::memory_order_relaxed);
    info.buffer_length = buffered_.load(std::memory_order_relaxed);
    if (locals_ != nullptr) {
        const std::size_t claimed =
            std::min(locals_claimed_.load(std::memory_order_acquire), kLocalBuffers);
        for (std::size_t i = 0; i < claimed; ++i) {
            info.buffer_length += locals_[i].bytes.load(std::memory_order_relaxed);
        }
    }
    info.fsync_in_progress = syncing_.load(std::memory_order_relaxed);
    info.delayed_fsync = delayed_fsyncs_.load(std::memory_order_relaxed);
    info.fsyncs = fsyncs_.load(std::memory_order_relaxed);
    info.last_fsync_ms = last_fsync_ms_.load(std::memory_order_relaxed);
    info.last_fsync_unix_ms = last_fsync_unix_ms_.load(std::memory_order_relaxed);
    info.appended_offset = appended();
    info.durable_offset = durable();
    return info;
}

}  // namespace bloomery::persist
