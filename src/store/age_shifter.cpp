#include "bloomery/store/age_shifter.hpp"

#include <algorithm>
#include <chrono>
#include <new>
#include <utility>

#include "bloomery/store/keyspace.hpp"

namespace bloomery::store {

namespace {

// How often the thread looks when no time window is due sooner.
constexpr std::uint64_t kIdleMs = 100;
// Shifts of one woken filter per round: adders that refill generations as
// fast as they are shifted cannot keep the thread on one filter.
constexpr int kShiftsPerWake = 64;
// The pause after a round that shifted nothing.
constexpr std::uint64_t kRetryMs = 5;

bool holds(const std::vector<bloom::AgeFilterRef>& filters, const bloom::AgeFilter& filter) {
    return std::any_of(filters.begin(), filters.end(),
                       [&](const bloom::AgeFilterRef& held) { return held.get() == &filter; });
}

}  // namespace

AgeShifter::AgeShifter(Keyspace& keyspace, Clock clock)
    : keyspace_(keyspace), clock_(std::move(clock)) {}

AgeShifter::~AgeShifter() {
    stop();
    if (keyspace_.age_shifter() == this) keyspace_.attach_age_shifter(nullptr);
}

void AgeShifter::start() {
    if (thread_.joinable()) return;
    thread_ = std::thread([this] { run(); });
}

void AgeShifter::stop() {
    {
        const std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    const std::lock_guard lock(mutex_);
    stopping_ = false;
}

void AgeShifter::lead(bool leading) {
    const std::lock_guard role(role_mutex_);
    {
        const std::lock_guard lock(mutex_);
        leading_ = leading;
    }
    if (!leading) {
        stop();
        const std::lock_guard lock(mutex_);
        woken_.clear();
        tracked_.clear();
        return;
    }
    // One shard at a time: no lock of all shards at once while role_mutex_
    // is held.
    for (const bloom::AgeFilterRef& filter : keyspace_.expiring_filters()) track(*filter);
    catch_up();
    start();
}

bool AgeShifter::leading() const {
    const std::lock_guard lock(mutex_);
    return leading_;
}

std::size_t AgeShifter::watched() const {
    const std::lock_guard lock(mutex_);
    return tracked_.size();
}

std::size_t AgeShifter::pending() const {
    const std::lock_guard lock(mutex_);
    return woken_.size() + busy_;
}

void AgeShifter::poke() {
    {
        const std::lock_guard lock(mutex_);
        poked_ = true;
    }
    wake_.notify_all();
}

void AgeShifter::wake(bloom::AgeFilter& filter) {
    {
        const std::lock_guard lock(mutex_);
        if (!leading_ || holds(woken_, filter)) return;
        woken_.push_back(bloom::AgeFilterRef::share(filter));
    }
    wake_.notify_one();
}

void AgeShifter::track(bloom::AgeFilter& filter) {
    if (filter.geometry().window_ms == 0) return;
    const std::lock_guard lock(mutex_);
    if (leading_ && !holds(tracked_, filter)) {
        tracked_.push_back(bloom::AgeFilterRef::share(filter));
    }
}

std::uint64_t AgeShifter::behind(const bloom::AgeFilter& filter, std::uint64_t now,
                                 std::uint64_t& due_ms) {
    const std::uint64_t generation_ms = filter.geometry().generation_ms();
    const std::uint64_t last = filter.shifted_ms();
    if (generation_ms == 0 || now < last || now - last < generation_ms) return 0;
    const std::uint64_t missed = (now - last) / generation_ms;
    due_ms = last + missed * generation_ms;
    return missed;
}

bool AgeShifter::shift(bloom::AgeFilter& filter, std::uint64_t at_ms) {
    // Every add that read an older generation than `from` has finished
    // once the readers that had begun by now are done; another thread that
    // shifted meanwhile makes this one step down.
    const std::uint64_t from = filter.generation();
    Keyspace::wait_for_readers();
    return keyspace_.shift_age(filter, at_ms, from);
}

void AgeShifter::shift_full(bloom::AgeFilter& filter) {
    if (!leading()) return;
    try {
        for (int i = 0; i < kShiftsPerWake && filter.shift_wanted(); ++i) {
            if (shift(filter, clock_())) count_shift_by_count(filter);
        }
    } catch (const std::bad_alloc&) {
        wake(filter);  // the shifter's thread tries again
    }
}

void AgeShifter::count_shift_by_count(bloom::AgeFilter& filter) {
    if (filter.geometry().window_ms != 0) filter.count_early_shift();
    shifts_by_count_.fetch_add(1, std::memory_order_relaxed);
}

std::size_t AgeShifter::shift_woken(const std::vector<bloom::AgeFilterRef>& woken) {
    std::size_t shifts = 0;
    for (const bloom::AgeFilterRef& filter : woken) {
        try {
            for (int i = 0; i < kShiftsPerWake && filter->shift_wanted(); ++i) {
                if (!shift(*filter, clock_())) continue;
                count_shift_by_count(*filter);
                ++shifts;
            }
        } catch (const std::bad_alloc&) {
            // The shift's record could not be allocated: nothing of it
            // changed; the filter is woken again below.
        }
        if (filter->shift_wanted()) wake(*filter);
    }
    return shifts;
}

std::size_t AgeShifter::run_due() {
    std::vector<bloom::AgeFilterRef> woken;
    std::vector<bloom::AgeFilterRef> tracked;
    {
        const std::lock_guard lock(mutex_);
        woken.swap(woken_);
        busy_ = woken.size();
        // Filters no key holds any more are let go.
        std::erase_if(tracked_, [](const bloom::AgeFilterRef& f) { return f->references() == 1; });
        tracked = tracked_;
    }
    std::size_t shifts = shift_woken(woken);
    {
        const std::lock_guard lock(mutex_);
        busy_ = 0;
    }
    try {
        for (const bloom::AgeFilterRef& filter : tracked) {
            std::uint64_t due = 0;
            const std::uint64_t missed = behind(*filter, clock_(), due);
            if (missed == 0) continue;
            // Past a full ring every slice is clear: the rest would only
            // clear clear slices. The last shift takes the time the last
            // missed generation was due, so the schedule holds.
            const std::uint64_t steps = std::min<std::uint64_t>(missed, filter->slices());
            const std::uint64_t generation_ms = filter->geometry().generation_ms();
            const std::uint64_t first_due = due - (missed - 1) * generation_ms;
            for (std::uint64_t i = 0; i < steps; ++i) {
                if (!shift(*filter, i + 1 == steps ? due : first_due + i * generation_ms)) break;
                shifts_by_time_.fetch_add(1, std::memory_order_relaxed);
                ++shifts;
            }
        }
    } catch (const std::bad_alloc&) {
        // A shift's record could not be allocated: nothing of that shift
        // changed; the next round tries again.
    }
    return shifts;
}

std::size_t AgeShifter::catch_up() {
    std::vector<bloom::AgeFilterRef> tracked;
    {
        const std::lock_guard lock(mutex_);
        tracked = tracked_;
    }
    std::size_t moved = 0;
    for (const bloom::AgeFilterRef& filter : tracked) {
        std::uint64_t due = 0;
        const std::uint64_t missed = behind(*filter, clock_(), due);
        if (missed == 0) continue;
        keyspace_.redo_age_shift(*filter, filter->generation() + missed, due);
        catch_ups_.fetch_add(1, std::memory_order_relaxed);
        ++moved;
    }
    return moved;
}

std::uint64_t AgeShifter::next_due_in(std::uint64_t idle_ms) const {
    const std::uint64_t now = clock_();
    std::uint64_t soonest = idle_ms;
    const std::lock_guard lock(mutex_);
    for (const bloom::AgeFilterRef& filter : tracked_) {
        const std::uint64_t due = filter->shifted_ms() + filter->geometry().generation_ms();
        soonest = std::min(soonest, due > now ? due - now : 0);
    }
    return soonest;
}

void AgeShifter::run() {
    for (;;) {
        const std::uint64_t wait_ms = next_due_in(kIdleMs);
        {
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, std::chrono::milliseconds(wait_ms),
                           [this] { return stopping_ || poked_ || !woken_.empty(); });
            if (stopping_) return;
            poked_ = false;
        }
        if (run_due() == 0) {
            // Nothing shifted (an adder made the shift first, or a record
            // could not be allocated and the filter was woken again): a
            // pause, not a spin, before the next look.
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, std::chrono::milliseconds(kRetryMs),
                           [this] { return stopping_ || poked_; });
            if (stopping_) return;
        }
    }
}

}  // namespace bloomery::store
