#include "bloomery/persist/journal.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/core/file_io.hpp"
#include "bloomery/core/memory.hpp"
#include "journal_format.hpp"
#include "journal_internal.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

namespace jf = journal_format;
static_assert(kJournalSegmentHeaderBytes == jf::kSegmentHeaderBytes);
using format::errno_text;
using format::put_u32;
using format::put_u64;

namespace {

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

void Journal::BlockList::push(store::RecordBlock* block) noexcept {
    while (block != nullptr) {
        store::RecordBlock* next = block->next;
        block->next = nullptr;
        bytes += block->bytes.size();
        if (tail == nullptr) {
            head = tail = block;
        } else {
            tail->next = block;
            tail = block;
        }
        block = next;
    }
}

void Journal::BlockList::splice(BlockList& other) noexcept {
    if (other.head == nullptr) return;
    if (tail == nullptr) {
        head = other.head;
    } else {
        tail->next = other.head;
    }
    tail = other.tail;
    bytes += other.bytes;
    other.head = other.tail = nullptr;
    other.bytes = 0;
}

void Journal::BlockList::clear() noexcept {
    std::int64_t freed = 0;
    while (head != nullptr) {
        store::RecordBlock* next = head->next;
        freed += static_cast<std::int64_t>(head->bytes.capacity());
        delete head;
        head = next;
    }
    tail = nullptr;
    bytes = 0;
    if (freed != 0) core::memory_add(core::MemoryUse::other, -freed);
}

Journal::Journal(std::string dir, std::string basename, FsyncPolicy policy,
                 std::uint64_t buffer_limit)
    : dir_(std::move(dir)),
      basename_(std::move(basename)),
      policy_(policy),
      buffer_limit_(buffer_limit),
      locals_(new LocalBuffer[kLocalBuffers + 1]),
      serial_(g_journal_serial.fetch_add(1, std::memory_order_relaxed) + 1) {}

Journal::~Journal() {
    close();
    release_locals();
    pending_.clear();
    unwritten_.clear();
    unsynced_.clear();
}

void Journal::release_locals() {
    for (std::size_t i = 0; i <= kLocalBuffers; ++i) {
        LocalBuffer& local = locals_[i];
        std::lock_guard lock(local.mutex);
        if (local.block == nullptr) continue;
        core::memory_add(core::MemoryUse::other, -static_cast<std::int64_t>(local.charged));
        delete local.block;
        local.block = nullptr;
        local.charged = 0;
        local.bytes.store(0, std::memory_order_relaxed);
    }
}

bool Journal::open(std::uint64_t id, std::uint64_t offset, const std::string& existing,
                   std::string& error) {
    {
        std::lock_guard lock(mutex_);
        if (writer_.joinable()) {
            error = "journal is already open";
            return false;
        }
        {
            std::lock_guard waiters(waiters_mutex_);
            id_.store(id, std::memory_order_release);
        }
        stop_ = false;
        rotate_requested_ = false;
        rotations_done_ = 0;
        rotated_to_ = 0;
        segments_.clear();
        failure_.clear();
        failing_.store(false, std::memory_order_relaxed);
        write_failed_ = false;
        appended_.store(offset, std::memory_order_relaxed);
    }
    durable_.store(offset, std::memory_order_relaxed);
    written_ = offset;
    written_offset_.store(offset, std::memory_order_relaxed);
    segment_size_ = synced_segment_size_ = 0;
    fd_ = -1;
    current_path_.clear();
    // Every older segment of this journal is still on disk until a snapshot
    // covers it; list them so drop_covered() can remove them.
    std::error_code ec;
    std::uint64_t total = 0;
    std::vector<Segment> found;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
        const std::string name = entry.path().filename().string();
        std::uint64_t start = 0;
        if (!jf::parse_segment_name(name, basename_, start)) continue;
        if (entry.path().string() == existing) continue;
        found.push_back({start, entry.path().string()});
        total += entry.file_size(ec);
    }
    std::sort(found.begin(), found.end(),
              [](const Segment& a, const Segment& b) { return a.start < b.start; });
    {
        std::lock_guard lock(mutex_);
        segments_ = std::move(found);
    }
    if (!existing.empty()) {
        fd_ = ::open(existing.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd_ < 0) {
            error = "cannot open journal '" + existing + "': " + errno_text(errno);
            return false;
        }
        const off_t end = ::lseek(fd_, 0, SEEK_END);
        if (end < 0) {
            error = "cannot seek in journal '" + existing + "': " + errno_text(errno);
            ::close(fd_);
            fd_ = -1;
            return false;
        }
        segment_size_ = synced_segment_size_ = static_cast<std::uint64_t>(end);
        std::uint64_t start = 0;
        jf::parse_segment_name(std::filesystem::path(existing).filename().string(), basename_,
                               start);
        {
            std::lock_guard lock(mutex_);
            segments_.push_back({start, existing});
        }
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
    unsynced_data_.store(false, std::memory_order_relaxed);
    {
        // What open() set above is seen by a thread in write_through()
        // through this lock.
        std::lock_guard io(io_mutex_);
        accepting_ = true;
    }
    writer_ = std::thread([this] { run(); });
    return true;
}

// Creates the segment file for `start`, writes and syncs its header and the
// directory. Called by open() before the writer starts (and before any
// thread may write through), and by the writer under io_mutex_.
bool Journal::open_segment(std::uint64_t start, std::string& error) {
    const std::string path = dir_ + "/" + jf::segment_name(basename_, start);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        error = "cannot create journal '" + path + "': " + errno_text(errno);
        return false;
    }
    const std::string header = segment_header(log_id(), start);
    if (const int failed = core::write_all(fd, header.data(), header.size()); failed != 0) {
        error = "cannot write journal '" + path + "': " + errno_text(failed);
        ::close(fd);
        ::unlink(path.c_str());
        return false;
    }
    core::Status synced;
    if (::fdatasync(fd) != 0) {
        synced = core::Error{"cannot fsync journal '" + path + "': " + errno_text(errno)};
    } else {
        synced = core::fsync_directory(dir_);
    }
    if (!synced) {
        error = synced.error();
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
    {
        std::lock_guard io(io_mutex_);
        accepting_ = false;
        if (fd_ >= 0) {
            // Records a thread wrote through after the writer's last
            // fdatasync.
            if (segment_size_ != synced_segment_size_ && ::fdatasync(fd_) != 0) {
                spdlog::error("journal: cannot fsync journal '{}': {}", current_path_,
                              errno_text(errno));
            }
            ::close(fd_);
            fd_ = -1;
        }
    }
    // The threads' buffers and the writer's lists are empty now (the writer
    // wrote them, or could not and said so); their memory goes back.
    release_locals();
    {
        std::lock_guard lock(mutex_);
        pending_.clear();
    }
    unwritten_.clear();
    unsynced_.clear();
    // Whoever still waits will not be answered (their clients are gone at
    // exit); run nothing.
    std::lock_guard lock(waiters_mutex_);
    waiters_.clear();
    waiters_.shrink_to_fit();
}

std::vector<Journal::SegmentFile> Journal::segment_files() const {
    std::lock_guard lock(mutex_);
    std::vector<SegmentFile> out;
    out.reserve(segments_.size());
    for (const Segment& segment : segments_) out.push_back({segment.start, segment.path});
    return out;
}

std::uint64_t Journal::position() {
    // Pairs with mark_open(): a caller that saw a bit of an add (a relaxed
    // load) and then asks for the position sees that add's scope open or its
    // records counted, and waits for them.
    std::atomic_thread_fence(std::memory_order_acquire);
    bool wake = false;
    {
        std::lock_guard lock(mutex_);
        wake = take_all_locals() && claim_idle_writer();
    }
    if (wake) wake_.notify_one();
    return appended();
}

std::uint64_t Journal::cut(const std::function<void()>& at_cut) {
    std::uint64_t at;
    bool wake = false;
    {
        std::unique_lock lock(mutex_);
        // Every claimed buffer locked at once (in index order, as nothing else
        // holds two): no data scope is open, none can open, and with mutex_
        // no keyspace record can be appended.
        const std::size_t claimed = locals_claimed_.load(std::memory_order_acquire);
        std::vector<std::unique_lock<std::mutex>> locals;
        locals.reserve(claimed);
        for (std::size_t i = 0; i < claimed; ++i) locals.emplace_back(locals_[i].mutex);
        bool took = false;
        for (std::size_t i = 0; i < claimed; ++i) took = take_local(locals_[i]) || took;
        at = appended();
        at_cut();
        wake = took && claim_idle_writer();
    }
    if (wake) wake_.notify_one();
    return at;
}

void Journal::when_durable(std::uint64_t id, std::uint64_t offset, std::function<void()> fn) {
    {
        std::lock_guard lock(waiters_mutex_);
        // Checked under the lock notify_durable() takes after advancing
        // durable_, so a waiter is either seen by it or sees the new value;
        // open() changes the id under it too.
        if (id == log_id() && durable() < offset) {
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

// Writes unwritten_ to the current segment (writev over its blocks); the
// blocks written move to unsynced_ with appendfsync always (kept until
// fdatasync succeeds) and are freed otherwise.
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
        if (const core::Status synced = core::fsync_directory(dir_); !synced) {
            spdlog::warn("journal: {}", synced.error());
        }
        file_bytes_.fetch_sub(std::min(freed, file_bytes_.load()), std::memory_order_relaxed);
        spdlog::info("journal: removed {} segment(s) covered by the snapshot", doomed.size());
    }
    base_bytes_.store(file_bytes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

persist::JournalInfo Journal::info() const {
    persist::JournalInfo info;
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
    const std::size_t claimed = locals_claimed_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < claimed; ++i) {
        info.buffer_length += locals_[i].bytes.load(std::memory_order_relaxed);
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
