#pragma once
// Per-command statistics as Redis 7 keeps them (INFO commandstats,
// latencystats) and as /metrics exports them: calls, time, rejected and failed
// calls, and a latency histogram, per command id (command::CommandSpec::id).
//
// Each worker thread owns one CommandStatsTable and is its only writer: every
// update is a relaxed load and a relaxed store of a counter no other thread
// writes, never a read-modify-write on a shared line: a counter every thread
// incremented would bounce one cache line between the cores on every command
// and cap throughput as threads are added. Readers on other threads (INFO, a
// scrape) load the same counters relaxed and sum the tables; a sum read while
// commands run may be a few commands behind, never torn.
//
// Plain data and atomics, no Asio and no RESP: every layer may include it.

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace bloomery::core {

// The clock that times every command. clock_gettime(CLOCK_MONOTONIC) is
// cheap in a loop, but its vDSO orders the TSC read (lfence / rdtscp), which
// drains the pipeline: timing a fast command with it costs a large part of
// the command again. One plain rdtsc per command is what dispatch reads
// (dispatch.cpp; the figures are in tests/bench/README.md). A plain rdtsc does not
// wait for the command's outstanding cache misses, and is used where the
// kernel itself trusts the TSC (current_clocksource is "tsc": constant rate,
// synchronized across CPUs); the rate is calibrated against steady_clock
// once, over 2 ms, on first use. Elsewhere ticks are steady_clock
// nanoseconds.
class CommandClock {
public:
    // Calibrated on the first call (thread-safe); cheap afterwards.
    static const CommandClock& get();

    std::uint64_t now() const {
#if defined(__x86_64__) || defined(__i386__)
        if (use_tsc_) return __rdtsc();
#endif
        return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::steady_clock::now().time_since_epoch())
                                              .count());
    }
    // A difference of two now() values in nanoseconds (0 if the second was
    // earlier, which a clock moving backwards could make it).
    std::uint64_t nanoseconds(std::uint64_t ticks) const {
        if (static_cast<std::int64_t>(ticks) < 0) return 0;
        return use_tsc_ ? static_cast<std::uint64_t>(static_cast<double>(ticks) * ns_per_tick_)
                        : ticks;
    }
    bool uses_tsc() const {
        return use_tsc_;
    }

private:
    CommandClock();
    bool use_tsc_ = false;
    double ns_per_tick_ = 1.0;
};

// Most command ids (commands and subcommands together) the tables hold; the
// registry refuses a command table with more.
inline constexpr std::size_t kMaxCommandIds = 256;

// Latency buckets, HDR-like: durations in nanoseconds, every power of two cut
// into 2^kSubBucketBits linear sub-buckets, so a bucket is at most 1/16 (6.25 %)
// of its values wide, from 1 ns to 2^kMaxBits ns (68.7 s; longer durations
// count in the last bucket). A duration of d ns goes to the bucket of d - 1,
// so every bucket is (lower, upper], its upper bound inclusive: the count at
// or below any power of two, Prometheus's `le`, is exact.
struct LatencyBuckets {
    static constexpr unsigned kSubBucketBits = 4;
    static constexpr unsigned kMaxBits = 36;
    static constexpr std::size_t kCount = std::size_t{kMaxBits - kSubBucketBits + 1}
                                          << kSubBucketBits;  // 528

    static std::size_t index(std::uint64_t nanoseconds) {
        constexpr std::uint64_t kSub = std::uint64_t{1} << kSubBucketBits;
        constexpr std::uint64_t kMaxValue = (std::uint64_t{1} << kMaxBits) - 1;
        std::uint64_t v = nanoseconds == 0 ? 0 : nanoseconds - 1;
        if (v > kMaxValue) v = kMaxValue;
        if (v < kSub) return static_cast<std::size_t>(v);
        const unsigned octave = static_cast<unsigned>(std::bit_width(v)) - 1;  // >= kSubBucketBits
        return (std::size_t{octave - kSubBucketBits + 1} << kSubBucketBits) |
               static_cast<std::size_t>((v >> (octave - kSubBucketBits)) & (kSub - 1));
    }
    // The largest duration (ns) that lands in bucket `i` (kCount - 1 also
    // holds every longer one).
    static std::uint64_t upper_bound(std::size_t i) {
        const std::size_t next = i + 1;  // the next bucket's smallest d - 1
        constexpr std::size_t kSub = std::size_t{1} << kSubBucketBits;
        if (next < kSub) return next;
        const unsigned octave = static_cast<unsigned>(next >> kSubBucketBits) + kSubBucketBits - 1;
        return (std::uint64_t{kSub} + (next & (kSub - 1))) << (octave - kSubBucketBits);
    }
    // Buckets [0, result) hold exactly the durations <= 2^power_of_two ns
    // (power_of_two in [kSubBucketBits, kMaxBits)).
    static std::size_t buckets_at_or_below_power(unsigned power_of_two) {
        return std::size_t{power_of_two - kSubBucketBits + 1} << kSubBucketBits;
    }
};

