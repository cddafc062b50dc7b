// INFO: Redis's sections and field names, filled from the server's hooks.

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/pubsub.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/allocator.hpp"
#include "bloomery/core/memory.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

// INFO reports on every part of the server but shutdown and MIGRATE.
using InfoContext = With<uses::Clients, uses::Stats, uses::Persistence, uses::Replication,
                         uses::Gate, uses::PubSub>;

std::string human_bytes(std::uint64_t bytes) {
    const char* units[] = {"B", "K", "M", "G", "T"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024 && unit < 4) {
        value /= 1024;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text, unit == 0 ? "%.0f%s" : "%.2f%s", value, units[unit]);
    return text;
}

const std::string& run_id() {
    static const std::string id = [] {
        std::random_device device;
        std::mt19937_64 generator(device());
        std::string hex;
        const char* digits = "0123456789abcdef";
        for (int i = 0; i < 40; ++i) hex.push_back(digits[generator() % 16]);
        return hex;
    }();
    return id;
}

void line(std::string& out, std::string_view field, const std::string& value) {
    out.append(field);
    out.push_back(':');
    out.append(value);
    out.append("\r\n");
}

template <class Number>
void line(std::string& out, std::string_view field, Number value) {
    line(out, field, std::to_string(value));
}

std::string percent(std::uint64_t numerator, std::uint64_t denominator) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f%%",
                  denominator == 0
                      ? 0.0
                      : static_cast<double>(numerator) * 100.0 / static_cast<double>(denominator));
    return text;
}

std::string fixed2(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", value);
    return text;
}

// A build id as Redis shows one (hex), from what identifies this build.
std::string build_id() {
    std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
    for (const char c : std::string_view("bloomery " BLOOMERY_VERSION " " __DATE__ " " __TIME__)) {
        hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    }
    char text[32];
    std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(hash));
    return text;
}

std::string executable_path() {
    char path[4096];
    const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
    return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string();
}

// Redis 7.0's fields, in its order, where they apply to bloomery (those about
// Lua, forks, eviction, pub/sub, defragmentation and client tracking say what
// holds here: none of it runs, so 0); bloomery's own fields follow each
// section's.
void info_server(InfoContext& ctx, std::string& out) {
    struct utsname name {};
    uname(&name);
    const std::int64_t now = store::now_ms();
    const std::int64_t uptime = (now - ctx.server.stats.start_time_ms()) / 1000;
    out.append("# Server\r\n");
    line(out, "redis_version", std::string(kRedisCompatVersion));
    line(out, "redis_git_sha1", std::string("00000000"));
    line(out, "redis_git_dirty", 0);
    line(out, "redis_build_id", build_id());
    line(out, "redis_mode", std::string(ctx.config.cluster_enabled ? "cluster" : "standalone"));
    line(out, "os", std::string(name.sysname) + " " + name.release + " " + name.machine);
    line(out, "arch_bits", static_cast<int>(sizeof(void*) * 8));
    line(out, "monotonic_clock", std::string("POSIX clock_gettime"));
    line(out, "multiplexing_api", std::string("epoll"));
    line(out, "atomicvar_api", std::string("c11-builtin"));
#if defined(__GNUC__)
    line(out, "gcc_version",
         std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
             std::to_string(__GNUC_PATCHLEVEL__));
#endif
    line(out, "process_id", static_cast<long long>(getpid()));
    line(out, "process_supervised", std::string("no"));
    line(out, "run_id", run_id());
    line(out, "tcp_port", ctx.config.port);
    line(out, "server_time_usec", now * 1000);
    line(out, "uptime_in_seconds", uptime);
    line(out, "uptime_in_days", uptime / 86400);
    line(out, "hz", 10);
    line(out, "configured_hz", 10);
    // Redis's LRU clock: seconds, 24 bits (bloomery's access clock).
    line(out, "lru_clock", store::access_clock() & 0xFFFFFFu);
    line(out, "executable", executable_path());
    line(out, "config_file", ctx.config.config_file);
    line(out, "io_threads_active", ctx.server.stats.worker_threads() > 1 ? 1 : 0);
    line(out, "bloomery_version", std::string(BLOOMERY_VERSION));
    line(out, "bloomery_threads", ctx.server.stats.worker_threads());
}

