#pragma once
// The journal's writing side (journal_writer.cpp, journal_writer_thread.cpp):
// the segment being written, write-through from the threads that answer
// clients, the writer thread that writes what no reply waited for,
// fdatasyncs as the policy says and rotates segments, the failure state and
// its retries, and the replies waiting for durability. What the journal's
// header (persist/journal.hpp) says of durability and failure is kept here.
// It takes its records from the appender (journal_appender.hpp) through
// their handoff.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/core/result.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/status.hpp"
#include "journal_appender.hpp"
#include "journal_blocks.hpp"
#include "journal_durable.hpp"
#include "journal_handoff.hpp"
#include "journal_segments.hpp"

namespace bloomery::persist {

// Milliseconds of the steady clock: when the journal last fdatasynced.
inline std::int64_t steady_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

class JournalWriter {
public:
    // `failing` is the journal's refusal flag (JournalHealth).
    JournalWriter(std::string dir, std::string basename, FsyncPolicy policy,
                  JournalHandoff& handoff, JournalAppender& appender, std::atomic<bool>& failing);
    ~JournalWriter();
    JournalWriter(const JournalWriter&) = delete;
    JournalWriter& operator=(const JournalWriter&) = delete;

    // Journal::open(): a new history, and the writer thread.
    core::Status start(std::uint64_t id, std::uint64_t offset, const std::string& existing);
    // Journal::close(): writes and fdatasyncs whatever is appended, then
    // stops the writer thread. False if it was not running.
    bool stop();

    std::uint64_t log_id() const { return durable_.history(); }
    std::uint64_t durable() const { return durable_.durable(); }
    std::uint64_t written() const { return written_offset_.load(std::memory_order_acquire); }
    void when_durable(std::uint64_t id, std::uint64_t offset, std::function<void()> fn) {
        durable_.when_durable(id, offset, std::move(fn));
    }
    bool write_through();
    std::uint64_t rotate();
    void drop_covered(std::uint64_t offset) { segments_.drop_covered(offset); }
    std::vector<Journal::SegmentFile> segment_files() const { return segments_.files(); }
    void set_write_listener(std::function<void(std::uint64_t)> listener) {
        write_listener_ = std::move(listener);
    }
    std::string failure() const;
    // The writer's share of INFO persistence (the appender's bytes aside).
    void fill_info(JournalInfo& info) const;

private:
    // What the writer remembers from one round to the next.
    struct Round {
        std::size_t released = 0;                           // replies the last fdatasync let go
        std::int64_t last_sync_us = 0;                      // how long it took
        std::chrono::steady_clock::time_point last_take{};  // threads' buffers last taken
        bool all_written = true;                            // nothing taken was left unwritten
    };
    // What a round was asked to do besides writing (read under the
    // handoff's mutex when it begins).
    struct Requests {
        bool stop = false;    // close(): write, fdatasync and end
        bool rotate = false;  // rotate(): seal the segment and begin another
    };
    // How a round went: a failed write or fdatasync is retried.
    enum class Outcome { ok, failed };
    // With everysec and no, whether fdatasync lets the file lock go while
    // it runs, so that replies do not wait for it.
    enum class SyncLock { let_go, hold };

    // The writer thread: rounds of wait, take, write, sync, settle.
    void run();
    // Under the handoff's mutex (`lock`): waits until there are records to
    // write, a request, or an everysec fdatasync due.
    void wait_for_records(std::unique_lock<AdaptiveMutex>& lock, const Round& round);
    // The part of wait_for_records() that sleeps until something wakes the
    // writer or its retry or everysec timer is due.
    void sleep_until_wanted(std::unique_lock<AdaptiveMutex>& lock, const Round& round);
    // Outside the handoff's mutex: takes every thread's records, writes
    // them, fdatasyncs if due, rotates if asked.
    Outcome write_and_sync(Requests requests, Round& round);
    // Under the file lock: moves every thread's records and the stream's
    // into unwritten_, in stream order.
    void take_for_writing();
    // Under the handoff's mutex: the round's outcome for the failure state
    // and rotate().
    void settle_round(Outcome outcome, Requests requests);
    // Under the handoff's mutex (`lock`): false when the writer is done;
    // backs off after a failure.
    bool another_round(std::unique_lock<AdaptiveMutex>& lock, Outcome outcome, Requests requests,
                       const Round& round);
    // Under the file lock; writer thread or start().
    core::Status open_segment(std::uint64_t start);
    // start(): appends to the existing segment at `path`.
    core::Status adopt_segment(const std::string& path);
    // What write_unwritten() did: whether any byte went out (the write
    // listener is then due, outside the locks), and whether it failed.
    struct Written {
        bool wrote = false;
        bool failed = false;
    };
    // Under the file lock: writes unwritten_ to the current segment.
    Written write_unwritten();
    // Under the file lock: the blocks wholly written by a write of `bytes`
    // leave unwritten_ (kept until durable with always, freed otherwise).
    void retire_written(std::uint64_t bytes);
    // Under the file lock (`io`), writer thread: fdatasyncs the current
    // segment. False if it failed.
    bool sync(std::unique_lock<std::mutex>& io, SyncLock lock);
    // After a failed fdatasync under always: the segment back to its last
    // durable size, what was cut off to be written again from memory.
    void cut_back_to_durable();
    void set_failure(const std::string& what);

    const FsyncPolicy policy_;
    JournalHandoff& handoff_;
    JournalAppender& appender_;
    std::atomic<bool>& failing_;
    JournalSegments segments_;
    DurableMark durable_;

    // Under the handoff's mutex: requests, and the failure state.
    std::condition_variable_any rotated_;
    bool stop_ = false;
    bool rotate_requested_ = false;
    std::uint64_t rotations_done_ = 0;
    std::uint64_t rotated_to_ = 0;
    std::string failure_;
    bool write_failed_ = false;

    // The file side, under io_mutex_: the writer thread and threads in
    // write_through() write; the order is io_mutex_, then the handoff's
    // mutex, then a thread buffer's mutex.
    mutable std::mutex io_mutex_;
    bool accepting_ = false;  // open, the writer running: write_through() may write
    int fd_ = -1;
    std::string current_path_;
    BlockList unwritten_;               // taken from the appender, not yet written
    std::size_t unwritten_offset_ = 0;  // bytes of unwritten_'s first block already written
    BlockList unsynced_;                // written since the last fdatasync (always only)
    std::uint64_t written_ = 0;         // offset after the last byte written
    std::uint64_t segment_size_ = 0;    // bytes in the current segment file
    std::uint64_t synced_segment_size_ = 0;
    std::int64_t last_sync_ms_ = 0;  // writer thread only
    // Written and not yet fdatasynced: the writer's everysec timer runs.
    // Set by whoever writes, cleared by sync(); read by the sleeping writer
    // (seq_cst, paired with the handoff's idle mark as in
    // JournalHandoff::wake_writer()).
    std::atomic<bool> unsynced_data_{false};

    std::atomic<std::uint64_t> written_offset_{0};  // written_, for other threads
    std::function<void(std::uint64_t)> write_listener_;
    // fdatasync statistics (INFO persistence).
    std::atomic<std::uint64_t> delayed_fsyncs_{0};  // fdatasyncs over 2 s
    std::atomic<std::uint64_t> fsyncs_{0};
    std::atomic<std::int64_t> last_fsync_ms_{0};       // how long the last fdatasync took
    std::atomic<std::int64_t> last_fsync_unix_ms_{0};  // when the last one succeeded (0: never)
    std::atomic<bool> syncing_{false};

    std::thread thread_;
};

}  // namespace bloomery::persist
