#pragma once
// Decides and makes the shifts of expiring filters (bloom/age_filter.hpp)
// where the data is primary: a count window's when an add found its
// generation full (wake()), a time window's when its generation's time is
// up by the clock it is given (track()). Replicas and replay never run one:
// they redo the AGE-SHIFT records the primary wrote.
//
// One thread shifts (AgeFilter::shift() allows one at a time per filter),
// and before each shift waits out, through the keyspace's epoch, every add
// that read an older generation than the current one (its precondition):
// Keyspace::wait_for_readers(). Each shift is recorded (Keyspace::shift_age).
//
// A time window's generations follow a schedule: a generation is due
// generation_ms after the last shift, and the shift takes the time it was
// due, so late shifts do not drift. A shift by count (a burst beyond the
// generation's items) takes the time it was made, and the schedule starts
// from there. catch_up() brings every tracked filter to now in one step per
// filter (a server back from an outage longer than a window clears the ring
// at once): only while nothing else changes the filters (at start).
//
// Thread safety: every member from any thread; start() and stop() from one.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "bloomery/bloom/age_filter.hpp"

namespace bloomery::store {

class Keyspace;

class AgeShifter {
public:
    using Clock = std::function<std::uint64_t()>;  // ms since the epoch
    AgeShifter(Keyspace& keyspace, Clock clock);
    ~AgeShifter();
    AgeShifter(const AgeShifter&) = delete;
    AgeShifter& operator=(const AgeShifter&) = delete;

    // Runs the shifting thread until stop().
    void start();
    void stop();

    // The server's role (Keyspace::set_deadlines() calls it): leading, it
    // tracks every time window the keyspace holds, catches them up
    // (catch_up(), before clients write) and starts; following (a replica,
    // replay), it stops and lets go of every filter, and wake() and track()
    // do nothing until it leads again. A new shifter leads without a
    // thread until start() or lead(true).
    void lead(bool leading);
    bool leading() const;
    // Looks again at once at what is due (the clock moved).
    void poke();

    // An add found `filter`'s generation full: shift it soon.
    void wake(bloom::AgeFilter& filter);
    // The same, on the calling thread (an adder's, outside any epoch
    // guard): the shifts a full generation wants, made now (while leading;
    // the thread is woken to retry one whose record could not be allocated).
    void shift_full(bloom::AgeFilter& filter);
    // A filter with a time window, watched while anyone else holds it (a
    // key, a snapshot); filters with a count window are ignored.
    void track(bloom::AgeFilter& filter);

    // Makes every shift due now on the calling thread; returns how many.
    std::size_t run_due();
    // At start, before clients: each tracked filter whose generations fell
    // behind the clock is brought to now in one step (Keyspace::
    // redo_age_shift: a window or more behind clears the ring at once).
    // Returns the filters moved.
    std::size_t catch_up();

    // Shifts made (INFO stats): because a generation was full, and by the
    // clock; filters watched now.
    std::uint64_t shifts_by_count() const {
        return shifts_by_count_.load(std::memory_order_relaxed);
    }
    std::uint64_t shifts_by_time() const { return shifts_by_time_.load(std::memory_order_relaxed); }
    std::size_t watched() const;
    // Filters brought to the clock in one step by catch_up().
    std::uint64_t catch_ups() const { return catch_ups_.load(std::memory_order_relaxed); }
    // Woken filters not yet done with (0: every generation found full has
    // been shifted).
    std::size_t pending() const;

    // Time until the next time window is due (ms; `idle_ms` if none).
    std::uint64_t next_due_in(std::uint64_t idle_ms) const;

private:
    // The generations `filter` is behind the clock at `now`, and the time
    // the last of them was due.
    static std::uint64_t behind(const bloom::AgeFilter& filter, std::uint64_t now,
                                std::uint64_t& due_ms);
    // One shift from the generation current now; false if another thread
    // shifted first.
    bool shift(bloom::AgeFilter& filter, std::uint64_t at_ms);
    void count_shift_by_count(bloom::AgeFilter& filter);
    // The shifts of filters woken as full (at most kShiftsPerWake each).
    std::size_t shift_woken(const std::vector<bloom::AgeFilterRef>& woken);
    void run();

    Keyspace& keyspace_;
    const Clock clock_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<bloom::AgeFilterRef> woken_;    // under mutex_
    std::vector<bloom::AgeFilterRef> tracked_;  // under mutex_
    bool stopping_ = false;                     // under mutex_
    bool poked_ = false;                        // under mutex_
    bool leading_ = true;                       // under mutex_
    std::mutex role_mutex_;                     // one lead() at a time
    std::thread thread_;
    std::atomic<std::uint64_t> shifts_by_count_{0};
    std::atomic<std::uint64_t> shifts_by_time_{0};
    std::atomic<std::uint64_t> catch_ups_{0};
    std::size_t busy_ = 0;  // under mutex_: woken filters run_due() holds
};

}  // namespace bloomery::store