void info_clients(InfoContext& ctx, std::string& out) {
    const auto [largest_input, largest_output] = ctx.server.clients.largest_buffers();
    out.append("# Clients\r\n");
    line(out, "connected_clients", ctx.server.clients.connected_clients());
    line(out, "cluster_connections", 0);
    line(out, "maxclients", ctx.config.max_clients);
    // The largest buffers among the clients now (Redis: over the last
    // seconds).
    line(out, "client_recent_max_input_buffer", largest_input);
    line(out, "client_recent_max_output_buffer", largest_output);
    line(out, "blocked_clients", ctx.server.clients.blocked_clients());
    line(out, "tracking_clients", 0);
    line(out, "clients_in_timeout_table", 0);
}

std::string ratio(std::uint64_t numerator, std::uint64_t denominator) {
    return fixed2(
        denominator == 0 ? 0.0 : static_cast<double>(numerator) / static_cast<double>(denominator));
}

std::int64_t difference(std::uint64_t a, std::uint64_t b) {
    return static_cast<std::int64_t>(a) - static_cast<std::int64_t>(b);
}

void info_memory(InfoContext& ctx, std::string& out) {
    using core::MemoryUse;
    // used_memory is what the server holds by its own account (core/memory.hpp):
    // filters at their allocated size, key entries and tables, client buffers.
    const std::uint64_t used = core::memory_used_total();
    const std::uint64_t peak = std::max(core::memory_peak(), used);
    const std::uint64_t startup = std::min(core::memory_startup(), used);
    const std::uint64_t filters = core::memory_used(MemoryUse::filters);
    const std::uint64_t keyspace = core::memory_used(MemoryUse::keyspace);
    const std::uint64_t clients =
        core::memory_used(MemoryUse::query_buffers) + core::memory_used(MemoryUse::output_buffers);
    const std::uint64_t replicas = core::memory_used(MemoryUse::replica_buffers);
    const persist::PersistenceInfo persistence = ctx.server.persistence.persistence();
    const std::uint64_t journal_buffer =
        persistence.journal.enabled ? persistence.journal.buffer_length : 0;
    const std::uint64_t overhead = startup + keyspace + clients + replicas + journal_buffer;
    const std::uint64_t dataset = used > overhead ? used - overhead : 0;
    const std::uint64_t rss = core::resident_bytes();
    const std::uint64_t total = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                                static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
    const core::AllocatorStats allocator = core::allocator_stats();
    const std::uint64_t maxmemory = ctx.config.maxmemory;
    out.append("# Memory\r\n");
    line(out, "used_memory", used);
    line(out, "used_memory_human", human_bytes(used));
    line(out, "used_memory_rss", rss);
    line(out, "used_memory_rss_human", human_bytes(rss));
    line(out, "used_memory_peak", peak);
    line(out, "used_memory_peak_human", human_bytes(peak));
    line(out, "used_memory_peak_perc", percent(used, peak));
    line(out, "used_memory_overhead", overhead);
    line(out, "used_memory_startup", startup);
    line(out, "used_memory_dataset", dataset);
    line(out, "used_memory_dataset_perc", percent(dataset, used - startup));
    line(out, "allocator_allocated", allocator.allocated);
    line(out, "allocator_active", allocator.active);
    line(out, "allocator_resident", allocator.resident);
    line(out, "total_system_memory", total);
    line(out, "total_system_memory_human", human_bytes(total));
    // No scripting: no Lua or function VM, no scripts.
    for (const char* field : {"used_memory_lua", "used_memory_vm_eval"}) line(out, field, 0);
    line(out, "used_memory_lua_human", human_bytes(0));
    for (const char* field :
         {"used_memory_scripts_eval", "number_of_cached_scripts", "number_of_functions",
          "number_of_libraries", "used_memory_vm_functions", "used_memory_vm_total"}) {
        line(out, field, 0);
    }
    line(out, "used_memory_vm_total_human", human_bytes(0));
    line(out, "used_memory_functions", 0);
    line(out, "used_memory_scripts", 0);
    line(out, "used_memory_scripts_human", human_bytes(0));
    line(out, "maxmemory", maxmemory);
    line(out, "maxmemory_human", human_bytes(maxmemory));
    line(out, "maxmemory_policy", std::string("noeviction"));
    // Redis's ratios: active / allocated is the allocator's own
    // fragmentation, resident / active the pages it keeps, rss / resident
    // what the process holds beside the allocator, rss / used_memory all of
    // it together.
    line(out, "allocator_frag_ratio", ratio(allocator.active, allocator.allocated));
    line(out, "allocator_frag_bytes", difference(allocator.active, allocator.allocated));
    line(out, "allocator_rss_ratio", ratio(allocator.resident, allocator.active));
    line(out, "allocator_rss_bytes", difference(allocator.resident, allocator.active));
    line(out, "rss_overhead_ratio", ratio(rss, allocator.resident));
    line(out, "rss_overhead_bytes", difference(rss, allocator.resident));
    line(out, "mem_fragmentation_ratio", ratio(rss, used));
    line(out, "mem_fragmentation_bytes", difference(rss, used));
    // What Redis leaves out of its eviction check (replication and AOF
    // buffers); bloomery checks --maxmemory against all of used_memory.
    line(out, "mem_not_counted_for_evict", 0);
    // The backlog replicas resume from is the journal, on disk.
    line(out, "mem_replication_backlog", 0);
    line(out, "mem_total_replication_buffers", replicas);
    line(out, "mem_clients_slaves", replicas);
    line(out, "mem_clients_normal", clients);
    line(out, "mem_cluster_links", 0);
    line(out, "mem_aof_buffer", journal_buffer);
    line(out, "mem_allocator", core::allocator_name());
    line(out, "active_defrag_running", 0);
    // Nodes, tables and filters unlinked and waiting for readers to leave.
    line(out, "lazyfree_pending_objects", ctx.keyspace.pending_reclaim());
    line(out, "used_memory_filters", filters);
    line(out, "used_memory_keyspace", keyspace);
    line(out, "used_memory_clients", clients);
}

