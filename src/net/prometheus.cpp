#include "bloomery/net/prometheus.hpp"

#include <charconv>
#include <string_view>

#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"

namespace bloomery::net {

MetricsSnapshot collect_metrics(const command::Services& server, const command::Registry& registry,
                                const store::Keyspace& keyspace, const core::Config& config,
                                const command::Slowlog* slowlog, Readiness readiness) {
    MetricsSnapshot s;
    s.version = BLOOMERY_VERSION;
    s.now_ms = store::now_ms();
    s.start_time_ms = server.stats.start_time_ms();
    s.worker_threads = server.stats.worker_threads();
    s.ready = readiness == Readiness::ready;
    s.max_clients = config.max_clients;
    s.connected_clients = server.clients.connected_clients();
    s.stats = server.stats.stats();
    for (const command::CommandSpec* spec : registry.by_id()) s.command_names.push_back(spec->name);
    s.commands = server.stats.command_stats();
    s.slowlog_length = slowlog != nullptr ? slowlog->length() : 0;
    s.keyspace = keyspace.counts();
    for (unsigned use = 0; use < core::kMemoryUses; ++use) {
        s.memory_by_use[use] = core::memory_used(static_cast<core::MemoryUse>(use));
    }
    s.used_memory = core::memory_used_total();
    s.used_memory_peak = std::max(core::memory_peak(), s.used_memory);
    s.used_memory_rss = core::resident_bytes();
    s.maxmemory = config.maxmemory;
    s.persistence = server.persistence.persistence();
    s.replication = server.replication.replication();
    if (config.cluster_enabled) {
        const std::shared_ptr<const cluster::ClusterMap> map = server.cluster.snapshot();
        s.cluster.enabled = true;
        s.cluster.in_etcd = config.cluster_in_etcd();
        s.cluster.state_ok = map->state_ok();
        s.cluster.primary = map->self().is_primary();
        s.cluster.known_nodes = map->nodes().size();
        s.cluster.slots_assigned = map->slots_assigned();
        s.cluster.slots_failed = map->slots_failed();
        s.cluster.current_epoch = map->current_epoch();
        s.cluster.writes_allowed = server.cluster.writes_allowed();
    }
    return s;
}

namespace {

// The lower and upper `le` bounds of the latency histogram, as powers of two
// nanoseconds: 256 ns to 17.2 s, every bound exact (core/command_stats.hpp).
// Finer or wider buckets exist inside; a bound per octave keeps a scrape at
// 28 lines per command that ran.
constexpr unsigned kFirstBoundPower = 8;
constexpr unsigned kLastBoundPower = 34;

class Text {
public:
    void family(std::string_view name, std::string_view type, std::string_view help) {
        out_.append("# HELP ").append(name).push_back(' ');
        out_.append(help).push_back('\n');
        out_.append("# TYPE ").append(name).push_back(' ');
        out_.append(type).push_back('\n');
    }
    // One sample: name{labels} value. `labels` is already formatted.
    void sample(std::string_view name, std::string_view labels, std::string_view value) {
        out_.append(name);
        if (!labels.empty()) out_.append("{").append(labels).append("}");
        out_.push_back(' ');
        out_.append(value).push_back('\n');
    }
    void sample(std::string_view name, std::string_view labels, std::uint64_t value) {
        sample(name, labels, std::to_string(value));
    }
    void sample(std::string_view name, std::string_view labels, std::int64_t value) {
        sample(name, labels, std::to_string(value));
    }
    void sample(std::string_view name, std::string_view labels, double value) {
        sample(name, labels, number(value));
    }
    // A family of one unlabelled sample.
    template <class Value>
    void single(std::string_view name, std::string_view type, std::string_view help, Value value) {
        family(name, type, help);
        sample(name, {}, value);
    }
    std::string take() { return std::move(out_); }

