// The journal's file side: starting a history (its segments listed, the
// newest adopted or a new one made), writing what the appender handed over
// to the current segment, fdatasync and what its failure costs, write-
// through from the threads that answer clients, and stopping.

#include "journal_writer.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/store/keyspace.hpp"
#include "journal_format.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

using format::errno_text;

JournalWriter::JournalWriter(std::string dir, std::string basename, FsyncPolicy policy,
                             JournalHandoff& handoff, JournalAppender& appender,
                             std::atomic<bool>& failing)
    : policy_(policy),
      handoff_(handoff),
      appender_(appender),
      failing_(failing),
      segments_(std::move(dir), std::move(basename)) {}

JournalWriter::~JournalWriter() {
    stop();
    unwritten_.clear();
    unsynced_.clear();
}

core::Status JournalWriter::start(std::uint64_t id, std::uint64_t offset,
                                  const std::string& existing) {
    {
        std::lock_guard lock(handoff_.mutex);
        if (thread_.joinable()) return core::Error{"journal is already open"};
        durable_.restart(id, offset);
        stop_ = false;
        rotate_requested_ = false;
        rotations_done_ = 0;
        rotated_to_ = 0;
        segments_.forget();
        failure_.clear();
        failing_.store(false, std::memory_order_relaxed);
        write_failed_ = false;
        appender_.restart_at(offset);
    }
    written_ = offset;
    written_offset_.store(offset, std::memory_order_relaxed);
    segment_size_ = synced_segment_size_ = 0;
    fd_ = -1;
    current_path_.clear();
    // Every older segment of this journal is still on disk until a snapshot
    // covers it; list them so drop_covered() can remove them.
    segments_.scan(existing);
    core::Status opened = existing.empty() ? open_segment(offset) : adopt_segment(existing);
    if (!opened) return opened;
    segments_.mark_base();
    last_sync_ms_ = steady_ms();
    unsynced_data_.store(false, std::memory_order_relaxed);
    {
        // What start() set above is seen by a thread in write_through()
        // through this lock.
        std::lock_guard io(io_mutex_);
        accepting_ = true;
    }
    thread_ = std::thread([this] { run(); });
    return {};
}

core::Status JournalWriter::adopt_segment(const std::string& path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) return core::Error{"cannot open journal '" + path + "': " + errno_text(errno)};
    const off_t end = ::lseek(fd_, 0, SEEK_END);
    if (end < 0) {
        core::Error error{"cannot seek in journal '" + path + "': " + errno_text(errno)};
        ::close(fd_);
        fd_ = -1;
        return error;
    }
    segment_size_ = synced_segment_size_ = static_cast<std::uint64_t>(end);
    segments_.adopt(path, segment_size_);
    current_path_ = path;
    return {};
}

core::Status JournalWriter::open_segment(std::uint64_t start) {
    core::Result<JournalSegments::Created> created = segments_.create(start, log_id());
    if (!created) return created.failure();
    if (fd_ >= 0) ::close(fd_);
    fd_ = created->fd;
    segment_size_ = synced_segment_size_ = journal_format::kSegmentHeaderBytes;
    current_path_ = std::move(created->path);
    return {};
}

bool JournalWriter::stop() {
    {
        std::lock_guard lock(handoff_.mutex);
        if (!thread_.joinable()) return false;
        stop_ = true;
    }
    handoff_.wake.notify_all();
    thread_.join();
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
    // The writer's lists are empty now (it wrote them, or could not and
    // said so); their memory goes back.
    unwritten_.clear();
    unsynced_.clear();
    durable_.forget_waiters();
    return true;
}

