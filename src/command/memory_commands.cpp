// MEMORY and OBJECT: what a key holds and how the server's memory is used,
// with Redis 7's reply shapes. Sizes are what INFO's used_memory counts
// (core/memory.hpp): a key's node and table slot, its filter's header,
// layers and bit arrays.

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/allocator.hpp"
#include "bloomery/core/memory.hpp"
#include "common.hpp"
#include "families.hpp"
#include "memory_account.hpp"

namespace bloomery::command {
namespace {

// MEMORY STATS and DOCTOR count what clients, persistence and replication hold.
using MemoryContext = With<uses::Clients, uses::Persistence, uses::Replication>;

// ---- MEMORY ----

// MEMORY USAGE key [SAMPLES count]: options first (Redis's order), then the
// key. SAMPLES is taken and checked as Redis does; a filter is sized exactly,
// so it changes nothing.
void cmd_memory_usage(Context& ctx, Args argv) {
    ArgCursor args(argv, 2);
    const std::string_view name = args.next();
    while (args.has_next()) {
        if (args.remaining() < 2 || !args.eat("SAMPLES")) return ctx.out.error(errors::kSyntax);
        const std::optional<std::int64_t> samples = args.next_int();
        if (!samples) return ctx.out.error(errors::kNotInteger);
        if (*samples < 0) return ctx.out.error(errors::kSyntax);
    }
    const std::optional<store::KeyDetails> key = ctx.keyspace.inspect(name);
    if (!key) {
        ctx.out.null();
        return;
    }
    ctx.out.integer(static_cast<std::int64_t>(key->entry_bytes + key->value.allocated_bytes()));
}

// The figures MEMORY STATS and MEMORY DOCTOR share, Redis's names for them.
struct MemoryOverview {
    MemoryAccount account;
    store::Keyspace::Overhead keyspace;
    std::uint64_t overhead = 0;
    std::uint64_t dataset = 0;
    std::size_t keys = 0;
    std::size_t clients = 0;
    std::size_t replicas = 0;
};

MemoryOverview memory_overview(MemoryContext& ctx) {
    MemoryOverview m;
    m.account = memory_account(ctx.server.persistence.persistence());
    const MemoryAccount& a = m.account;
    m.keyspace = ctx.keyspace.overhead();
    m.overhead = a.startup + a.replica_buffers + a.client_buffers + a.journal_buffer +
                 m.keyspace.main + m.keyspace.expires + m.keyspace.slot_to_keys;
    m.dataset = a.used > m.overhead ? a.used - m.overhead : 0;
    m.keys = ctx.keyspace.counts().keys;
    m.replicas = ctx.server.replication.replication().replicas.size();
    const std::size_t connected = ctx.server.clients.connected_clients();
    m.clients = connected > m.replicas ? connected - m.replicas : 0;
    return m;
}

void field(Context& ctx, std::string_view name, std::int64_t value) {
    ctx.out.bulk(name);
    ctx.out.integer(value);
}

void field(Context& ctx, std::string_view name, std::uint64_t value) {
    field(ctx, name, static_cast<std::int64_t>(value));
}

void field_real(Context& ctx, std::string_view name, double value) {
    ctx.out.bulk(name);
    ctx.out.real(value);
}

// Redis 7.0's MEMORY STATS: 27 fields and one map per database. Figures
// Redis has and bloomery does not hold in memory are 0: the replication
// backlog (the journal, on disk), cluster links (no cluster bus), Lua and
// function caches (no scripting).
void cmd_memory_stats(MemoryContext& ctx, Args) {
    const MemoryOverview m = memory_overview(ctx);
    const MemoryAccount& a = m.account;
    const std::uint64_t net = a.used - a.startup;
    // Redis lists only the databases that hold keys.
    ctx.out.map(m.keys > 0 ? 28 : 27);
    field(ctx, "peak.allocated", a.peak);
    field(ctx, "total.allocated", a.used);
    field(ctx, "startup.allocated", a.startup);
    field(ctx, "replication.backlog", std::uint64_t{0});
    field(ctx, "clients.slaves", a.replica_buffers);
    field(ctx, "clients.normal", a.client_buffers);
    field(ctx, "cluster.links", std::uint64_t{0});
    field(ctx, "aof.buffer", a.journal_buffer);
    field(ctx, "lua.caches", std::uint64_t{0});
    field(ctx, "functions.caches", std::uint64_t{0});
    if (m.keys > 0) {
        ctx.out.bulk("db.0");
        ctx.out.map(3);
        field(ctx, "overhead.hashtable.main", m.keyspace.main);
        field(ctx, "overhead.hashtable.expires", m.keyspace.expires);
        field(ctx, "overhead.hashtable.slot-to-keys", m.keyspace.slot_to_keys);
    }
    field(ctx, "overhead.total", m.overhead);
    field(ctx, "keys.count", static_cast<std::uint64_t>(m.keys));
    field(ctx, "keys.bytes-per-key", m.keys == 0 ? std::uint64_t{0} : net / m.keys);
    field(ctx, "dataset.bytes", m.dataset);
    field_real(ctx, "dataset.percentage", share(m.dataset, net) * 100.0);
    field_real(ctx, "peak.percentage", share(a.used, a.peak) * 100.0);
    field(ctx, "allocator.allocated", a.allocator.allocated);
    field(ctx, "allocator.active", a.allocator.active);
    field(ctx, "allocator.resident", a.allocator.resident);
    field_real(ctx, "allocator-fragmentation.ratio",
               share(a.allocator.active, a.allocator.allocated));
    field(ctx, "allocator-fragmentation.bytes",
          difference(a.allocator.active, a.allocator.allocated));
    field_real(ctx, "allocator-rss.ratio", share(a.allocator.resident, a.allocator.active));
    field(ctx, "allocator-rss.bytes", difference(a.allocator.resident, a.allocator.active));
    field_real(ctx, "rss-overhead.ratio", share(a.rss, a.allocator.resident));
    field(ctx, "rss-overhead.bytes", difference(a.rss, a.allocator.resident));
    // The whole process against what the server accounts for.
    field_real(ctx, "fragmentation", share(a.rss, a.used));
    field(ctx, "fragmentation.bytes", difference(a.rss, a.used));
}

// Redis's checks (object.c: getMemoryDoctorReport), reported in bloomery's
// words with bloomery's remedies.
void cmd_memory_doctor(MemoryContext& ctx, Args) {
    const MemoryOverview m = memory_overview(ctx);
    const MemoryAccount& a = m.account;
    constexpr std::uint64_t kTenMb = 10 << 20;
    std::string report;
    if (a.used < (std::uint64_t{5} << 20)) {
        report =
            "This server holds less than 5 MB (used_memory): too little for the memory doctor "
            "to judge. Ask again once it holds some filters.\n";
        ctx.out.verbatim(report);
        return;
    }
    std::vector<std::string> issues;
    if (share(a.peak, a.used) > 1.5) {
        issues.emplace_back(
            "Peak memory: this server once held more than 150% of what it holds now "
            "(used_memory_peak). The allocator keeps some of the pages a peak used, so the "
            "process's RSS may stay above used_memory; MEMORY PURGE hands free pages back to "
            "the kernel now.");
    }
    if (share(a.rss, a.used) > 1.4 && a.rss > a.used + kTenMb) {
        issues.emplace_back(
            "High total RSS: the process's resident memory is more than 1.4 times what the "
            "server accounts for (mem_fragmentation_ratio). After a peak this is harmless; "
            "otherwise check that the allocator is jemalloc (mem_allocator: " +
            core::allocator_name() + ").");
    }
    if (share(a.allocator.active, a.allocator.allocated) > 1.1 &&
        a.allocator.active > a.allocator.allocated + kTenMb) {
        issues.emplace_back(
            "High allocator fragmentation: the pages in use hold more than 1.1 times the bytes "
            "allocated in them (allocator_frag_ratio), usually after many filters of different "
            "sizes were deleted.");
    }
    if (share(a.allocator.resident, a.allocator.active) > 1.1 &&
        a.allocator.resident > a.allocator.active + kTenMb) {
        issues.emplace_back(
            "High allocator RSS overhead: the allocator keeps more than 1.1 times the pages in "
            "use (allocator_rss_ratio); MEMORY PURGE hands the free ones back to the kernel.");
    }
    if (share(a.rss, a.allocator.resident) > 1.1 && a.rss > a.allocator.resident + kTenMb) {
        issues.emplace_back(
            "High process RSS overhead: the process holds more than 1.1 times what the "
            "allocator keeps resident (rss_overhead_ratio): large filters are mapped outside "
            "the allocator, and thread stacks and code count here too.");
    }
    if (m.clients > 0 && a.client_buffers / m.clients > std::uint64_t{200} * 1024) {
        issues.emplace_back(
            "Big client buffers: clients hold more than 200 KB of buffers each on average "
            "(mem_clients_normal): large pipelines, large replies (KEYS, BF.SCANDUMP) or "
            "clients that read slowly. CLIENT LIST shows each client's qbuf, obl and omem; "
            "client-output-buffer-limit bounds them.");
    }
    if (m.replicas > 0 && a.replica_buffers / m.replicas > kTenMb) {
        issues.emplace_back(
            "Big replica buffers: replicas' feeds hold more than 10 MB each on average "
            "(mem_clients_slaves): a replica reads its snapshot or stream slowly. INFO "
            "replication shows each replica's offset and lag.");
    }
    if (issues.empty()) {
        report =
            "No memory issue found: used_memory, the peak, fragmentation and client "
            "buffers are all within bounds.\n";
    } else {
        report = "Memory issues found:\n\n";
        for (const std::string& issue : issues) report += " * " + issue + "\n\n";
    }
    ctx.out.verbatim(report);
}

void cmd_memory_malloc_stats(Context& ctx, Args) {
    const std::string stats = core::allocator_stats_text();
    if (stats.empty()) {
        ctx.out.bulk("Stats not supported for the current allocator");
        return;
    }
    ctx.out.verbatim(stats);
}

void cmd_memory_purge(Context& ctx, Args) {
    core::allocator_release_free_memory();
    ctx.out.ok();
}

void cmd_memory_help(Context& ctx, Args) {
    reply_help(ctx, {"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "DOCTOR",
                     "    Report on the server's memory use and what to do about it.",
                     "MALLOC-STATS", "    The memory allocator's own statistics.", "PURGE",
                     "    Hand the allocator's free pages back to the kernel now.", "STATS",
                     "    How the server's memory is used, by what holds it.",
                     "USAGE <key> [SAMPLES <count>]",
                     "    Bytes held by <key>: its entry, its filter's layers and bit arrays",
                     "    (SAMPLES is accepted; a filter is measured exactly).", "HELP",
                     "    Print this help."});
}

// ---- OBJECT ----

// The key OBJECT's subcommand names. On a missing key they answer a null, as
// Redis's: written here.
std::optional<store::KeyDetails> object_lookup(Context& ctx, Args argv) {
    std::optional<store::KeyDetails> details = ctx.keyspace.inspect(ArgCursor(argv, 2).next());
    if (!details) ctx.out.null();
    return details;
}

// A Bloom filter is a module value in Redis, whose encoding is "raw".
void cmd_object_encoding(Context& ctx, Args argv) {
    if (object_lookup(ctx, argv)) ctx.out.bulk("raw");
}

// The key's filter's holders: 1, more while a snapshot or a replica's full
// copy is being written from it.
void cmd_object_refcount(Context& ctx, Args argv) {
    if (const auto key = object_lookup(ctx, argv)) ctx.out.integer(key->references);
}

// Seconds since a command last used the key. Redis answers it under every
// maxmemory-policy that is not LFU; bloomery evicts nothing and keeps both
// the clock and the counter (store/key_access.hpp), so both answer.
void cmd_object_idletime(Context& ctx, Args argv) {
    if (const auto key = object_lookup(ctx, argv)) {
        ctx.out.integer(store::idle_seconds(key->accessed));
    }
}

// The key's logarithmic use counter, decayed to now, as Redis's LFU keeps
// it (lfu-log-factor, lfu-decay-time): what `redis-cli --hotkeys` ranks by.
void cmd_object_freq(Context& ctx, Args argv) {
    if (const auto key = object_lookup(ctx, argv)) {
        ctx.out.integer(store::access_frequency(key->accessed, ctx.settings.lfu().decay_minutes()));
    }
}

void cmd_object_help(Context& ctx, Args) {
    reply_help(
        ctx,
        {"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "ENCODING <key>",
         "    The internal representation of the value at <key> (raw: a filter).", "FREQ <key>",
         "    The logarithmic access frequency counter of <key> (lfu-log-factor,",
         "    lfu-decay-time).", "IDLETIME <key>", "    Seconds since a command last used <key>.",
         "REFCOUNT <key>",
         "    How many holders the value at <key> has (snapshots being written hold it",
         "    too).", "HELP", "    Print this help."});
}

}  // namespace

void register_memory_commands(Registry& registry) {
    registry.register_handler<cmd_memory_usage>("memory|usage");
    registry.register_handler<cmd_memory_stats>("memory|stats");
    registry.register_handler<cmd_memory_doctor>("memory|doctor");
    registry.register_handler<cmd_memory_malloc_stats>("memory|malloc-stats");
    registry.register_handler<cmd_memory_purge>("memory|purge");
    registry.register_handler<cmd_memory_help>("memory|help");
    registry.register_handler<cmd_object_encoding>("object|encoding");
    registry.register_handler<cmd_object_refcount>("object|refcount");
    registry.register_handler<cmd_object_idletime>("object|idletime");
    registry.register_handler<cmd_object_freq>("object|freq");
    registry.register_handler<cmd_object_help>("object|help");
}

}  // namespace bloomery::command
