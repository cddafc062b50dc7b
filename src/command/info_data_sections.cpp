// INFO's sections about what holds the data and what keeps it: memory and
// persistence.

#include <unistd.h>

#include <algorithm>
#include <string>

#include "bloomery/command/server.hpp"
#include "bloomery/core/allocator.hpp"
#include "bloomery/core/memory.hpp"
#include "info_sections.hpp"
#include "memory_account.hpp"

namespace bloomery::command::info {

namespace {

// INFO memory's figures: the account, and what Redis calls overhead (all
// but the filters' bits) and dataset.
struct MemoryFigures {
    MemoryAccount account;
    std::uint64_t overhead = 0;
    std::uint64_t dataset = 0;
    std::uint64_t system_total = 0;
};

MemoryFigures memory_figures(InfoContext& ctx) {
    MemoryFigures m;
    m.account = memory_account(ctx.server.persistence.persistence());
    const MemoryAccount& a = m.account;
    m.overhead = a.startup + a.keyspace + a.client_buffers + a.replica_buffers + a.journal_buffer;
    m.dataset = a.used > m.overhead ? a.used - m.overhead : 0;
    m.system_total = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                     static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
    return m;
}

void append_usage(std::string& out, const MemoryFigures& m) {
    const MemoryAccount& a = m.account;
    line(out, "used_memory", a.used);
    line(out, "used_memory_human", human_bytes(a.used));
    line(out, "used_memory_rss", a.rss);
    line(out, "used_memory_rss_human", human_bytes(a.rss));
    line(out, "used_memory_peak", a.peak);
    line(out, "used_memory_peak_human", human_bytes(a.peak));
    line(out, "used_memory_peak_perc", percent(a.used, a.peak));
    line(out, "used_memory_overhead", m.overhead);
    line(out, "used_memory_startup", a.startup);
    line(out, "used_memory_dataset", m.dataset);
    line(out, "used_memory_dataset_perc", percent(m.dataset, a.used - a.startup));
    line(out, "allocator_allocated", a.allocator.allocated);
    line(out, "allocator_active", a.allocator.active);
    line(out, "allocator_resident", a.allocator.resident);
    line(out, "total_system_memory", m.system_total);
    line(out, "total_system_memory_human", human_bytes(m.system_total));
}

// No scripting: no Lua or function VM, no scripts.
void append_no_scripting(std::string& out) {
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
}

// Redis's ratios: active / allocated is the allocator's own fragmentation,
// resident / active the pages it keeps, rss / resident what the process
// holds beside the allocator, rss / used_memory all of it together.
void append_ratios(std::string& out, const MemoryAccount& a) {
    const core::AllocatorStats& allocator = a.allocator;
    line(out, "allocator_frag_ratio", ratio(allocator.active, allocator.allocated));
    line(out, "allocator_frag_bytes", difference(allocator.active, allocator.allocated));
    line(out, "allocator_rss_ratio", ratio(allocator.resident, allocator.active));
    line(out, "allocator_rss_bytes", difference(allocator.resident, allocator.active));
    line(out, "rss_overhead_ratio", ratio(a.rss, allocator.resident));
    line(out, "rss_overhead_bytes", difference(a.rss, allocator.resident));
    line(out, "mem_fragmentation_ratio", ratio(a.rss, a.used));
    line(out, "mem_fragmentation_bytes", difference(a.rss, a.used));
}

}  // namespace

void memory_section(InfoContext& ctx, std::string& out) {
    const MemoryFigures m = memory_figures(ctx);
    const MemoryAccount& a = m.account;
    const std::uint64_t maxmemory = ctx.config.maxmemory;
    out.append("# Memory\r\n");
    append_usage(out, m);
    append_no_scripting(out);
    line(out, "maxmemory", maxmemory);
    line(out, "maxmemory_human", human_bytes(maxmemory));
    line(out, "maxmemory_policy", "noeviction");
    append_ratios(out, a);
    // What Redis leaves out of its eviction check (replication and AOF
    // buffers); bloomery checks --maxmemory against all of used_memory.
    line(out, "mem_not_counted_for_evict", 0);
    // The backlog replicas resume from is the journal, on disk.
    line(out, "mem_replication_backlog", 0);
    line(out, "mem_total_replication_buffers", a.replica_buffers);
    line(out, "mem_clients_slaves", a.replica_buffers);
    line(out, "mem_clients_normal", a.client_buffers);
    line(out, "mem_cluster_links", 0);
    line(out, "mem_aof_buffer", a.journal_buffer);
    line(out, "mem_allocator", core::allocator_name());
    line(out, "active_defrag_running", 0);
    // Nodes, tables and filters unlinked and waiting for readers to leave.
    line(out, "lazyfree_pending_objects", ctx.keyspace.pending_reclaim());
    line(out, "used_memory_filters", a.filters);
    line(out, "used_memory_keyspace", a.keyspace);
    line(out, "used_memory_clients", a.client_buffers);
}

void persistence_section(InfoContext& ctx, std::string& out) {
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
    line(out, "current_fork_perc", "0.00");
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
    text_line(out, "rdb_last_error", p.last_error);
    line(out, "aof_fsync", j.enabled ? j.fsync_policy : std::string("no"));
    text_line(out, "aof_last_write_error", j.last_write_error);
    if (j.enabled) {
        line(out, "aof_fsyncs", j.fsyncs);
        line(out, "aof_segments", j.segments);
        line(out, "aof_appended_offset", j.appended_offset);
        line(out, "aof_durable_offset", j.durable_offset);
        line(out, "aof_loaded_records", p.replayed_records);
    }
}

}  // namespace bloomery::command::info
