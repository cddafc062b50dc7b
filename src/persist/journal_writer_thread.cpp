// The journal's writer thread: takes what the threads appended, writes it
// to the current segment, fdatasyncs as the policy says, rotates segments,
// and lets go of the replies waiting for durability.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>

#include "journal_format.hpp"
#include "journal_writer.hpp"

namespace bloomery::persist {

void JournalWriter::run() {
    std::unique_lock lock(handoff_.mutex);
    Round round;
    for (;;) {
        wait_for_records(lock, round);
        const Requests requests{.stop = stop_, .rotate = rotate_requested_};
        lock.unlock();

        const Outcome outcome = write_and_sync(requests, round);
        round.released = durable_.notify();

        lock.lock();
        settle_round(outcome, requests);
        if (!another_round(lock, outcome, requests, round)) break;
    }
}

void JournalWriter::wait_for_records(std::unique_lock<AdaptiveMutex>& lock, const Round& round) {
    const auto requested = [this] { return stop_ || rotate_requested_; };
    if (policy_ == FsyncPolicy::always && round.released > 1 && !requested()) {
        // Group commit: the clients just answered send their next
        // command within a round trip. Without waiting for them, each
        // fdatasync took only what arrived during the previous one and
        // every client waited two fdatasyncs per command (BF.ADD at -P 1
        // then fell far behind Redis's rate; tests/bench/README.md).
        const auto linger =
            std::chrono::microseconds(std::clamp<std::int64_t>(round.last_sync_us / 2, 100, 500));
        handoff_.wake.wait_for(lock, linger, requested);
    }
    if (policy_ != FsyncPolicy::always && !requested()) {
        // Threads' buffers are taken at most once a millisecond, so that
        // taking them (their mutexes) costs the adding threads nothing
        // measurable however fast the disk is.
        const auto since = std::chrono::steady_clock::now() - round.last_take;
        if (since < std::chrono::milliseconds(1)) {
            handoff_.wake.wait_for(lock, std::chrono::milliseconds(1) - since, requested);
        }
    }
    if (requested() || appender_.holds_records()) return;
    sleep_until_wanted(lock, round);
    // everysec and no: linger up to 1 ms so one write() carries every
    // record appended meanwhile. Waking and writing per append cost
    // BF.ADD much of its throughput at -P 16 (tests/bench/README.md);
    // always needs no linger: appends gather while the previous fdatasync
    // runs.
    if (policy_ != FsyncPolicy::always && !requested()) {
        handoff_.wake.wait_for(lock, std::chrono::milliseconds(1), requested);
    }
}

void JournalWriter::sleep_until_wanted(std::unique_lock<AdaptiveMutex>& lock, const Round& round) {
    const auto wanted = [this] { return stop_ || rotate_requested_ || appender_.holds_records(); };
    // Marked idle before wanted() reads the threads' buffers
    // (JournalHandoff::wake_writer()), again after every wake: whoever woke
    // it cleared the mark, and a wake that brought nothing must not leave
    // the writer asleep unmarked (nobody would wake it again).
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    for (;;) {
        handoff_.writer_sleeps();
        if (wanted()) break;
        // everysec: wake for the once-a-second fdatasync of what this
        // thread or a thread in write_through() wrote (read after the idle
        // mark: such a thread marks it and then wakes an idle writer); after
        // a failure, retry once a second.
        const bool timed = write_failed_ ||
                           (policy_ == FsyncPolicy::everysec &&
                            (!round.all_written || unsynced_data_.load(std::memory_order_seq_cst)));
        if (!timed) {
            handoff_.wake.wait(lock);
        } else if (handoff_.wake.wait_until(lock, until) == std::cv_status::timeout) {
            break;
        }
    }
    handoff_.writer_wakes();
}

JournalWriter::Outcome JournalWriter::write_and_sync(Requests requests, Round& round) {
    std::unique_lock io(io_mutex_);
    take_for_writing();
    round.last_take = std::chrono::steady_clock::now();
    const Written written = write_unwritten();
    bool ok = !written.failed;
    const bool sync_due = policy_ == FsyncPolicy::always || requests.rotate || requests.stop ||
                          (policy_ == FsyncPolicy::everysec && steady_ms() - last_sync_ms_ >= 1000);
    if (ok && sync_due) {
        const auto began = std::chrono::steady_clock::now();
        // A rotation seals the segment it syncs: nothing may be written
        // into it meanwhile.
        ok = sync(io, requests.rotate || requests.stop ? SyncLock::hold : SyncLock::let_go);
        round.last_sync_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::steady_clock::now() - began)
                                 .count();
    }
    if (ok && requests.rotate && segment_size_ > journal_format::kSegmentHeaderBytes) {
        if (const core::Status opened = open_segment(written_); !opened) {
            spdlog::warn("journal: {}; going on in the current segment", opened.error());
        }
    }
    if (ok && policy_ == FsyncPolicy::no && sync_due && requests.rotate) {
        durable_.advance_to(written_);
    }
    round.all_written = unwritten_.empty();
    io.unlock();
    if (written.wrote && write_listener_) write_listener_(this->written());
    return ok ? Outcome::ok : Outcome::failed;
}

void JournalWriter::settle_round(Outcome outcome, Requests requests) {
    if (outcome == Outcome::ok && write_failed_) {
        spdlog::info("journal: writes succeed again");
        write_failed_ = false;
        failure_.clear();
    }
    if (!write_failed_) failing_.store(handoff_.over_limit(), std::memory_order_relaxed);
    if (requests.rotate) {
        rotate_requested_ = false;
        rotated_to_ = segments_.newest_start();
        ++rotations_done_;
        rotated_.notify_all();
    }
}

bool JournalWriter::another_round(std::unique_lock<AdaptiveMutex>& lock, Outcome outcome,
                                  Requests requests, const Round& round) {
    if (requests.stop && !appender_.holds_records() &&
        (outcome == Outcome::ok || round.all_written)) {
        return false;
    }
    if (requests.stop && outcome == Outcome::failed) {
        // Exiting with records that cannot be written: say so; they were
        // never acknowledged under appendfsync always.
        spdlog::error("journal: {} bytes could not be written at exit", handoff_.held());
        return false;
    }
    if (outcome == Outcome::failed) {
        // Back off before retrying a failing disk.
        handoff_.wake.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
    }
    return true;
}

}  // namespace bloomery::persist