// One thread's latency histogram of one command.
class LatencyHistogram {
public:
    // Owner thread only.
    void record(std::uint64_t nanoseconds) {
        std::atomic<std::uint64_t>& bucket = counts_[LatencyBuckets::index(nanoseconds)];
        bucket.store(bucket.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    // Any thread.
    std::uint64_t count(std::size_t bucket) const {
        return counts_[bucket].load(std::memory_order_relaxed);
    }

private:
    std::array<std::atomic<std::uint64_t>, LatencyBuckets::kCount> counts_{};
};

// One thread's counters of one command. Redis 7's meanings: `calls` ran,
// `rejected` were refused before running (arity, NOAUTH, NOPERM, OOM,
// MISCONF), `failed` ran and replied an error.
struct CommandCounters {
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> nanoseconds{0};  // time of the calls (dispatch()), summed
    std::atomic<std::uint64_t> rejected{0};
    std::atomic<std::uint64_t> failed{0};
    // Allocated by the owner on the command's first call on this thread (most
    // commands never run, and a histogram is 4 KiB), published with release.
    std::atomic<LatencyHistogram*> latency{nullptr};
};

// How a command that ran ended: `failed` if it replied an error.
enum class CallOutcome { succeeded, failed };

// One worker thread's counters of every command, indexed by command id.
class CommandStatsTable {
public:
    CommandStatsTable() = default;
    ~CommandStatsTable();
    CommandStatsTable(const CommandStatsTable&) = delete;
    CommandStatsTable& operator=(const CommandStatsTable&) = delete;

    // Owner thread only. `id` < kMaxCommandIds.
    void record_call(std::size_t id, std::uint64_t nanoseconds, CallOutcome outcome) {
        CommandCounters& c = counters_[id];
        bump(c.calls, 1);
        bump(c.nanoseconds, nanoseconds);
        if (outcome == CallOutcome::failed) bump(c.failed, 1);
        LatencyHistogram* histogram = c.latency.load(std::memory_order_relaxed);
        if (histogram == nullptr) histogram = create_histogram(c);
        if (histogram != nullptr) histogram->record(nanoseconds);
    }
    void record_rejected(std::size_t id) { bump(counters_[id].rejected, 1); }

    // Any thread.
    const CommandCounters& at(std::size_t id) const { return counters_[id]; }

private:
    static void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by) {
        counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
    }
    // Null if the allocation fails: the command then goes without a histogram.
    static LatencyHistogram* create_histogram(CommandCounters& counters);

    std::array<CommandCounters, kMaxCommandIds> counters_{};
};

// What every thread counted for one command, summed (a copy, plain numbers).
struct CommandTotals {
    std::uint64_t calls = 0;
    std::uint64_t nanoseconds = 0;
    std::uint64_t rejected = 0;
    std::uint64_t failed = 0;
    // LatencyBuckets::kCount counts, or empty while no thread has one.
    std::vector<std::uint64_t> latency;

    bool empty() const { return calls == 0 && rejected == 0 && failed == 0; }
    // Durations in the histogram (calls recorded; may trail `calls` by the
    // commands finishing while it was read).
    std::uint64_t latency_count() const;
    // Durations <= 2^power_of_two ns (exact, see LatencyBuckets).
    std::uint64_t latency_at_or_below_power(unsigned power_of_two) const;
    // The smallest bucket upper bound (ns) at or below which `percentile`
    // percent of the durations lie, as HDR histograms report it (so at most
    // 6.25 % above the true value); 0 with no durations.
    std::uint64_t latency_percentile(double percentile) const;
};

// Adds `table`'s counters to `totals` (sized kMaxCommandIds by the caller).
void add_command_stats(std::vector<CommandTotals>& totals, const CommandStatsTable& table);
// totals -= baseline, element by element (CONFIG RESETSTAT keeps a baseline
// instead of zeroing counters it does not own); never below zero.
void subtract_command_stats(std::vector<CommandTotals>& totals,
                            const std::vector<CommandTotals>& baseline);

}  // namespace bloomery::core
