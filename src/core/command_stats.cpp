#include "bloomery/core/command_stats.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <new>
#include <string>
#include <thread>

namespace bloomery::core {

const CommandClock& CommandClock::get() {
    static const CommandClock clock;
    return clock;
}

CommandClock::CommandClock() {
#if defined(__x86_64__) || defined(__i386__)
    std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    std::string name;
    if (!(source >> name) || name != "tsc") return;
    const auto wall_start = std::chrono::steady_clock::now();
    const std::uint64_t tsc_start = __rdtsc();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const auto wall_end = std::chrono::steady_clock::now();
    const std::uint64_t tsc_end = __rdtsc();
    const double ns = std::chrono::duration<double, std::nano>(wall_end - wall_start).count();
    if (tsc_end <= tsc_start || ns <= 0) return;
    ns_per_tick_ = ns / static_cast<double>(tsc_end - tsc_start);
    use_tsc_ = true;
#endif
}

CommandStatsTable::~CommandStatsTable() {
    for (CommandCounters& counters : counters_) {
        delete counters.latency.load(std::memory_order_acquire);
    }
}

LatencyHistogram* CommandStatsTable::create_histogram(CommandCounters& counters) {
    auto* histogram = new (std::nothrow) LatencyHistogram();
    // Release: a reader that sees the pointer sees the zeroed buckets.
    if (histogram != nullptr) counters.latency.store(histogram, std::memory_order_release);
    return histogram;
}

std::uint64_t CommandTotals::latency_count() const {
    std::uint64_t total = 0;
    for (const std::uint64_t count : latency) total += count;
    return total;
}

std::uint64_t CommandTotals::latency_at_or_below_power(unsigned power_of_two) const {
    if (latency.empty()) return 0;
    if (power_of_two < LatencyBuckets::kSubBucketBits) return 0;
    const std::size_t end =
        power_of_two >= LatencyBuckets::kMaxBits
            ? latency.size()
            : std::min(latency.size(), LatencyBuckets::buckets_at_or_below_power(power_of_two));
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < end; ++i) total += latency[i];
    return total;
}

std::uint64_t CommandTotals::latency_percentile(double percentile) const {
    const std::uint64_t total = latency_count();
    if (total == 0) return 0;
    // The rank of the duration asked for, 1-based: p99 of 1000 durations is
    // the 990th; at least the first.
    const double wanted =
        std::ceil(std::clamp(percentile, 0.0, 100.0) / 100.0 * static_cast<double>(total));
    const std::uint64_t rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(wanted));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < latency.size(); ++i) {
        seen += latency[i];
        if (seen >= rank) return LatencyBuckets::upper_bound(i);
    }
    return LatencyBuckets::upper_bound(latency.size() - 1);
}

void add_command_stats(std::vector<CommandTotals>& totals, const CommandStatsTable& table) {
    for (std::size_t id = 0; id < totals.size() && id < kMaxCommandIds; ++id) {
        const CommandCounters& c = table.at(id);
        CommandTotals& t = totals[id];
        t.calls += c.calls.load(std::memory_order_relaxed);
        t.nanoseconds += c.nanoseconds.load(std::memory_order_relaxed);
        t.rejected += c.rejected.load(std::memory_order_relaxed);
        t.failed += c.failed.load(std::memory_order_relaxed);
        const LatencyHistogram* histogram = c.latency.load(std::memory_order_acquire);
        if (histogram == nullptr) continue;
        if (t.latency.empty()) t.latency.assign(LatencyBuckets::kCount, 0);
        for (std::size_t i = 0; i < LatencyBuckets::kCount; ++i)
            t.latency[i] += histogram->count(i);
    }
}

void subtract_command_stats(std::vector<CommandTotals>& totals,
                            const std::vector<CommandTotals>& baseline) {
    auto minus = [](std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; };
    for (std::size_t id = 0; id < totals.size() && id < baseline.size(); ++id) {
        CommandTotals& t = totals[id];
        const CommandTotals& b = baseline[id];
        t.calls = minus(t.calls, b.calls);
        t.nanoseconds = minus(t.nanoseconds, b.nanoseconds);
        t.rejected = minus(t.rejected, b.rejected);
        t.failed = minus(t.failed, b.failed);
        if (t.latency.empty() || b.latency.empty()) continue;
        for (std::size_t i = 0; i < t.latency.size(); ++i)
            t.latency[i] = minus(t.latency[i], b.latency[i]);
    }
}

}  // namespace bloomery::core
