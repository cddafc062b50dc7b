// The journal's writer thread: takes what the threads appended, writes it
// to the current segment, fdatasyncs as the policy says, rotates segments,
// and lets go of the replies waiting for durability.

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <string>

#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/persist/journal.hpp"
#include "journal_format.hpp"
#include "journal_internal.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

namespace jf = journal_format;
using format::errno_text;

bool Journal::write_unwritten(bool& wrote) {
    bool ok = true;
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
            ok = false;
            break;
        }
        done += static_cast<std::uint64_t>(n);
        // Retire the blocks wholly written.
        auto left = static_cast<std::uint64_t>(n);
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
                buffered_.fetch_sub(head->bytes.size(), std::memory_order_relaxed);
                BlockList gone;
                gone.push(head);
                gone.clear();
            }
        }
    }
    if (done == 0) return ok;
    wrote = true;
    written_ += done;
    written_offset_.store(written_, std::memory_order_release);
    segment_size_ += done;
    file_bytes_.fetch_add(done, std::memory_order_relaxed);
    unsynced_data_.store(true, std::memory_order_seq_cst);
    if (policy_ == FsyncPolicy::no) durable_.store(written_, std::memory_order_release);
    return ok;
}

bool Journal::sync(std::unique_lock<std::mutex>& io, bool hold) {
    if (unsynced_.empty() && segment_size_ == synced_segment_size_) return true;
    const int fd = fd_;
    const std::uint64_t size = segment_size_;
    const std::uint64_t written = written_;
    // Under always only this thread writes; under everysec and no, threads
    // answering clients write through meanwhile (what they write after
    // `size` waits for the next fdatasync).
    const bool let_go = !hold && policy_ != FsyncPolicy::always;
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
            unsynced_.splice(unwritten_);
            std::swap(unwritten_, unsynced_);
            unwritten_offset_ = 0;
        }
        return false;
    }
    synced_segment_size_ = size;
    buffered_.fetch_sub(unsynced_.bytes, std::memory_order_relaxed);
    unsynced_.clear();  // only always keeps blocks, and there nothing was written meanwhile
    // With no, a write meanwhile may already have moved durable_ past it.
    if (durable_.load(std::memory_order_relaxed) < written) {
        durable_.store(written, std::memory_order_release);
    }
    unsynced_data_.store(segment_size_ != synced_segment_size_, std::memory_order_seq_cst);
    last_fsync_unix_ms_.store(store::now_ms(), std::memory_order_relaxed);
    return true;
}

void Journal::take_for_writing() {
    std::lock_guard lock(mutex_);
    take_all_locals();
    unwritten_.splice(pending_);
}

bool Journal::holds_unwritten() const {
    // Pairs with mark_open() as in position(): an add whose bit the caller
    // saw is open here, or counted in a buffer or in appended().
    std::atomic_thread_fence(std::memory_order_acquire);
    return appended() != written() || locals_pending(true);
}

bool Journal::write_through() {
    // A failing disk is retried by the writer once a second, not by every
    // batch of every client.
    if (failing()) return false;
    bool wrote = false;
    bool timer_due = false;
    bool ok = true;
    {
        std::unique_lock io(io_mutex_);
        if (!accepting_) return true;
        take_for_writing();
        if (unwritten_.empty()) return true;  // another thread's write covered them
        const bool was_unsynced = unsynced_data_.load(std::memory_order_relaxed);
        ok = write_unwritten(wrote);
        timer_due = wrote && !was_unsynced && policy_ == FsyncPolicy::everysec;
    }
    if (wrote && write_listener_) write_listener_(written());
    // The writer may sleep with nothing to fdatasync (or, after a failed
    // write, nothing to retry): it has one now.
    if (timer_due || !ok) wake_writer();
    return ok;
}

void Journal::run() {
    std::unique_lock lock(mutex_);
    WriterRound round;
    for (;;) {
        wait_for_records(lock, round);
        const bool stopping = stop_;
        const bool rotating = rotate_requested_;
        lock.unlock();

        const bool ok = write_and_sync(stopping, rotating, round);
        round.released = notify_durable();

        lock.lock();
        settle_round(ok, rotating);
        if (!another_round(lock, ok, stopping, round.all_written)) break;
    }
}

