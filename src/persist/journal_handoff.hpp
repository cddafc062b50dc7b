#pragma once
// Where the threads that append records hand them to the journal's writer
// thread: the lock that orders records into the stream, the writer's sleep,
// and the bytes handed over and not yet written away, held against the
// buffer limit. The appender (journal_appender.hpp) and the writer
// (journal_writer.hpp) share one.
//
// Lock order: the writer's file lock, then `mutex`, then a thread buffer's
// lock.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "adaptive_mutex.hpp"

namespace bloomery::persist {

class JournalHandoff {
public:
    // `failing` is the journal's refusal flag (JournalHealth), turned on
    // here when more than `buffer_limit` bytes wait.
    JournalHandoff(std::uint64_t buffer_limit, std::atomic<bool>& failing)
        : buffer_limit_(buffer_limit), failing_(failing) {}
    JournalHandoff(const JournalHandoff&) = delete;
    JournalHandoff& operator=(const JournalHandoff&) = delete;

    // Guards the appender's stream (its pending records, which threads have
    // buffers) and the writer's requests and failure state. Every keyspace
    // record takes it, from every thread, for a few instructions: it spins
    // before it sleeps.
    AdaptiveMutex mutex;
    // The writer sleeps on it, under `mutex`.
    std::condition_variable_any wake;

    // ---- The writer's sleep ----
    // After an append outside `mutex`: wakes the writer if it sleeps.
    void wake_writer() {
        // Pairs with the writer's wait (JournalWriter::wait_for_records()):
        // the writer stores writer_idle_ = true and then reads every
        // buffer's bytes; a thread stored its bytes and then reads
        // writer_idle_ (all seq_cst). Either the writer sees the bytes and
        // does not sleep, or the thread sees it idle and wakes it. Under
        // load the writer never sleeps, so this is a plain load of a line
        // nobody writes.
        if (!writer_idle_.load(std::memory_order_seq_cst)) return;
        bool wake_it;
        {
            std::lock_guard lock(mutex);
            wake_it = claim_idle_writer();
        }
        if (wake_it) wake.notify_one();
    }
    // Under `mutex`: true (and the writer marked awake) if it sleeps; the
    // caller then notifies `wake`.
    bool claim_idle_writer() {
        if (!writer_idle_.load(std::memory_order_relaxed)) return false;
        writer_idle_.store(false, std::memory_order_relaxed);
        return true;
    }
    // The writer, under `mutex`: marked idle before it reads whether
    // anything waits, and awake once it goes on.
    void writer_sleeps() { writer_idle_.store(true, std::memory_order_seq_cst); }
    void writer_wakes() { writer_idle_.store(false, std::memory_order_relaxed); }

    // ---- Bytes held ----
    // Under `mutex`: `bytes` entered the stream; past the limit, writes are
    // refused.
    void hold(std::uint64_t bytes) noexcept {
        // The writer lets go without the mutex: a read-modify-write.
        const std::uint64_t held = buffered_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
        if (held > buffer_limit_ && !failing_.load(std::memory_order_relaxed)) {
            failing_.store(true, std::memory_order_relaxed);
        }
    }
    // The writer: `bytes` are written away (and, with always, durable).
    void let_go(std::uint64_t bytes) noexcept {
        buffered_.fetch_sub(bytes, std::memory_order_relaxed);
    }
    // Bytes in the stream not yet written away: pending, unwritten, and
    // (always) not yet durable.
    std::uint64_t held() const { return buffered_.load(std::memory_order_relaxed); }
    bool over_limit() const { return held() > buffer_limit_; }
    std::uint64_t buffer_limit() const { return buffer_limit_; }

private:
    // Set (under `mutex`) while the writer sleeps; read without it by
    // threads that buffered a record (seq_cst both ways, see wake_writer()).
    std::atomic<bool> writer_idle_{false};
    std::atomic<std::uint64_t> buffered_{0};  // pending + unwritten + unsynced
    const std::uint64_t buffer_limit_;
    std::atomic<bool>& failing_;
};

}  // namespace bloomery::persist