// Writes unwritten_ to the current segment (writev over its blocks); the
// blocks written move to unsynced_ with appendfsync always (kept until
// fdatasync succeeds) and are freed otherwise.
JournalWriter::Written JournalWriter::write_unwritten() {
    Written outcome;
    std::uint64_t done = 0;
    while (!unwritten_.empty()) {
        // Up to 64 blocks per call; the first may be partly written already.
        iovec parts[64];
        int count = 0;
        std::size_t skip = unwritten_offset_;
        for (store::RecordBlock* b = unwritten_.head; b != nullptr && count < 64; b = b->next) {
            parts[count].iov_base = b->bytes.data() + skip;
            parts[count].iov_len = b->bytes.size() - skip;
            skip = 0;
            ++count;
        }
        const ssize_t n = ::writev(fd_, parts, count);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            set_failure("cannot write journal '" + current_path_ +
                        "': " + errno_text(n < 0 ? errno : ENOSPC));
            outcome.failed = true;
            break;
        }
        done += static_cast<std::uint64_t>(n);
        retire_written(static_cast<std::uint64_t>(n));
    }
    if (done == 0) return outcome;
    outcome.wrote = true;
    written_ += done;
    written_offset_.store(written_, std::memory_order_release);
    segment_size_ += done;
    segments_.grew(done);
    unsynced_data_.store(true, std::memory_order_seq_cst);
    if (policy_ == FsyncPolicy::no) durable_.advance_to(written_);
    return outcome;
}

void JournalWriter::retire_written(std::uint64_t bytes) {
    std::uint64_t left = bytes;
    while (left != 0) {
        store::RecordBlock* head = unwritten_.head;
        const std::uint64_t rest = head->bytes.size() - unwritten_offset_;
        if (left < rest) {
            unwritten_offset_ += left;
            break;
        }
        left -= rest;
        unwritten_offset_ = 0;
        unwritten_.head = head->next;
        if (unwritten_.head == nullptr) unwritten_.tail = nullptr;
        unwritten_.bytes -= head->bytes.size();
        head->next = nullptr;
        if (policy_ == FsyncPolicy::always) {
            unsynced_.push(head);
        } else {
            // everysec and no keep nothing once written: a failed
            // fdatasync can then lose up to a second of records (the
            // loss everysec accepts), and holding a second of records
            // would cost tens of megabytes.
            handoff_.let_go(head->bytes.size());
            BlockList gone;
            gone.push(head);
            gone.clear();
        }
    }
}

bool JournalWriter::sync(std::unique_lock<std::mutex>& io, SyncLock lock) {
    if (unsynced_.empty() && segment_size_ == synced_segment_size_) return true;
    const int fd = fd_;
    const std::uint64_t size = segment_size_;
    const std::uint64_t written = written_;
    // Under always only this thread writes; under everysec and no, threads
    // answering clients write through meanwhile (what they write after
    // `size` waits for the next fdatasync).
    const bool let_go = lock == SyncLock::let_go && policy_ != FsyncPolicy::always;
    if (let_go) io.unlock();
    syncing_.store(true, std::memory_order_relaxed);
    const std::int64_t began = steady_ms();
    const int rc = ::fdatasync(fd);
    const int saved_errno = errno;
    const std::int64_t took = steady_ms() - began;
    syncing_.store(false, std::memory_order_relaxed);
    if (let_go) io.lock();
    fsyncs_.fetch_add(1, std::memory_order_relaxed);
    last_fsync_ms_.store(took, std::memory_order_relaxed);
    core::latency_add_sample_if_needed(core::kLatencyJournalFsync,
                                       static_cast<std::uint64_t>(took));
    if (took > 2000) {
        delayed_fsyncs_.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("journal: fdatasync took {} ms (the disk is busy)", took);
    }
    last_sync_ms_ = steady_ms();
    if (rc != 0) {
        set_failure("cannot fsync journal '" + current_path_ + "': " + errno_text(saved_errno));
        if (policy_ == FsyncPolicy::always) cut_back_to_durable();
        return false;
    }
    synced_segment_size_ = size;
    handoff_.let_go(unsynced_.bytes);
    unsynced_.clear();  // only always keeps blocks, and there nothing was written meanwhile
    // With no, a write meanwhile may already have moved durable past it.
    durable_.advance_to(written);
    unsynced_data_.store(segment_size_ != synced_segment_size_, std::memory_order_seq_cst);
    last_fsync_unix_ms_.store(store::now_ms(), std::memory_order_relaxed);
    return true;
}