void Journal::wait_for_records(std::unique_lock<std::mutex>& lock, const WriterRound& round) {
    if (policy_ == FsyncPolicy::always && round.released > 1 && !stop_ && !rotate_requested_) {
        // Group commit: the clients just answered send their next
        // command within a round trip. Without waiting for them, each
        // fdatasync took only what arrived during the previous one and
        // every client waited two fdatasyncs per command (BF.ADD at -P 1
        // with 50 clients reached half of Redis's rate on the VM).
        const auto linger =
            std::chrono::microseconds(std::clamp<std::int64_t>(round.last_sync_us / 2, 100, 500));
        wake_.wait_for(lock, linger, [this] { return stop_ || rotate_requested_; });
    }
    const auto wanted = [this] {
        return stop_ || rotate_requested_ || !pending_.empty() || locals_pending();
    };
    if (policy_ != FsyncPolicy::always && !stop_ && !rotate_requested_) {
        // Threads' buffers are taken at most once a millisecond, so that
        // taking them (their mutexes) costs the adding threads nothing
        // measurable however fast the disk is.
        const auto since = std::chrono::steady_clock::now() - round.last_take;
        if (since < std::chrono::milliseconds(1)) {
            wake_.wait_for(lock, std::chrono::milliseconds(1) - since,
                           [this] { return stop_ || rotate_requested_; });
        }
    }
    if (wanted()) return;
    // Marked idle before wanted() reads the threads' buffers
    // (wake_writer()), again after every wake: whoever woke it
    // cleared the mark, and a wake that brought nothing must not
    // leave the writer asleep unmarked (nobody would wake it again).
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    for (;;) {
        writer_idle_.store(true, std::memory_order_seq_cst);
        if (wanted()) break;
        // everysec: wake for the once-a-second fdatasync of what this
        // thread or a thread in write_through() wrote (read after the idle
        // mark: such a thread marks it and then wakes an idle writer); after
        // a failure, retry once a second.
        const bool timed = write_failed_ ||
                           (policy_ == FsyncPolicy::everysec &&
                            (!round.all_written || unsynced_data_.load(std::memory_order_seq_cst)));
        if (!timed) {
            wake_.wait(lock);
        } else if (wake_.wait_until(lock, until) == std::cv_status::timeout) {
            break;
        }
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

bool Journal::write_and_sync(bool stopping, bool rotating, WriterRound& round) {
    std::unique_lock io(io_mutex_);
    take_for_writing();
    round.last_take = std::chrono::steady_clock::now();
    bool wrote = false;
    bool ok = write_unwritten(wrote);
    const bool sync_due = policy_ == FsyncPolicy::always || rotating || stopping ||
                          (policy_ == FsyncPolicy::everysec && steady_ms() - last_sync_ms_ >= 1000);
    if (ok && sync_due) {
        const auto began = std::chrono::steady_clock::now();
        // A rotation seals the segment it syncs: nothing may be written
        // into it meanwhile.
        ok = sync(io, rotating || stopping);
        round.last_sync_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::steady_clock::now() - began)
                                 .count();
    }
    if (ok && rotating && segment_size_ > jf::kSegmentHeaderBytes) {
        std::string error;
        if (!open_segment(written_, error)) {
            spdlog::warn("journal: {}; going on in the current segment", error);
        }
    }
    if (ok && policy_ == FsyncPolicy::no && sync_due && rotating) {
        durable_.store(written_, std::memory_order_release);
    }
    round.all_written = unwritten_.empty();
    io.unlock();
    if (wrote && write_listener_) write_listener_(written());
    return ok;
}

void Journal::settle_round(bool ok, bool rotating) {
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
}

bool Journal::another_round(std::unique_lock<std::mutex>& lock, bool ok, bool stopping,
                            bool all_written) {
    if (stopping && pending_.empty() && !locals_pending() && (ok || all_written)) {
        return false;
    }
    if (stopping && !ok) {
        // Exiting with records that cannot be written: say so; they were
        // never acknowledged under appendfsync always.
        spdlog::error("journal: {} bytes could not be written at exit",
                      buffered_.load(std::memory_order_relaxed));
        return false;
    }
    if (!ok) {
        // Back off before retrying a failing disk.
        wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
    }
    return true;
}

}  // namespace bloomery::persist