    // The shortest text that reads back as the same double ("1795505112.758",
    // "2.56e-07"), as Prometheus's own clients write floats.
    static std::string number(double value) {
        char text[64];
        const auto result = std::to_chars(text, text + sizeof text, value);
        return {text, result.ptr};
    }
    // label="value" with the format's escapes (\\, \", \n).
    static std::string label(std::string_view name, std::string_view value) {
        std::string text(name);
        text += "=\"";
        for (const char c : value) {
            if (c == '\\' || c == '"') {
                text += '\\';
                text += c;
            } else if (c == '\n') {
                text += "\\n";
            } else {
                text += c;
            }
        }
        text += '"';
        return text;
    }

private:
    std::string out_;
};

double seconds(std::int64_t milliseconds) {
    return static_cast<double>(milliseconds) / 1000.0;
}

void render_server(const MetricsSnapshot& s, Text& t) {
    t.family("bloomery_build_info", "gauge", "Always 1; the version as a label");
    t.sample("bloomery_build_info", Text::label("version", s.version), std::uint64_t{1});
    t.single("bloomery_start_time_seconds", "gauge", "Unix time the server started",
             seconds(s.start_time_ms));
    t.single("bloomery_uptime_seconds", "gauge", "Seconds since the server started",
             seconds(s.now_ms - s.start_time_ms));
    t.single("bloomery_worker_threads", "gauge", "Worker threads serving clients",
             std::uint64_t{s.worker_threads});
    t.single("bloomery_ready", "gauge",
             "1 once the data is loaded and the listeners accept, 0 before and while shutting "
             "down (as /readyz)",
             std::uint64_t{s.ready ? 1u : 0u});
}

void render_commands(const MetricsSnapshot& s, Text& t) {
    t.single("bloomery_commands_processed_total", "counter",
             "Commands received, unknown and refused ones included", s.stats.commands);
    t.single("bloomery_error_replies_total", "counter", "Error replies sent",
             s.stats.error_replies);
    t.single("bloomery_protocol_errors_total", "counter", "Clients closed for a protocol error",
             s.stats.protocol_errors);

    const std::size_t n = std::min(s.commands.size(), s.command_names.size());
    struct Counter {
        std::string_view name;
        std::string_view help;
        std::uint64_t core::CommandTotals::*field;
    };
    static constexpr Counter kCounters[] = {
        {"bloomery_command_calls_total", "Calls of a command that ran",
         &core::CommandTotals::calls},
        {"bloomery_command_rejected_calls_total",
         "Calls refused before running (arity, NOAUTH, NOPERM, OOM, MISCONF)",
         &core::CommandTotals::rejected},
        {"bloomery_command_failed_calls_total", "Calls that ran and replied an error",
         &core::CommandTotals::failed},
    };
    for (const Counter& counter : kCounters) {
        t.family(counter.name, "counter", counter.help);
        for (std::size_t id = 0; id < n; ++id) {
            if (s.commands[id].empty()) continue;
            t.sample(counter.name, Text::label("command", s.command_names[id]),
                     s.commands[id].*counter.field);
        }
    }

    static constexpr std::string_view kHistogram = "bloomery_command_duration_seconds";
    t.family(kHistogram, "histogram",
             "Time of a command: its parsing, checks and handler (network waits excluded)");
    std::string name;
    for (std::size_t id = 0; id < n; ++id) {
        const core::CommandTotals& c = s.commands[id];
        const std::uint64_t count = c.latency_count();
        if (count == 0) continue;
        const std::string command = Text::label("command", s.command_names[id]);
        name.assign(kHistogram).append("_bucket");
        for (unsigned power = kFirstBoundPower; power <= kLastBoundPower; ++power) {
            // A division, so the bound is the double nearest 2^power / 1e9.
            const double bound = static_cast<double>(std::uint64_t{1} << power) / 1e9;
            t.sample(name, command + "," + Text::label("le", Text::number(bound)),
                     c.latency_at_or_below_power(power));
        }
        t.sample(name, command + "," + Text::label("le", "+Inf"), count);
        // _count is the histogram's own total, so it equals the +Inf bucket
        // even while a command finishes during the scrape.
        name.assign(kHistogram).append("_sum");
        t.sample(name, command, static_cast<double>(c.nanoseconds) / 1e9);
        name.assign(kHistogram).append("_count");
        t.sample(name, command, count);
    }
    t.single("bloomery_slowlog_length", "gauge", "Entries in the slow log (SLOWLOG LEN)",
             std::uint64_t{s.slowlog_length});
}

void render_clients(const MetricsSnapshot& s, Text& t) {
    t.single("bloomery_connected_clients", "gauge", "Client connections open",
             std::uint64_t{s.connected_clients});
    t.single("bloomery_max_clients", "gauge", "--maxclients", std::uint64_t{s.max_clients});
    t.single("bloomery_connections_received_total", "counter", "Client connections accepted",
             s.stats.connections_received);
    t.single("bloomery_rejected_connections_total", "counter",
             "Connections refused (--maxclients, protected mode)", s.stats.rejected_connections);
    t.single("bloomery_net_input_bytes_total", "counter", "Bytes read from clients",
             s.stats.net_input_bytes);
    t.single("bloomery_net_output_bytes_total", "counter", "Bytes written to clients",
             s.stats.net_output_bytes);
}

void render_keyspace(const MetricsSnapshot& s, Text& t) {
    t.single("bloomery_filters", "gauge", "Filters (keys)", std::uint64_t{s.keyspace.keys});
    t.single("bloomery_filters_expiring", "gauge", "Filters with a deadline (EXPIRE)",
             std::uint64_t{s.keyspace.with_expiry});
    t.single("bloomery_filter_items", "gauge",
             "Items inserted into every filter (adds that set at least one new bit)",
             s.keyspace.items);
    t.single("bloomery_filter_bytes", "gauge", "Bytes held by filters, at their allocated size",
             s.memory_by_use[static_cast<unsigned>(core::MemoryUse::filters)]);
    t.single("bloomery_filters_over_error_rate", "gauge",
             "Filters whose estimated false-positive rate (BF.INFO FPR) exceeds the rate they "
             "were created for, in the last complete sweep of the keyspace",
             s.false_positives.over_target);
    t.single("bloomery_filter_fpr_worst_ratio", "gauge",
             "The largest estimated false-positive rate over created-for rate of any filter, in "
             "the last complete sweep",
             s.false_positives.worst_ratio);
    t.single("bloomery_fpr_sweep_filters", "gauge", "Filters the last complete sweep checked",
             s.false_positives.filters_checked);
    t.single("bloomery_fpr_sweeps_total", "counter",
             "Complete sweeps of the keyspace for false-positive rates (a bounded slice per "
             "scrape)",
             s.false_positives.sweeps);
    t.single("bloomery_keyspace_hits_total", "counter", "Lookups that found their filter",
             s.stats.keyspace_hits);
    t.single("bloomery_keyspace_misses_total", "counter", "Lookups of a missing filter",
             s.stats.keyspace_misses);
    t.single("bloomery_expired_keys_total", "counter", "Filters removed by their deadline",
             s.stats.expired_keys);
}

void render_memory(const MetricsSnapshot& s, Text& t) {
    t.single("bloomery_used_memory_bytes", "gauge",
             "Bytes held by the server's own account (INFO used_memory)", s.used_memory);
    t.single("bloomery_used_memory_peak_bytes", "gauge", "Largest used_memory since start",
             s.used_memory_peak);
    t.single("bloomery_used_memory_rss_bytes", "gauge", "Resident set of the process",
             s.used_memory_rss);
    t.single("bloomery_maxmemory_bytes", "gauge", "--maxmemory (0: no limit)", s.maxmemory);
    static constexpr std::string_view kUses[core::kMemoryUses] = {
        "filters", "keyspace", "query_buffers", "output_buffers", "other", "replica_buffers"};
    t.family("bloomery_memory_bytes", "gauge", "used_memory by what holds it");
    for (unsigned use = 0; use < core::kMemoryUses; ++use) {
        t.sample("bloomery_memory_bytes", Text::label("use", kUses[use]), s.memory_by_use[use]);
    }
}

void render_persistence(const MetricsSnapshot& s, Text& t) {
    const persist::PersistenceInfo& p = s.persistence;
    t.single("bloomery_load_duration_seconds", "gauge",
             "Time to load the snapshot and replay the journal at start", p.load_seconds);
    t.single("bloomery_loaded_filters", "gauge", "Filters loaded from the snapshot at start",
             p.loaded_keys);
    t.single("bloomery_snapshot_enabled", "gauge", "1 if save points are configured (--save)",
             std::uint64_t{p.enabled ? 1u : 0u});
    t.single("bloomery_snapshot_in_progress", "gauge", "1 while a background snapshot runs",
             std::uint64_t{p.bgsave_in_progress ? 1u : 0u});
    t.single("bloomery_snapshot_last_success", "gauge",
             "1 if the last snapshot attempt succeeded (or none was made), 0 if it failed",
             std::uint64_t{p.last_bgsave_ok ? 1u : 0u});
    t.single("bloomery_snapshot_last_duration_seconds", "gauge",
             "Duration of the last snapshot attempt (-1: none yet)", p.last_save_duration_seconds);
    t.single("bloomery_snapshot_last_success_timestamp_seconds", "gauge",
             "Unix time of the last successful snapshot (the start time before the first)",
             static_cast<std::int64_t>(p.last_save_time));
    t.single("bloomery_snapshot_age_seconds", "gauge",
             "Seconds since the last successful snapshot (since start before the first)",
             static_cast<double>(s.now_ms) / 1000.0 - static_cast<double>(p.last_save_time));
    t.single("bloomery_snapshots_total", "counter", "Successful snapshots", p.saves);
    t.single("bloomery_snapshot_last_bytes", "gauge", "Size of the last snapshot",
             p.last_save_bytes);
    t.single("bloomery_changes_since_last_snapshot", "gauge",
             "Writes not yet in a snapshot (INFO rdb_changes_since_last_save)",
             p.changes_since_last_save);

    const persist::JournalInfo& j = p.journal;
    t.single("bloomery_journal_enabled", "gauge", "1 with --appendonly yes",
             std::uint64_t{j.enabled ? 1u : 0u});
    if (!j.enabled) return;
    t.single("bloomery_journal_last_write_success", "gauge",
             "1 while the journal writes, 0 while writes fail (writes then answer -MISCONF)",
             std::uint64_t{j.last_write_ok ? 1u : 0u});
    t.single("bloomery_journal_size_bytes", "gauge", "Bytes of every journal segment",
             j.current_size);
    t.single("bloomery_journal_pending_bytes", "gauge",
             "Journal bytes appended and not yet durable", j.buffer_length);
    t.single("bloomery_journal_fsyncs_total", "counter", "fdatasyncs of the journal", j.fsyncs);
    t.single("bloomery_journal_delayed_fsyncs_total", "counter", "fdatasyncs that took over 2 s",
             j.delayed_fsync);
    t.single("bloomery_journal_last_fsync_duration_seconds", "gauge",
             "Duration of the last fdatasync", seconds(j.last_fsync_ms));
    if (j.last_fsync_unix_ms > 0) {
        t.single("bloomery_journal_last_fsync_timestamp_seconds", "gauge",
                 "Unix time of the last successful fdatasync", seconds(j.last_fsync_unix_ms));
        t.single("bloomery_journal_fsync_age_seconds", "gauge",
                 "Seconds since the last successful fdatasync",
                 seconds(s.now_ms - j.last_fsync_unix_ms));
    }
}

// INFO replication's figures (proto/replication.md: offsets are byte
// positions in the primary's journal stream).
void render_replication(const MetricsSnapshot& s, Text& t) {
    const command::ReplicationInfo& r = s.replication;
    t.single("bloomery_replication_is_replica", "gauge",
             "1 on a replica (writes answer -READONLY), 0 on a primary",
             std::uint64_t{r.replica ? 1u : 0u});
    t.single("bloomery_replication_offset", "gauge",
             "A primary's journal offset, or how far a replica applied its primary's", r.offset);
    t.single("bloomery_replication_connected_replicas", "gauge", "Replicas fed by this server",
             std::uint64_t{r.replicas.size()});
    // One label per replica, for each of its three families.
    std::vector<std::string> labels;
    for (const command::ReplicaInfo& replica : r.replicas) {
        labels.push_back(Text::label("replica", replica.ip + ":" + std::to_string(replica.port)));
    }
    t.family("bloomery_replication_replica_acked_offset", "gauge",
             "The offset each replica acknowledged (REPLCONF ACK)");
    for (std::size_t i = 0; i < labels.size(); ++i) {
        t.sample("bloomery_replication_replica_acked_offset", labels[i], r.replicas[i].offset);
    }
    t.family("bloomery_replication_replica_lag_bytes", "gauge",
             "Bytes of the stream a replica has not acknowledged yet");
    for (std::size_t i = 0; i < labels.size(); ++i) {
        const std::uint64_t acked = r.replicas[i].offset;
        t.sample("bloomery_replication_replica_lag_bytes", labels[i],
                 r.offset > acked ? r.offset - acked : std::uint64_t{0});
    }
    t.family("bloomery_replication_replica_ack_age_seconds", "gauge",
             "Seconds since each replica's last acknowledgement");
    for (std::size_t i = 0; i < labels.size(); ++i) {
        t.sample("bloomery_replication_replica_ack_age_seconds", labels[i],
                 r.replicas[i].lag_seconds);
    }
    t.single("bloomery_replication_full_syncs_total", "counter",
             "Full copies sent to replicas (PSYNC answered +FULLRESYNC)", r.full_syncs);
    t.single("bloomery_replication_partial_syncs_total", "counter",
             "Replicas that resumed from their offset (+CONTINUE)", r.partial_syncs_ok);
    if (r.replica) {
        t.single("bloomery_replication_link_up", "gauge",
                 "1 while this replica's link to its primary is up", std::uint64_t{r.link_up});
        t.single("bloomery_replication_sync_in_progress", "gauge",
                 "1 while this replica receives or loads a full copy",
                 std::uint64_t{r.sync_in_progress});
        t.single("bloomery_replication_last_io_seconds", "gauge",
                 "Seconds since this replica last heard from its primary (-1: never)",
                 r.last_io_seconds_ago);
        t.single("bloomery_replication_received_offset", "gauge",
                 "How far this replica has received its primary's stream", r.read_offset);
    }
}

// The cluster map as this node sees it (INFO cluster's figures), and with
// the map in etcd its lease, role changes and failovers.
void render_cluster(const MetricsSnapshot& s, Text& t) {
    const ClusterMetrics& c = s.cluster;
    if (!c.enabled) return;
    const auto flag = [](bool value) { return std::uint64_t{value ? 1u : 0u}; };
    t.single("bloomery_cluster_state_ok", "gauge",
             "1 while every slot is served by a node that is up (cluster_state:ok)",
             flag(c.state_ok));
    t.single("bloomery_cluster_is_primary", "gauge", "1 on a primary, 0 on a replica",
             flag(c.primary));
    t.single("bloomery_cluster_known_nodes", "gauge", "Nodes in this node's map", c.known_nodes);
    t.single("bloomery_cluster_slots_assigned", "gauge", "Slots served by some node",
             c.slots_assigned);
    t.single("bloomery_cluster_slots_fail", "gauge", "Slots whose primary is down", c.slots_failed);
    t.single("bloomery_cluster_current_epoch", "gauge", "The map's highest config epoch",
             c.current_epoch);
    if (!c.in_etcd) return;
    t.single("bloomery_cluster_etcd_connected", "gauge",
             "1 once the map in etcd was read and this node's lease taken", flag(c.etcd_connected));
    t.single("bloomery_cluster_writes_allowed", "gauge",
             "1 while this node's lease lets it take writes as a primary", flag(c.writes_allowed));
    t.single("bloomery_cluster_lease_renewals_total", "counter",
             "Renewals of this node's liveness lease in etcd", c.lease_renewals);
    t.single("bloomery_cluster_lease_failures_total", "counter",
             "Lease renewals etcd did not answer, or answered lapsed (etcd errors)",
             c.lease_failures);
    t.single("bloomery_cluster_role_changes_total", "counter",
             "Times the map made this node a primary or a replica of another", c.role_changes);
    t.single("bloomery_cluster_failovers_total", "counter",
             "Failed primaries whose slots this node took over", c.failovers);
}

// Each block of metrics, in the order they appear.
constexpr void (*kSections[])(const MetricsSnapshot&, Text&) = {
    render_server, render_commands,    render_clients,     render_keyspace,
    render_memory, render_persistence, render_replication, render_cluster,
};

}  // namespace

std::string render_metrics(const MetricsSnapshot& snapshot) {
    Text text;
    for (auto* section : kSections) section(snapshot, text);
    return text.take();
}

}  // namespace bloomery::net
