// The core pieces behind INFO errorstats, LATENCY and client-output-buffer-
// limit: error prefixes and their bound, the latency monitor's histories,
// and the per-class output buffer limits' parsing.

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "bloomery/core/config.hpp"
#include "bloomery/core/error_stats.hpp"
#include "bloomery/core/latency_monitor.hpp"

namespace bloomery::core {
namespace {

using Counts = std::vector<std::pair<std::string, std::uint64_t>>;

class ErrorStats : public ::testing::Test {
protected:
    void SetUp() override { reset_error_stats(); }
    void TearDown() override { reset_error_stats(); }
};

TEST(ErrorPrefix, IsTheFirstWordWithinThirtyOneBytesElseErr) {
    EXPECT_EQ(error_prefix("ERR syntax error"), "ERR");
    EXPECT_EQ(error_prefix("WRONGTYPE Operation against a key"), "WRONGTYPE");
    EXPECT_EQ(error_prefix("Nonscaling filters cannot expand"), "Nonscaling");
    EXPECT_EQ(error_prefix("Invalid information value"), "Invalid");
    EXPECT_EQ(error_prefix("NOAUTH Authentication required."), "NOAUTH");
    EXPECT_EQ(error_prefix("NOSPACEHERE"), "ERR");
    EXPECT_EQ(error_prefix(""), "ERR");
    // Redis looks for the space in "-TEXT"'s first 32 bytes: a prefix of 30
    // bytes is kept, one of 31 is not.
    EXPECT_EQ(error_prefix(std::string(30, 'X') + " rest"), std::string(30, 'X'));
    EXPECT_EQ(error_prefix(std::string(31, 'X') + " rest"), "ERR");
}

TEST_F(ErrorStats, CountsEveryTableByPrefixSortedAsRedisLists) {
    ErrorStatsTable a, b;
    a.record("ERR syntax error");
    a.record("WRONGTYPE x");
    a.record("ERR unknown command");
    b.record("Invalid information value");
    b.record("ERR x");
    EXPECT_EQ(error_stats_sum({&a, &b}), (Counts{{"ERR", 3}, {"Invalid", 1}, {"WRONGTYPE", 1}}));
    EXPECT_EQ(error_stats_sum({&a}), (Counts{{"ERR", 2}, {"WRONGTYPE", 1}}));
}

TEST_F(ErrorStats, ResetForgetsEveryCountIncludingThoseOfIdleTables) {
    ErrorStatsTable a, b;
    a.record("ERR x");
    b.record("OOM y");
    reset_error_stats();
    EXPECT_EQ(error_stats_sum({&a, &b}), Counts{});
    // A prefix met before the reset counts from zero again, in a new id.
    a.record("OOM again");
    EXPECT_EQ(error_stats_sum({&a, &b}), (Counts{{"OOM", 1}}));
}

TEST_F(ErrorStats, PastTheBoundOnlyErrorstatsDisabledUntilReset) {
    ErrorStatsTable table;
    for (std::size_t i = 0; i < kMaxErrorPrefixes; ++i) {
        table.record("E" + std::to_string(i) + " text");
    }
    EXPECT_EQ(error_stats_sum({&table}).size(), kMaxErrorPrefixes);
    // Known prefixes still count; the first new one turns counting off.
    table.record("E0 again");
    EXPECT_EQ(error_stats_sum({&table}).front(), (std::pair<std::string, std::uint64_t>{"E0", 2}));
    table.record("NEWONE text");
    EXPECT_EQ(error_stats_sum({&table}), (Counts{{"ERRORSTATS_DISABLED", 1}}));
    table.record("ERR still off");
    EXPECT_EQ(error_stats_sum({&table}), (Counts{{"ERRORSTATS_DISABLED", 1}}));
    reset_error_stats();
    table.record("ERR on again");
    EXPECT_EQ(error_stats_sum({&table}), (Counts{{"ERR", 1}}));
}

class LatencyMonitor : public ::testing::Test {
protected:
    void SetUp() override {
        latency_reset({});
        set_latency_threshold_ms(0);
    }
    void TearDown() override {
        latency_reset({});
        set_latency_threshold_ms(0);
    }
};

TEST_F(LatencyMonitor, RecordsOnlyWhatReachesTheThresholdWhileOn) {
    latency_add_sample_if_needed(kLatencyCommand, 500);
    EXPECT_TRUE(latency_events().empty());  // off by default
    set_latency_threshold_ms(10);
    latency_add_sample_if_needed(kLatencyCommand, 9);
    EXPECT_TRUE(latency_events().empty());
    latency_add_sample_if_needed(kLatencyCommand, 10);
    latency_add_sample_if_needed(kLatencyExpireCycle, 30);
    const std::vector<LatencyEvent> events = latency_events();
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].name, "command");
    EXPECT_EQ(events[0].max_ms, 10u);
    ASSERT_EQ(events[0].samples.size(), 1u);
    EXPECT_EQ(events[0].samples[0].latency_ms, 10u);
    EXPECT_GT(events[0].samples[0].time, 1700000000);
    EXPECT_EQ(events[1].name, "expire-cycle");
}