void JournalWriter::cut_back_to_durable() {
    // After a failed fdatasync the kernel may have dropped the dirty pages.
    // With appendfsync always, cut the file back to what is known durable
    // and write the rest again from memory (nobody was answered yet);
    // otherwise (or if the file cannot be cut) the fdatasync is retried.
    if (::ftruncate(fd_, static_cast<off_t>(synced_segment_size_)) != 0 ||
        ::lseek(fd_, 0, SEEK_END) < 0) {
        return;
    }
    segments_.shrank(segment_size_ - synced_segment_size_);
    // The same bytes are written again from memory: a replica that read
    // them meanwhile read what the file will hold again.
    written_ -= segment_size_ - synced_segment_size_;
    segment_size_ = synced_segment_size_;
    unsynced_.splice(unwritten_);
    std::swap(unwritten_, unsynced_);
    unwritten_offset_ = 0;
}

void JournalWriter::take_for_writing() {
    std::lock_guard lock(handoff_.mutex);
    appender_.take_all(unwritten_);
}

bool JournalWriter::write_through() {
    // A failing disk is retried by the writer once a second, not by every
    // batch of every client.
    if (failing_.load(std::memory_order_relaxed)) return false;
    Written outcome;
    bool timer_due = false;
    {
        std::unique_lock io(io_mutex_);
        if (!accepting_) return true;
        take_for_writing();
        if (unwritten_.empty()) return true;  // another thread's write covered them
        const bool was_unsynced = unsynced_data_.load(std::memory_order_relaxed);
        outcome = write_unwritten();
        timer_due = outcome.wrote && !was_unsynced && policy_ == FsyncPolicy::everysec;
    }
    if (outcome.wrote && write_listener_) write_listener_(written());
    // The writer may sleep with nothing to fdatasync (or, after a failed
    // write, nothing to retry): it has one now.
    if (timer_due || outcome.failed) handoff_.wake_writer();
    return !outcome.failed;
}

std::uint64_t JournalWriter::rotate() {
    std::unique_lock lock(handoff_.mutex);
    if (!thread_.joinable()) return appender_.appended();
    const std::uint64_t ticket = rotations_done_ + 1;
    rotate_requested_ = true;
    if (handoff_.claim_idle_writer()) handoff_.wake.notify_one();
    rotated_.wait(lock, [&] { return rotations_done_ >= ticket || stop_; });
    return rotated_to_;
}

std::string JournalWriter::failure() const {
    std::lock_guard lock(handoff_.mutex);
    if (!failure_.empty()) return failure_;
    if (failing_.load(std::memory_order_relaxed)) {
        return "journal buffer over " + std::to_string(handoff_.buffer_limit()) +
               " bytes (the disk is slower than the writes)";
    }
    return {};
}

void JournalWriter::set_failure(const std::string& what) {
    std::lock_guard lock(handoff_.mutex);
    if (failure_ != what) spdlog::error("journal: {}", what);
    failure_ = what;
    write_failed_ = true;
    failing_.store(true, std::memory_order_relaxed);
}

void JournalWriter::fill_info(JournalInfo& info) const {
    {
        std::lock_guard lock(handoff_.mutex);
        info.last_write_ok = !write_failed_;
        info.last_write_error = failure_;
    }
    info.segments = segments_.count();
    info.current_size = segments_.file_bytes();
    info.base_size = segments_.base_bytes();
    info.buffer_length = handoff_.held();
    info.fsync_in_progress = syncing_.load(std::memory_order_relaxed);
    info.delayed_fsync = delayed_fsyncs_.load(std::memory_order_relaxed);
    info.fsyncs = fsyncs_.load(std::memory_order_relaxed);
    info.last_fsync_ms = last_fsync_ms_.load(std::memory_order_relaxed);
    info.last_fsync_unix_ms = last_fsync_unix_ms_.load(std::memory_order_relaxed);
    info.durable_offset = durable();
}

}  // namespace bloomery::persist