std::string printable(std::string text) {
    for (char& c : text) {
        if (c == '\r' || c == '\n') c = ' ';
    }
    return text;
}

void info_persistence(InfoContext& ctx, std::string& out) {
    const persist::PersistenceInfo p = ctx.server.persistence.persistence();
    // Clients see a load while a replica replaces its data with its
    // primary's snapshot (data commands answer -LOADING meanwhile); the load
    // at start comes before any client is served.
    const bool replica_loading =
        (ctx.server.gate.replication_flags.load(std::memory_order_relaxed) &
         command::kReplicationLoading) != 0;
    const persist::JournalInfo& j = p.journal;
    out.append("# Persistence\r\n");
    line(out, "loading", p.loading || replica_loading ? 1 : 0);
    line(out, "async_loading", 0);
    // Snapshots are written by a thread, not a forked child: no
    // copy-on-write.
    for (const char* field : {"current_cow_peak", "current_cow_size", "current_cow_size_age"}) {
        line(out, field, 0);
    }
    line(out, "current_fork_perc", std::string("0.00"));
    line(out, "current_save_keys_processed", 0);
    line(out, "current_save_keys_total", 0);
    line(out, "rdb_changes_since_last_save", p.changes_since_last_save);
    line(out, "rdb_bgsave_in_progress", p.bgsave_in_progress ? 1 : 0);
    line(out, "rdb_last_save_time", p.last_save_time);
    line(out, "rdb_last_bgsave_status", std::string(p.last_bgsave_ok ? "ok" : "err"));
    line(out, "rdb_last_bgsave_time_sec", p.last_bgsave_time_sec);
    line(out, "rdb_current_bgsave_time_sec", p.current_bgsave_time_sec);
    line(out, "rdb_saves", p.saves);
    line(out, "rdb_last_cow_size", 0);
    line(out, "rdb_last_load_keys_expired", p.loaded_expired_keys);
    line(out, "rdb_last_load_keys_loaded", p.loaded_keys);
    // The journal's snapshot-based compaction is Redis's AOF rewrite: a
    // snapshot, after which the journal it covers is dropped.
    line(out, "aof_enabled", j.enabled ? 1 : 0);
    line(out, "aof_rewrite_in_progress", j.enabled && p.bgsave_in_progress ? 1 : 0);
    line(out, "aof_rewrite_scheduled", 0);
    line(out, "aof_last_rewrite_time_sec", j.enabled ? p.last_bgsave_time_sec : -1);
    line(out, "aof_current_rewrite_time_sec", j.enabled ? p.current_bgsave_time_sec : -1);
    line(out, "aof_last_bgrewrite_status", std::string(p.last_bgsave_ok ? "ok" : "err"));
    line(out, "aof_rewrites", j.enabled ? p.saves : 0);
    line(out, "aof_rewrites_consecutive_failures", j.enabled && !p.last_bgsave_ok ? 1 : 0);
    line(out, "aof_last_write_status", std::string(j.last_write_ok ? "ok" : "err"));
    line(out, "aof_last_cow_size", 0);
    line(out, "module_fork_in_progress", 0);
    line(out, "module_fork_last_cow_size", 0);
    if (j.enabled) {
        line(out, "aof_current_size", j.current_size);
        line(out, "aof_base_size", j.base_size);
        line(out, "aof_pending_rewrite", 0);
        line(out, "aof_buffer_length", j.buffer_length);
        line(out, "aof_pending_bio_fsync", j.fsync_in_progress ? 1 : 0);
        line(out, "aof_delayed_fsync", j.delayed_fsync);
    }
    line(out, "rdb_last_save_bytes", p.last_save_bytes);
    line(out, "rdb_last_save_keys", p.last_save_keys);
    line(out, "rdb_saves_enabled", p.enabled ? 1 : 0);
    line(out, "rdb_last_error", printable(p.last_error));
    line(out, "aof_fsync", j.enabled ? j.fsync_policy : std::string("no"));
    line(out, "aof_last_write_error", printable(j.last_write_error));
    if (j.enabled) {
        line(out, "aof_fsyncs", j.fsyncs);
        line(out, "aof_segments", j.segments);
        line(out, "aof_appended_offset", j.appended_offset);
        line(out, "aof_durable_offset", j.durable_offset);
        line(out, "aof_loaded_records", p.replayed_records);
    }
}