TEST_F(LatencyMonitor, OneSamplePerSecondKeepsItsWorstAndTheMaxEver) {
    latency_add_sample(kLatencyFastCommand, 5);
    latency_add_sample(kLatencyFastCommand, 50);
    latency_add_sample(kLatencyFastCommand, 7);
    const std::optional<LatencyEvent> found = latency_event("fast-command");
    ASSERT_TRUE(found);
    const LatencyEvent& event = *found;
    // All three within one or two seconds: at most two samples, the worst kept.
    ASSERT_LE(event.samples.size(), 2u);
    EXPECT_EQ(event.max_ms, 50u);
    std::uint32_t worst = 0;
    for (const LatencySample& sample : event.samples) worst = std::max(worst, sample.latency_ms);
    EXPECT_EQ(worst, 50u);
    EXPECT_FALSE(latency_event("FAST-COMMAND"));  // names are exact
}

TEST_F(LatencyMonitor, ResetByNameIgnoresCaseAndCountsWhatItForgot) {
    latency_add_sample("command", 1);
    latency_add_sample("journal-fsync", 1);
    latency_add_sample("snapshot", 1);
    const std::string_view two[] = {"COMMAND", "Snapshot", "never-seen"};
    EXPECT_EQ(latency_reset(two), 2u);
    ASSERT_EQ(latency_events().size(), 1u);
    EXPECT_EQ(latency_events()[0].name, "journal-fsync");
    EXPECT_EQ(latency_reset({}), 1u);
    EXPECT_TRUE(latency_events().empty());
}

TEST_F(LatencyMonitor, EventsAreBounded) {
    for (std::size_t i = 0; i < kMaxLatencyEvents + 10; ++i) {
        latency_add_sample("event-" + std::to_string(i), 1);
    }
    EXPECT_EQ(latency_events().size(), kMaxLatencyEvents);
    latency_add_sample(std::string(1000, 'x'), 1);  // an existing slot is not taken
    EXPECT_EQ(latency_events().size(), kMaxLatencyEvents);
}

TEST(OutputBufferLimits, DefaultsAreRedisButANormalHardLimit) {
    const OutputBufferLimits limits;
    EXPECT_EQ(format_output_buffer_limits(limits),
              "normal 1073741824 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60");
    EXPECT_EQ(limits.get(ClientClass::pubsub), (OutputBufferLimit{32 << 20, 8 << 20, 60}));
}

TEST(OutputBufferLimits, ParsesRedisFormSettingOnlyTheClassesNamed) {
    OutputBufferLimits limits;
    Status parsed = parse_output_buffer_limits("normal 0 0 0 replica 512mb 128MB 120", limits);
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(format_output_buffer_limits(limits),
              "normal 0 0 0 slave 536870912 134217728 120 pubsub 33554432 8388608 60");
    ASSERT_TRUE(parse_output_buffer_limits("  PubSub 1k 2kb 3  slave 1g 1gb 0", limits));
    EXPECT_EQ(limits.get(ClientClass::pubsub), (OutputBufferLimit{1000, 2048, 3}));
    EXPECT_EQ(limits.get(ClientClass::replica), (OutputBufferLimit{1000000000, 1073741824, 0}));
    // Nothing named: nothing changes.
    ASSERT_TRUE(parse_output_buffer_limits("", limits));
    EXPECT_EQ(limits.get(ClientClass::pubsub), (OutputBufferLimit{1000, 2048, 3}));
}

TEST(OutputBufferLimits, OneSizeAloneIsTheNormalHardLimit) {
    OutputBufferLimits limits;
    Status parsed = parse_output_buffer_limits("65536", limits);
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(limits.get(ClientClass::normal), (OutputBufferLimit{65536, 0, 0}));
    parsed = parse_output_buffer_limits("2mb", limits);
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(limits.get(ClientClass::normal).hard_bytes, 2u << 20);
    EXPECT_EQ(limits.get(ClientClass::replica), (OutputBufferLimit{256 << 20, 64 << 20, 60}));
}

TEST(OutputBufferLimits, RefusesWithRedisReasonsAndChangesNothing) {
    OutputBufferLimits limits;
    const std::string before = format_output_buffer_limits(limits);
    Status refused = parse_output_buffer_limits("normal 1 2", limits);
    EXPECT_FALSE(refused);
    EXPECT_EQ(refused.error(), "Wrong number of arguments in buffer limit configuration.");
    refused = parse_output_buffer_limits("normal 1 2 3 master 1 2 3", limits);
    EXPECT_FALSE(refused);
    EXPECT_EQ(refused.error(), "Invalid client class specified in buffer limit configuration.");
    for (const char* bad :
         {"normal x 0 0", "normal 1 2 -3", "normal 1 2 3x", "normal -1 0 0", "normal 1tb 0 0",
          "normal 99999999999gb 0 0", "replica 1 1 1 normal 1 y 1"}) {
        refused = parse_output_buffer_limits(bad, limits);
        EXPECT_FALSE(refused) << bad;
        EXPECT_EQ(refused.error(),
                  "Error in hard, soft or soft_seconds setting in buffer limit configuration.")
            << bad;
    }
    EXPECT_FALSE(parse_output_buffer_limits("abc", limits));
    EXPECT_EQ(format_output_buffer_limits(limits), before);
}

TEST(OutputBufferLimits, ACopyHasTheSameValues) {
    Config config;
    ASSERT_TRUE(parse_output_buffer_limits("pubsub 1 2 3", config.client_output_buffer_limits));
    const Config copy = config;
    EXPECT_EQ(copy.client_output_buffer_limits.get(ClientClass::pubsub),
              (OutputBufferLimit{1, 2, 3}));
}

}  // namespace
}  // namespace bloomery::core
