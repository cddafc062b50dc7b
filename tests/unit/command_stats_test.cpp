// Per-command statistics: the latency buckets, percentiles, and the per-thread
// tables summed and reset.

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "bloomery/core/command_stats.hpp"

namespace bloomery::core {
namespace {

using Buckets = LatencyBuckets;

TEST(LatencyBuckets, EveryDurationLiesWithinItsBucketsBounds) {
    std::mt19937_64 random(7);
    for (int i = 0; i < 200000; ++i) {
        // Log-uniform from 1 ns to about 68 s.
        const std::uint64_t d = std::uint64_t{1} << (random() % 36);
        const std::uint64_t ns = d + random() % d;
        const std::size_t b = Buckets::index(ns);
        ASSERT_LT(b, Buckets::kCount);
        ASSERT_LE(ns, Buckets::upper_bound(b)) << ns;
        if (b > 0) {
            ASSERT_GT(ns, Buckets::upper_bound(b - 1)) << ns;
        }
    }
}

TEST(LatencyBuckets, BucketsAreContiguousAndAtMostOneSixteenthWide) {
    for (std::size_t b = 1; b < Buckets::kCount; ++b) {
        const std::uint64_t lower = Buckets::upper_bound(b - 1) + 1;
        const std::uint64_t upper = Buckets::upper_bound(b);
        ASSERT_GE(upper, lower);
        ASSERT_EQ(Buckets::index(lower), b);
        ASSERT_EQ(Buckets::index(upper), b);
        // Relative width: what a percentile reported as the upper bound may
        // overstate.
        if (lower >= 16) {
            ASSERT_LE(static_cast<double>(upper - lower + 1) / static_cast<double>(lower),
                      1.0 / 16 + 1e-12);
        }
    }
}

TEST(LatencyBuckets, PowersOfTwoAreExactBucketBoundaries) {
    // Prometheus's `le` bounds: buckets [0, n) hold exactly the durations <=
    // 2^p ns.
    for (unsigned p = Buckets::kSubBucketBits; p < Buckets::kMaxBits; ++p) {
        const std::size_t n = Buckets::buckets_at_or_below_power(p);
        EXPECT_EQ(Buckets::upper_bound(n - 1), std::uint64_t{1} << p) << p;
        EXPECT_EQ(Buckets::index(std::uint64_t{1} << p), n - 1);
        EXPECT_EQ(Buckets::index((std::uint64_t{1} << p) + 1), n);
    }
}

TEST(LatencyBuckets, ZeroAndHugeDurationsStayInRange) {
    EXPECT_EQ(Buckets::index(0), 0u);
    EXPECT_EQ(Buckets::index(1), 0u);
    EXPECT_EQ(Buckets::index(~std::uint64_t{0}), Buckets::kCount - 1);
}

CommandTotals totals_of(const std::vector<std::uint64_t>& durations) {
    CommandStatsTable table;
    for (const std::uint64_t d : durations) table.record_call(3, d, CallOutcome::succeeded);
    std::vector<CommandTotals> totals(kMaxCommandIds);
    add_command_stats(totals, table);
    return totals[3];
}

TEST(CommandTotals, PercentilesAreTheBucketBoundAtOrAboveTheTrueValue) {
    // 1000 durations of 1..1000 µs: p50 is 500 µs, p99 990 µs, p99.9 999 µs.
    std::vector<std::uint64_t> durations;
    for (std::uint64_t us = 1; us <= 1000; ++us) durations.push_back(us * 1000);
    const CommandTotals t = totals_of(durations);
    EXPECT_EQ(t.calls, 1000u);
    EXPECT_EQ(t.latency_count(), 1000u);
    for (const auto& [percentile, truth] : {std::pair{50.0, 500000.0}, std::pair{99.0, 990000.0},
                                            std::pair{99.9, 999000.0}, std::pair{100.0, 1e6}}) {
        const double reported = static_cast<double>(t.latency_percentile(percentile));
        EXPECT_GE(reported, truth) << percentile;
        EXPECT_LE(reported, truth * (1 + 1.0 / 16)) << percentile;
    }
    EXPECT_EQ(t.latency_percentile(0), Buckets::upper_bound(Buckets::index(1000)));
}

TEST(CommandTotals, PercentilesOfOneDurationAndOfNone) {
    EXPECT_EQ(totals_of({}).latency_percentile(50), 0u);
    const CommandTotals one = totals_of({2048});
    EXPECT_EQ(one.latency_percentile(50), 2048u);  // a power of two is a bound
    EXPECT_EQ(one.latency_percentile(99.9), 2048u);
}

TEST(CommandTotals, CountsAtOrBelowAPowerOfTwoAreExact) {
    const CommandTotals t = totals_of({1000, 1024, 1025, 4096, 5000, 1u << 30});
    EXPECT_EQ(t.latency_at_or_below_power(9), 0u);   // <= 512 ns
    EXPECT_EQ(t.latency_at_or_below_power(10), 2u);  // <= 1024 ns: 1000, 1024
    EXPECT_EQ(t.latency_at_or_below_power(12), 4u);  // <= 4096 ns
    EXPECT_EQ(t.latency_at_or_below_power(29), 5u);
    EXPECT_EQ(t.latency_at_or_below_power(30), 6u);
    EXPECT_EQ(t.latency_at_or_below_power(Buckets::kMaxBits), 6u);
    EXPECT_EQ(t.nanoseconds, 1000u + 1024 + 1025 + 4096 + 5000 + (1u << 30));
}

TEST(CommandStatsTable, CountsCallsRejectionsAndFailuresPerCommand) {
    CommandStatsTable table;
    table.record_call(1, 500, CallOutcome::succeeded);
    table.record_call(1, 700, CallOutcome::failed);
    table.record_rejected(1);
    table.record_rejected(2);
    std::vector<CommandTotals> totals(kMaxCommandIds);
    add_command_stats(totals, table);
    EXPECT_EQ(totals[1].calls, 2u);
    EXPECT_EQ(totals[1].failed, 1u);
    EXPECT_EQ(totals[1].rejected, 1u);
    EXPECT_EQ(totals[1].nanoseconds, 1200u);
    EXPECT_EQ(totals[2].calls, 0u);
    EXPECT_EQ(totals[2].rejected, 1u);
    EXPECT_TRUE(totals[2].latency.empty());  // never ran: no histogram
    EXPECT_TRUE(totals[0].empty());
}

TEST(CommandStatsTable, ThreadsTablesSumAndABaselineResetsThem) {
    // Each thread writes only its own table (no read-modify-write); a reader
    // sums them while they run and, once they are done, sees every call.
    constexpr int kThreads = 4;
    constexpr int kCalls = 20000;
    std::vector<std::unique_ptr<CommandStatsTable>> tables;
    for (int i = 0; i < kThreads; ++i) tables.push_back(std::make_unique<CommandStatsTable>());
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([&table = *tables[i]] {
            for (int c = 0; c < kCalls; ++c)
                table.record_call(5, 100 + c % 50,
                                  c % 10 == 0 ? CallOutcome::failed : CallOutcome::succeeded);
        });
    }
    for (int reads = 0; reads < 20; ++reads) {
        std::vector<CommandTotals> partial(kMaxCommandIds);
        for (const auto& table : tables) add_command_stats(partial, *table);
        ASSERT_LE(partial[5].calls, std::uint64_t{kThreads} * kCalls);
    }
    for (auto& thread : threads) thread.join();
    std::vector<CommandTotals> totals(kMaxCommandIds);
    for (const auto& table : tables) add_command_stats(totals, *table);
    EXPECT_EQ(totals[5].calls, std::uint64_t{kThreads} * kCalls);
    EXPECT_EQ(totals[5].latency_count(), std::uint64_t{kThreads} * kCalls);
    EXPECT_EQ(totals[5].failed, std::uint64_t{kThreads} * kCalls / 10);

    // CONFIG RESETSTAT: the sums less a baseline taken then.
    const std::vector<CommandTotals> baseline = totals;
    tables[0]->record_call(5, 300, CallOutcome::succeeded);
    std::vector<CommandTotals> after(kMaxCommandIds);
    for (const auto& table : tables) add_command_stats(after, *table);
    subtract_command_stats(after, baseline);
    EXPECT_EQ(after[5].calls, 1u);
    EXPECT_EQ(after[5].failed, 0u);
    EXPECT_EQ(after[5].latency_count(), 1u);
    EXPECT_EQ(after[5].nanoseconds, 300u);
}

}  // namespace
}  // namespace bloomery::core