void info_stats(InfoContext& ctx, std::string& out) {
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
}

// The process's CPU time, and its main thread's (the one that accepts
// connections and runs the cron), from /proc.
bool main_thread_times(double& user, double& system) {
    const std::string path = "/proc/self/task/" + std::to_string(getpid()) + "/stat";
    std::FILE* file = std::fopen(path.c_str(), "r");
    if (file == nullptr) return false;
    char buffer[1024];
    const std::size_t n = std::fread(buffer, 1, sizeof buffer - 1, file);
    std::fclose(file);
    buffer[n] = '\0';
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14, stime 15.
    const char* rest = std::strrchr(buffer, ')');
    if (rest == nullptr) return false;
    unsigned long long utime = 0, stime = 0;
    if (std::sscanf(rest + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                    &stime) != 2) {
        return false;
    }
    const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    user = static_cast<double>(utime) / ticks;
    system = static_cast<double>(stime) / ticks;
    return true;
}

std::string seconds_text(const timeval& time) {
    char text[64];
    std::snprintf(text, sizeof text, "%ld.%06ld", static_cast<long>(time.tv_sec),
                  static_cast<long>(time.tv_usec));
    return text;
}

void info_cpu(InfoContext&, std::string& out) {
    struct rusage self {};
    struct rusage children {};
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    out.append("# CPU\r\n");
    line(out, "used_cpu_sys", seconds_text(self.ru_stime));
    line(out, "used_cpu_user", seconds_text(self.ru_utime));
    line(out, "used_cpu_sys_children", seconds_text(children.ru_stime));
    line(out, "used_cpu_user_children", seconds_text(children.ru_utime));
    double user = 0, system = 0;
    if (main_thread_times(user, system)) {
        char text[64];
        std::snprintf(text, sizeof text, "%.6f", system);
        line(out, "used_cpu_sys_main_thread", std::string(text));
        std::snprintf(text, sizeof text, "%.6f", user);
        line(out, "used_cpu_user_main_thread", std::string(text));
    }
}

// Redis's fields; offsets are byte positions in the primary's journal stream
// (proto/replication.md).
void info_replication(InfoContext& ctx, std::string& out) {
    const command::ReplicationInfo r = ctx.server.replication.replication();
    out.append("# Replication\r\n");
    line(out, "role", std::string(r.replica ? "slave" : "master"));
    if (r.replica) {
        line(out, "master_host", r.primary_host);
        line(out, "master_port", r.primary_port);
        line(out, "master_link_status", std::string(r.link_up ? "up" : "down"));
        line(out, "master_last_io_seconds_ago", r.last_io_seconds_ago);
        line(out, "master_sync_in_progress", r.sync_in_progress ? 1 : 0);
        line(out, "slave_read_repl_offset", r.read_offset);
        line(out, "slave_repl_offset", r.offset);
        if (r.sync_in_progress) line(out, "master_sync_read_bytes", r.sync_received_bytes);
        if (!r.link_up) line(out, "master_link_down_since_seconds", r.link_down_since_seconds);
        line(out, "slave_priority", 100);
        line(out, "slave_read_only", 1);
        line(out, "replica_announced", 1);
        line(out, "master_link_last_error", printable(r.last_error));
    }
    line(out, "connected_slaves", r.replicas.size());
    for (std::size_t i = 0; i < r.replicas.size(); ++i) {
        const command::ReplicaInfo& replica = r.replicas[i];
        line(out, "slave" + std::to_string(i),
             "ip=" + replica.ip + ",port=" + std::to_string(replica.port) +
                 ",state=" + replica.state + ",offset=" + std::to_string(replica.offset) +
                 ",lag=" + std::to_string(replica.lag_seconds));
    }
    line(out, "master_failover_state", std::string("no-failover"));
    line(out, "master_replid", r.replid);
    line(out, "master_replid2", std::string(40, '0'));
    line(out, "master_repl_offset", r.offset);
    line(out, "second_repl_offset", -1);
    line(out, "repl_backlog_active", r.backlog_active ? 1 : 0);
    line(out, "repl_backlog_size", r.backlog_bytes);
    line(out, "repl_backlog_first_byte_offset", r.backlog_first_offset);
    line(out, "repl_backlog_histlen", r.backlog_active ? r.offset - r.backlog_first_offset : 0);
}

