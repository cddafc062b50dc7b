// The /metrics text: names, types, the command histogram's consistency, label
// escaping. (tests/integration/test_metrics.py parses a live server's with
// the Prometheus client library's parser.)

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "bloomery/net/prometheus.hpp"

namespace bloomery::net {
namespace {

MetricsSnapshot sample_snapshot() {
    MetricsSnapshot s;
    s.version = "9.9.9";
    s.start_time_ms = 1'700'000'000'000;
    s.now_ms = s.start_time_ms + 12'500;
    s.worker_threads = 2;
    s.ready = true;
    s.max_clients = 100;
    s.connected_clients = 3;
    s.stats.commands = 42;
    s.stats.net_input_bytes = 1000;
    s.command_names = {"bf.add", "bf.exists", "we\"ird\\name"};
    s.commands.resize(3);
    core::CommandStatsTable table;
    table.record_call(0, 700, core::CallOutcome::succeeded);            // 0.7 µs
    table.record_call(0, 3000, core::CallOutcome::failed);              // 3 µs
    table.record_call(0, 2'000'000'000, core::CallOutcome::succeeded);  // 2 s
    table.record_rejected(0);
    table.record_rejected(1);  // bf.exists: rejected only, no histogram
    table.record_call(2, 100, core::CallOutcome::succeeded);
    core::add_command_stats(s.commands, table);
    s.keyspace.keys = 5;
    s.keyspace.items = 1234;
    s.used_memory = 4096;
    s.persistence.journal.enabled = true;
    s.persistence.journal.last_fsync_unix_ms = s.now_ms - 1500;
    s.persistence.last_save_time = s.now_ms / 1000 - 60;
    return s;
}

// name{labels} -> value, for every sample line.
std::map<std::string, std::string> samples(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] == '#') continue;
        const std::size_t space = line.rfind(' ');
        out[line.substr(0, space)] = line.substr(space + 1);
    }
    return out;
}

TEST(Prometheus, EveryFamilyHasHelpAndTypeAndBloomeryNames) {
    const std::string text = render_metrics(sample_snapshot());
    std::istringstream lines(text);
    std::string family;
    for (std::string line; std::getline(lines, line);) {
        ASSERT_FALSE(line.empty());
        if (line.rfind("# HELP ", 0) == 0) {
            family = line.substr(7, line.find(' ', 7) - 7);
            EXPECT_EQ(family.rfind("bloomery_", 0), 0u) << line;
            continue;
        }
        if (line.rfind("# TYPE ", 0) == 0) {
            EXPECT_EQ(line.rfind("# TYPE " + family + " ", 0), 0u) << line;
            const std::string type = line.substr(8 + family.size());
            EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << line;
            // Prometheus conventions: counters end in _total.
            if (type == "counter") {
                EXPECT_TRUE(family.ends_with("_total")) << family;
            }
            continue;
        }
        EXPECT_EQ(line.rfind(family, 0), 0u) << "sample outside its family: " << line;
    }
}

TEST(Prometheus, CommandCountersAndHistogramAgree) {
    const auto s = samples(render_metrics(sample_snapshot()));
    EXPECT_EQ(s.at("bloomery_command_calls_total{command=\"bf.add\"}"), "3");
    EXPECT_EQ(s.at("bloomery_command_failed_calls_total{command=\"bf.add\"}"), "1");
    EXPECT_EQ(s.at("bloomery_command_rejected_calls_total{command=\"bf.add\"}"), "1");
    EXPECT_EQ(s.at("bloomery_command_rejected_calls_total{command=\"bf.exists\"}"), "1");
    EXPECT_EQ(s.at("bloomery_command_calls_total{command=\"bf.exists\"}"), "0");
    const std::string add = "bloomery_command_duration_seconds_bucket{command=\"bf.add\",le=";
    EXPECT_EQ(s.at(add + "\"5.12e-07\"}"), "0");
    EXPECT_EQ(s.at(add + "\"1.024e-06\"}"), "1");  // 0.7 µs
    EXPECT_EQ(s.at(add + "\"4.096e-06\"}"), "2");  // 3 µs
    EXPECT_EQ(s.at(add + "\"1.073741824\"}"), "2");
    EXPECT_EQ(s.at(add + "\"2.147483648\"}"), "3");  // 2 s
    EXPECT_EQ(s.at(add + "\"+Inf\"}"), "3");
    EXPECT_EQ(s.at("bloomery_command_duration_seconds_count{command=\"bf.add\"}"), "3");
    EXPECT_DOUBLE_EQ(std::stod(s.at("bloomery_command_duration_seconds_sum{command=\"bf.add\"}")),
                     2.0000037);
    // Rejected only: no histogram of bf.exists.
    EXPECT_EQ(s.count("bloomery_command_duration_seconds_count{command=\"bf.exists\"}"), 0u);
    // Buckets never decrease, ordered by their bound (+Inf last).
    std::map<double, std::uint64_t> buckets;
    for (const auto& [key, value] : s) {
        if (key.rfind(add, 0) != 0) continue;
        const std::string bound = key.substr(add.size() + 1, key.size() - add.size() - 3);
        buckets[bound == "+Inf" ? 1e300 : std::stod(bound)] = std::stoull(value);
    }
    EXPECT_EQ(buckets.size(), 28u);  // 2^8 .. 2^34 ns and +Inf
    std::uint64_t previous = 0;
    for (const auto& [bound, count] : buckets) {
        EXPECT_GE(count, previous) << bound;
        previous = count;
    }
}

TEST(Prometheus, LabelValuesAreEscaped) {
    const std::string text = render_metrics(sample_snapshot());
    EXPECT_NE(text.find("bloomery_command_calls_total{command=\"we\\\"ird\\\\name\"} 1\n"),
              std::string::npos)
        << text;
}

TEST(Prometheus, ServerKeyspaceAndPersistenceValues) {
    const auto s = samples(render_metrics(sample_snapshot()));
    EXPECT_EQ(s.at("bloomery_build_info{version=\"9.9.9\"}"), "1");
    EXPECT_EQ(s.at("bloomery_uptime_seconds"), "12.5");
    EXPECT_DOUBLE_EQ(std::stod(s.at("bloomery_start_time_seconds")), 1.7e9);
    EXPECT_EQ(s.at("bloomery_ready"), "1");
    EXPECT_EQ(s.at("bloomery_connected_clients"), "3");
    EXPECT_EQ(s.at("bloomery_commands_processed_total"), "42");
    EXPECT_EQ(s.at("bloomery_net_input_bytes_total"), "1000");
    EXPECT_EQ(s.at("bloomery_filters"), "5");
    EXPECT_EQ(s.at("bloomery_filter_items"), "1234");
    EXPECT_EQ(s.at("bloomery_used_memory_bytes"), "4096");
    EXPECT_EQ(s.at("bloomery_memory_bytes{use=\"filters\"}"), "0");
    EXPECT_EQ(s.at("bloomery_journal_enabled"), "1");
    EXPECT_EQ(s.at("bloomery_journal_fsync_age_seconds"), "1.5");
    EXPECT_EQ(s.at("bloomery_snapshot_age_seconds"), "60.5");
}

TEST(Prometheus, JournalMetricsOnlyWhenItIsOn) {
    MetricsSnapshot snapshot = sample_snapshot();
    snapshot.persistence.journal = {};
    const auto s = samples(render_metrics(snapshot));
    EXPECT_EQ(s.at("bloomery_journal_enabled"), "0");
    EXPECT_EQ(s.count("bloomery_journal_size_bytes"), 0u);
}

}  // namespace
}  // namespace bloomery::net
