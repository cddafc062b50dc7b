// INFO's counters: stats, replication, errorstats, commandstats and
// latencystats.

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bloomery/command/pubsub.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/store/age_shifter.hpp"
#include "info_sections.hpp"

namespace bloomery::command::info {

void stats_section(InfoContext& ctx, std::string& out) {
    const command::StatsTotals s = ctx.server.stats.stats();
    const command::ReplicationInfo r = ctx.server.replication.replication();
    const store::Keyspace::ExpireStats expiry = ctx.keyspace.expire_stats();
    char ops[32];
    std::snprintf(ops, sizeof ops, "%.0f", s.instantaneous_ops_per_sec);
    out.append("# Stats\r\n");
    line(out, "total_connections_received", s.connections_received);
    line(out, "total_commands_processed", s.commands);
    line(out, "instantaneous_ops_per_sec", std::string(ops));
    line(out, "total_net_input_bytes", s.net_input_bytes + r.link_received_bytes);
    line(out, "total_net_output_bytes", s.net_output_bytes);
    line(out, "total_net_repl_input_bytes", r.link_received_bytes);
    line(out, "total_net_repl_output_bytes", s.net_repl_output_bytes);
    line(out, "rejected_connections", s.rejected_connections);
    line(out, "sync_full", r.full_syncs);
    line(out, "sync_partial_ok", r.partial_syncs_ok);
    line(out, "sync_partial_err", r.partial_syncs_err);
    line(out, "expired_keys", s.expired_keys);
    line(out, "expired_stale_perc", fixed2(expiry.stale_percent));
    line(out, "expired_time_cap_reached_count", expiry.time_cap_reached);
    line(out, "expire_cycle_cpu_milliseconds", expiry.cycle_milliseconds);
    // noeviction: no key is evicted; clients are, past maxmemory-clients.
    line(out, "evicted_keys", 0);
    line(out, "evicted_clients", ctx.server.clients.evicted_clients());
    line(out, "total_eviction_exceeded_time", 0);
    line(out, "current_eviction_exceeded_time", 0);
    line(out, "keyspace_hits", s.keyspace_hits);
    line(out, "keyspace_misses", s.keyspace_misses);
    line(out, "pubsub_channels", ctx.server.pubsub.channel_count());
    line(out, "pubsub_patterns", ctx.server.pubsub.patterns());
    for (const char* field :
         {"pubsubshard_channels", "latest_fork_usec", "total_forks", "migrate_cached_sockets",
          "slave_expires_tracked_keys", "active_defrag_hits", "active_defrag_misses",
          "active_defrag_key_hits", "active_defrag_key_misses", "total_active_defrag_time",
          "current_active_defrag_time", "tracking_total_keys", "tracking_total_items",
          "tracking_total_prefixes", "unexpected_error_replies"}) {
        line(out, field, 0);
    }
    line(out, "total_error_replies", s.error_replies);
    line(out, "dump_payload_sanitizations", 0);
    line(out, "total_reads_processed", s.reads_processed);
    line(out, "total_writes_processed", s.writes_processed);
    // Every read and write runs on the worker threads; none is handed from
    // a main thread to I/O threads as Redis's io-threads do.
    line(out, "io_threaded_reads_processed", 0);
    line(out, "io_threaded_writes_processed", 0);
    line(out, "client_query_buffer_limit_disconnections", s.query_buffer_limit_disconnections);
    line(out, "client_output_buffer_limit_disconnections", s.output_buffer_limit_disconnections);
    line(out, "protocol_errors", s.protocol_errors);
    // bloomery's: expiring filters' shifts decided here (0 on a replica),
    // because a generation was full or by the clock, and the time windows
    // watched.
    const store::AgeShifter* shifter = ctx.keyspace.age_shifter();
    line(out, "expiring_shifts_by_count", shifter != nullptr ? shifter->shifts_by_count() : 0);
    line(out, "expiring_shifts_by_time", shifter != nullptr ? shifter->shifts_by_time() : 0);
    line(out, "expiring_time_windows_watched", shifter != nullptr ? shifter->watched() : 0);
    line(out, "expiring_catch_ups", shifter != nullptr ? shifter->catch_ups() : 0);
    line(out, "expiring_shifts_pending", shifter != nullptr ? shifter->pending() : 0);
}

// Redis's fields; offsets are byte positions in the primary's journal stream
// (proto/replication.md).
void replication_section(InfoContext& ctx, std::string& out) {
    const command::ReplicationInfo r = ctx.server.replication.replication();
    out.append("# Replication\r\n");
    line(out, "role", std::string(r.replica ? "slave" : "master"));
    if (r.replica) {
        line(out, "master_host", r.primary_host);
        line(out, "master_port", r.primary_port);
        line(out, "master_link_status", std::string(r.link_up ? "up" : "down"));
        // bloomery's: whether the link is TLS (--tls-replication).
        line(out, "master_link_tls", r.link_tls ? 1 : 0);
        line(out, "master_last_io_seconds_ago", r.last_io_seconds_ago);
        line(out, "master_sync_in_progress", r.sync_in_progress ? 1 : 0);
        line(out, "slave_read_repl_offset", r.read_offset);
        line(out, "slave_repl_offset", r.offset);
        if (r.sync_in_progress) line(out, "master_sync_read_bytes", r.sync_received_bytes);
        if (!r.link_up) line(out, "master_link_down_since_seconds", r.link_down_since_seconds);
        line(out, "slave_priority", 100);
        line(out, "slave_read_only", 1);
        line(out, "replica_announced", 1);
        text_line(out, "master_link_last_error", r.last_error);
    }
    line(out, "connected_slaves", r.replicas.size());
    if (!r.replica && ctx.settings.min_replicas_to_write() > 0 &&
        ctx.settings.min_replicas_max_lag_seconds() > 0) {
        line(out, "min_slaves_good_slaves",
             ctx.server.gate.good_replicas.load(std::memory_order_relaxed));
    }
    for (std::size_t i = 0; i < r.replicas.size(); ++i) {
        const command::ReplicaInfo& replica = r.replicas[i];
        line(out, "slave" + std::to_string(i),
             "ip=" + replica.ip + ",port=" + std::to_string(replica.port) +
                 ",state=" + replica.state + ",offset=" + std::to_string(replica.offset) +
                 ",lag=" + std::to_string(replica.lag_seconds));
    }
    line(out, "master_failover_state", "no-failover");
    line(out, "master_replid", r.replid);
    line(out, "master_replid2", r.replid2.empty() ? std::string(40, '0') : r.replid2);
    line(out, "master_repl_offset", r.offset);
    line(out, "second_repl_offset", r.second_offset);
    line(out, "repl_backlog_active", r.backlog_active ? 1 : 0);
    line(out, "repl_backlog_size", r.backlog_bytes);
    line(out, "repl_backlog_first_byte_offset", r.backlog_first_offset);
    line(out, "repl_backlog_histlen", r.backlog_active ? r.offset - r.backlog_first_offset : 0);
}

// Error replies by prefix (core/error_stats.hpp), as Redis 7.
void errorstats_section(InfoContext& ctx, std::string& out) {
    out.append("# Errorstats\r\n");
    for (const auto& [prefix, count] : ctx.server.stats.error_stats()) {
        out.append("errorstat_").append(prefix);
        out.append(":count=").append(std::to_string(count)).append("\r\n");
    }
}

// Redis 7's commandstats: every command (subcommands as "container|sub") that
// ran or was refused since start or CONFIG RESETSTAT.
void commandstats_section(InfoContext& ctx, std::string& out) {
    const std::vector<core::CommandTotals> totals = ctx.server.stats.command_stats();
    const auto& by_id = ctx.registry.by_id();
    out.append("# Commandstats\r\n");
    char per_call[32];
    for (std::size_t id = 0; id < totals.size() && id < by_id.size(); ++id) {
        const core::CommandTotals& t = totals[id];
        if (t.empty()) continue;
        const std::uint64_t usec = t.nanoseconds / 1000;
        std::snprintf(per_call, sizeof per_call, "%.2f",
                      t.calls == 0 ? 0.0
                                   : static_cast<double>(t.nanoseconds) / 1000.0 /
                                         static_cast<double>(t.calls));
        out.append("cmdstat_").append(by_id[id]->name);
        out.append(":calls=").append(std::to_string(t.calls));
        out.append(",usec=").append(std::to_string(usec));
        out.append(",usec_per_call=").append(per_call);
        out.append(",rejected_calls=").append(std::to_string(t.rejected));
        out.append(",failed_calls=").append(std::to_string(t.failed)).append("\r\n");
    }
}

// Redis 7's latencystats with its default percentiles (latency-tracking-info-
// percentiles "50 99 99.9"): each the upper bound of the histogram bucket it
// falls in (core/command_stats.hpp: at most 6.25 % above the true value), in
// microseconds with Redis's three decimals.
void latencystats_section(InfoContext& ctx, std::string& out) {
    static constexpr std::pair<std::string_view, double> kPercentiles[] = {
        {"p50", 50.0}, {"p99", 99.0}, {"p99.9", 99.9}};
    const std::vector<core::CommandTotals> totals = ctx.server.stats.command_stats();
    const auto& by_id = ctx.registry.by_id();
    out.append("# Latencystats\r\n");
    char value[48];
    for (std::size_t id = 0; id < totals.size() && id < by_id.size(); ++id) {
        const core::CommandTotals& t = totals[id];
        if (t.latency_count() == 0) continue;
        out.append("latency_percentiles_usec_").append(by_id[id]->name).push_back(':');
        bool first = true;
        for (const auto& [name, percentile] : kPercentiles) {
            if (!first) out.push_back(',');
            first = false;
            std::snprintf(value, sizeof value, "%.3f",
                          static_cast<double>(t.latency_percentile(percentile)) / 1000.0);
            out.append(name).push_back('=');
            out.append(value);
        }
        out.append("\r\n");
    }
}

}  // namespace bloomery::command::info