// RedisBloom's line as Redis 7.0 shows a loaded module (bloomery has its
// commands built in; filters=0 is Redis's count of the module's filters, not
// of Bloom filters).
void info_modules(InfoContext&, std::string& out) {
    out.append("# Modules\r\n");
    out.append("module:name=bf,ver=" + std::to_string(kRedisBloomVersion) +
               ",api=1,filters=0,usedby=[],using=[],options=[handle-io-errors]\r\n");
}

// Error replies by prefix (core/error_stats.hpp), as Redis 7.
void info_errorstats(InfoContext& ctx, std::string& out) {
    out.append("# Errorstats\r\n");
    for (const auto& [prefix, count] : ctx.server.stats.error_stats()) {
        out.append("errorstat_").append(prefix);
        out.append(":count=").append(std::to_string(count)).append("\r\n");
    }
}

// redis-py's RedisCluster reads cluster_enabled before trusting CLUSTER SLOTS.
void info_cluster(InfoContext& ctx, std::string& out) {
    out.append("# Cluster\r\n");
    line(out, "cluster_enabled", ctx.config.cluster_enabled ? 1 : 0);
}

void info_keyspace(InfoContext& ctx, std::string& out) {
    const store::Keyspace::Counts counts = ctx.keyspace.counts();
    out.append("# Keyspace\r\n");
    if (counts.keys > 0) {
        out.append("db0:keys=" + std::to_string(counts.keys) +
                   ",expires=" + std::to_string(counts.with_expiry) +
                   ",avg_ttl=" + std::to_string(ctx.keyspace.average_ttl_ms()) + "\r\n");
    }
}

// Redis 7's commandstats: every command (subcommands as "container|sub") that
// ran or was refused since start or CONFIG RESETSTAT.
void info_commandstats(InfoContext& ctx, std::string& out) {
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
void info_latencystats(InfoContext& ctx, std::string& out) {
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

struct InfoSection {
    std::string_view name;
    void (*render)(InfoContext&, std::string&);
    bool in_default;  // in INFO and INFO default; every section is in INFO all / everything
};

// Redis 7.0's sections, in its order.
constexpr InfoSection kInfoSections[] = {
    {"server", info_server, true},
    {"clients", info_clients, true},
    {"memory", info_memory, true},
    {"persistence", info_persistence, true},
    {"stats", info_stats, true},
    {"replication", info_replication, true},
    {"cpu", info_cpu, true},
    {"modules", info_modules, true},
    {"commandstats", info_commandstats, false},
    {"errorstats", info_errorstats, true},
    {"latencystats", info_latencystats, false},
    {"cluster", info_cluster, true},
    {"keyspace", info_keyspace, true},
};

void cmd_info(InfoContext& ctx, Args argv) {
    std::string out;
    bool defaults = argv.size() == 1;
    bool all = false;
    for (std::size_t i = 1; i < argv.size(); ++i) {
        if (iequals(argv[i], "default")) defaults = true;
        if (iequals(argv[i], "all") || iequals(argv[i], "everything")) all = true;
    }
    for (const InfoSection& section : kInfoSections) {
        bool wanted = all || (defaults && section.in_default);
        for (std::size_t i = 1; i < argv.size() && !wanted; ++i) {
            wanted = iequals(argv[i], section.name);
        }
        if (!wanted) continue;
        if (!out.empty()) out.append("\r\n");
        section.render(ctx, out);
    }
    ctx.out.verbatim(out);
}
}  // namespace

void register_info_commands(Registry& registry) {
    registry.register_handler<cmd_info>("info");
}

}  // namespace bloomery::command
