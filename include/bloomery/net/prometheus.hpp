#pragma once
// /metrics in the Prometheus text exposition format (version 0.0.4): every
// metric named bloomery_*, counters ending in _total, durations in seconds,
// sizes in bytes, the command latency histogram as _bucket{le=...} / _sum /
// _count labelled by command. README ("Monitoring") lists the metrics.
//
// Two steps, so the text can be tested without a server: collect_metrics()
// copies what the running server reports (thread-safe, from any thread), and
// render_metrics() turns that copy into text (pure).

#include <cstdint>
#include <string>
#include <vector>

#include "bloomery/command/server.hpp"
#include "bloomery/core/command_stats.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/net/fpr_sweep.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::command {
class Registry;
class Slowlog;
}  // namespace bloomery::command

namespace bloomery::net {

// The cluster as this node sees it (cluster mode only), and with the map in
// etcd this node's lease and role changes (Server fills those in).
struct ClusterMetrics {
    bool enabled = false;
    bool in_etcd = false;
    bool state_ok = false;
    bool primary = true;
    std::uint64_t known_nodes = 0;
    std::uint64_t slots_assigned = 0;
    std::uint64_t slots_failed = 0;
    std::uint64_t current_epoch = 0;
    bool etcd_connected = false;
    bool writes_allowed = true;
    std::uint64_t lease_renewals = 0;
    std::uint64_t lease_failures = 0;
    std::uint64_t role_changes = 0;
    std::uint64_t failovers = 0;
};

// Everything one scrape reports, copied at one moment.
struct MetricsSnapshot {
    std::string version;
    std::int64_t now_ms = 0;         // unix time
    std::int64_t start_time_ms = 0;  // unix time
    unsigned worker_threads = 0;
    bool ready = false;
    std::size_t max_clients = 0;
    std::size_t connected_clients = 0;
    command::StatsTotals stats;
    std::vector<std::string> command_names;     // by command id
    std::vector<core::CommandTotals> commands;  // by command id
    std::size_t slowlog_length = 0;
    store::Keyspace::Counts keyspace;  // with items
    // Filters past their error rate (the caller fills it in from its
    // FalsePositiveSweep: collect_metrics() does not walk the keyspace).
    FalsePositiveGauges false_positives;
    std::uint64_t memory_by_use[core::kMemoryUses] = {};
    std::uint64_t used_memory = 0;
    std::uint64_t used_memory_peak = 0;
    std::uint64_t used_memory_rss = 0;
    std::uint64_t maxmemory = 0;
    persist::PersistenceInfo persistence;
    command::ReplicationInfo replication;
    ClusterMetrics cluster;
};

// What /readyz answers now (bloomery_ready).
enum class Readiness { not_ready, ready };

// Reads the server's state through its interfaces and the other shared objects.
// O(keys) for the keyspace counts; safe from any thread.
MetricsSnapshot collect_metrics(const command::Services& server, const command::Registry& registry,
                                const store::Keyspace& keyspace, const core::Config& config,
                                const command::Slowlog* slowlog, Readiness readiness);

// The exposition text of `snapshot`.
std::string render_metrics(const MetricsSnapshot& snapshot);

}  // namespace bloomery::net
