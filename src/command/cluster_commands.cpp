// Cluster commands: CLUSTER SLOTS, SHARDS, NODES, INFO, KEYSLOT, MYID,
// COUNTKEYSINSLOT, GETKEYSINSLOT and HELP, READONLY, READWRITE, ASKING; and
// the slot check dispatch runs before every command in cluster mode. The map
// is static (cluster/topology.hpp): the replies describe it as Redis 7 would
// describe a healthy cluster of those nodes, with no bus behind them.

#include <arpa/inet.h>

#include <array>
#include <charconv>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "args.hpp"
#include "bloomery/cluster/topology.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/key_slot.hpp"
#include "cluster_routing.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

// -MOVED <slot> <host>:<port>, written from a stack buffer: in a cluster a
// redirect is an ordinary reply (a client's first touch of every slot, and
// every command of a client that ignores the map), so it allocates nothing.
// Addresses are at most 253 + 1 + 5 bytes (topology.cpp bounds the host).
void reply_moved(Context& ctx, std::uint16_t slot, std::string_view address) {
    std::array<char, 300> buffer;
    constexpr std::string_view kPrefix = "MOVED ";
    char* at = buffer.data();
    std::memcpy(at, kPrefix.data(), kPrefix.size());
    at += kPrefix.size();
    at = std::to_chars(at, buffer.data() + 16, slot).ptr;
    *at++ = ' ';
    const auto room = static_cast<std::size_t>(buffer.data() + buffer.size() - at);
    const std::size_t length = std::min(address.size(), room);
    std::memcpy(at, address.data(), length);
    at += length;
    ctx.out.error(std::string_view(buffer.data(), static_cast<std::size_t>(at - buffer.data())));
}

// CLUSTER's subcommands, READONLY, READWRITE and ASKING are registered
// through this: outside cluster mode they answer that cluster support is
// disabled, as Redis's do, and their handlers do not run.
template <void (*Handler)(Context&, Args)>
void cluster_only(Context& ctx, Args argv) {
    if (!ctx.config.cluster_enabled) return ctx.out.error(errors::kClusterDisabled);
    Handler(ctx, argv);
}

const cluster::Topology& topology(const Context& ctx) {
    return *ctx.config.cluster;
}

// Whether a map host is an address rather than a name (CLUSTER SHARDS adds a
// "hostname" field for names, as Redis does for announced host names).
bool is_ip_literal(const std::string& host) {
    unsigned char scratch[sizeof(in6_addr)];
    return inet_pton(AF_INET, host.c_str(), scratch) == 1 ||
           inet_pton(AF_INET6, host.c_str(), scratch) == 1;
}

// The cluster bus port Redis would announce: port + 10000 (0 where that does
// not fit). Nothing listens there; clients only parse it.
unsigned bus_port(const cluster::Node& node) {
    return node.port + 10000u <= 65535u ? node.port + 10000u : 0u;
}

// One node of CLUSTER SLOTS: ip, port, id and a map of further endpoints
// (Redis 7's fourth element; empty: the host is given as written).
void reply_slots_node(Context& ctx, const cluster::Node& node) {
    ctx.out.array(4);
    ctx.out.bulk(node.host);
    ctx.out.integer(node.port);
    ctx.out.bulk(node.id);
    ctx.out.map(0);
}

void cmd_cluster_slots(Context& ctx, Args) {
    const cluster::Topology& map = topology(ctx);
    ctx.out.array(map.ranges().size());
    for (const cluster::SlotRange& range : map.ranges()) {
        const cluster::Node& primary = map.nodes()[range.primary];
        ctx.out.array(3 + primary.replicas.size());
        ctx.out.integer(range.first);
        ctx.out.integer(range.last);
        reply_slots_node(ctx, primary);
        for (const std::size_t replica : primary.replicas) {
            reply_slots_node(ctx, map.nodes()[replica]);
        }
    }
}

// One node of CLUSTER SHARDS, Redis 7.0's fields and order. The replication
// offset is not known for other nodes without a bus: 0.
void reply_shard_node(Context& ctx, const cluster::Node& node) {
    const bool named = !is_ip_literal(node.host);
    ctx.out.map(named ? 8 : 7);
    ctx.out.bulk("id");
    ctx.out.bulk(node.id);
    ctx.out.bulk("port");
    ctx.out.integer(node.port);
    ctx.out.bulk("ip");
    ctx.out.bulk(node.host);
    ctx.out.bulk("endpoint");
    ctx.out.bulk(node.host);
    if (named) {
        ctx.out.bulk("hostname");
        ctx.out.bulk(node.host);
    }
    ctx.out.bulk("role");
    ctx.out.bulk(node.primary ? "master" : "replica");
    ctx.out.bulk("replication-offset");
    ctx.out.integer(0);
    ctx.out.bulk("health");
    ctx.out.bulk("online");
}

void cmd_cluster_shards(Context& ctx, Args) {
    const cluster::Topology& map = topology(ctx);
    // Primaries come first in nodes(), ordered by their lowest slot.
    ctx.out.array(map.primary_count());
    for (std::size_t p = 0; p < map.primary_count(); ++p) {
        const cluster::Node& primary = map.nodes()[p];
        std::size_t ranges = 0;
        for (const cluster::SlotRange& range : map.ranges()) ranges += range.primary == p;
        ctx.out.map(2);
        ctx.out.bulk("slots");
        ctx.out.array(2 * ranges);
        for (const cluster::SlotRange& range : map.ranges()) {
            if (range.primary != p) continue;
            ctx.out.integer(range.first);
            ctx.out.integer(range.last);
        }
        ctx.out.bulk("nodes");
        ctx.out.array(1 + primary.replicas.size());
        reply_shard_node(ctx, primary);
        for (const std::size_t replica : primary.replicas) {
            reply_shard_node(ctx, map.nodes()[replica]);
        }
    }
}

// CLUSTER NODES: one line per node, "\n"-terminated (redis-benchmark stops
// at the last "\n"), Redis's fields:
// <id> <ip:port@cport> <flags> <primary id or -> <ping sent> <pong received>
// <config epoch> <link state> <slot ranges...>
void cmd_cluster_nodes(Context& ctx, Args) {
    const cluster::Topology& map = topology(ctx);
    const std::string now = std::to_string(store::now_ms());
    std::string text;
    // Appended piece by piece: GCC 12 reports a false -Wrestrict on
    // "literal" + std::string once inlined (GCC bug 105329).
    const auto add = [&text](std::string_view piece) { text.append(piece); };
    for (std::size_t i = 0; i < map.nodes().size(); ++i) {
        const cluster::Node& node = map.nodes()[i];
        const bool myself = i == map.self_index();
        add(node.id);
        add(" ");
        add(node.address);
        add("@");
        add(std::to_string(bus_port(node)));
        add(myself ? " myself," : " ");
        if (node.primary) {
            add("master - ");
        } else {
            add("slave ");
            add(map.nodes()[node.primary_index].id);
            add(" ");
        }
        add("0 ");
        add(myself ? std::string_view("0") : std::string_view(now));
        add(" ");
        add(std::to_string(node.config_epoch));
        add(" connected");
        for (const cluster::SlotRange& range : map.ranges()) {
            if (!node.primary || range.primary != i) continue;
            add(" ");
            add(std::to_string(range.first));
            if (range.last != range.first) {
                add("-");
                add(std::to_string(range.last));
            }
        }
        add("\n");
    }
    ctx.out.verbatim(text);
}

void cmd_cluster_info(Context& ctx, Args) {
    const cluster::Topology& map = topology(ctx);
    const std::string slots = std::to_string(cluster::kSlotCount);
    std::string text;
    const auto line = [&text](std::string_view field, const std::string& value) {
        text.append(field);
        text.push_back(':');
        text.append(value);
        text.append("\r\n");
    };
    // Always "ok": the map covers every slot (checked at start) and there
    // is no failure detection that could say otherwise.
    line("cluster_state", "ok");
    line("cluster_slots_assigned", slots);
    line("cluster_slots_ok", slots);
    line("cluster_slots_pfail", "0");
    line("cluster_slots_fail", "0");
    line("cluster_known_nodes", std::to_string(map.nodes().size()));
    line("cluster_size", std::to_string(map.primary_count()));
    line("cluster_current_epoch", std::to_string(map.primary_count()));
    line("cluster_my_epoch", std::to_string(map.self().config_epoch));
    line("cluster_stats_messages_sent", "0");
    line("cluster_stats_messages_received", "0");
    line("total_cluster_links_buffer_limit_exceeded", "0");
    ctx.out.verbatim(text);
}

void cmd_cluster_keyslot(Context& ctx, Args argv) {
    ctx.out.integer(cluster::key_slot(ArgCursor(argv, 2).next()));
}

void cmd_cluster_myid(Context& ctx, Args) {
    ctx.out.bulk(topology(ctx).self().id);
}

void cmd_cluster_countkeysinslot(Context& ctx, Args argv) {
    ArgCursor args(argv, 2);
    const core::Result<std::int64_t> slot = args.take_int(errors::kNotInteger);
    if (!slot) return ctx.out.error(slot.error());
    if (*slot < 0 || *slot >= cluster::kSlotCount) return ctx.out.error(errors::kInvalidSlot);
    ctx.out.integer(static_cast<std::int64_t>(
        ctx.keyspace.count_keys_in_slot(static_cast<std::uint16_t>(*slot))));
}

// At most `count` keys, as Redis; the walk behind it is bounded by the
// keyspace (store/keyspace.hpp, keys_in_slot), the reply by `count`.
void cmd_cluster_getkeysinslot(Context& ctx, Args argv) {
    ArgCursor args(argv, 2);
    const std::optional<std::int64_t> slot = args.next_int();
    const std::optional<std::int64_t> count = args.next_int();
    if (!slot || !count) return ctx.out.error(errors::kNotInteger);
    if (*slot < 0 || *slot >= cluster::kSlotCount || *count < 0) {
        return ctx.out.error(errors::kInvalidSlotOrCount);
    }
    const std::vector<std::string> keys = ctx.keyspace.keys_in_slot(
        static_cast<std::uint16_t>(*slot), static_cast<std::size_t>(*count));
    ctx.out.array(keys.size());
    for (const std::string& key : keys) ctx.out.bulk(key);
}

void cmd_cluster_help(Context& ctx, Args) {
    reply_help(
        ctx,
        {"CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
         "COUNTKEYSINSLOT <slot>",
         "    Return the number of keys in <slot>.",
         "GETKEYSINSLOT <slot> <count>",
         "    Return key names stored by this node in a slot.",
         "INFO",
         "    Return information about the cluster.",
         "KEYSLOT <key>",
         "    Return the hash slot for <key>.",
         "MYID",
         "    Return the node id.",
         "NODES",
         "    Return cluster configuration seen by node. Output format:",
         "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
         "SHARDS",
         "    Return information about slot range mappings and the nodes serving them.",
         "SLOTS",
         "    Return information about slots range mappings. Each range is made of:",
         "    start, end, master and replicas IP addresses, ports and ids",
         "HELP",
         "    Print this help."});
}

void cmd_readonly(Context& ctx, Args) {
    ctx.client.cluster_readonly = true;
    ctx.out.ok();
}

void cmd_readwrite(Context& ctx, Args) {
    ctx.client.cluster_readonly = false;
    ctx.out.ok();
}

// Redis honours ASKING only for a slot it is importing. A static map has no
// importing state, so here ASKING lets the next command through whatever its
// slot: that is how deploy/move-slots.py loads filters into the node that
// will own the slot once the map changes. Clients never send it unasked (no
// node answers -ASK).
void cmd_asking(Context& ctx, Args) {
    ctx.client.cluster_asking = true;
    ctx.out.ok();
}

}  // namespace

namespace {

// The one slot of the keys seen so far (-1 before the first); add() is
// false for a key of another slot (Redis refuses keys of two slots even
// when one node owns both).
class CommonSlot {
public:
    bool add(std::string_view key) {
        const int slot = cluster::key_slot(key);
        if (slot_ < 0) slot_ = slot;
        return slot == slot_;
    }
    int slot() const { return slot_; }

private:
    int slot_ = -1;
};

// What a command, or a transaction's commands together, may do with the
// keys of the slot they name.
enum class SlotUse { read, write };

// Whether this node serves `slot` for the client: it owns it, or it is a
// replica of its owner and the client reads after READONLY (Redis's rule:
// anything not flagged write; writes always go to the primary). Writes
// -MOVED otherwise.
bool node_serves(Context& ctx, std::uint16_t slot, SlotUse use) {
    const cluster::Topology& map = *ctx.config.cluster;
    const std::size_t owner = map.owner(slot);
    if (owner == map.self_index()) return true;
    const cluster::Node& self = map.self();
    if (ctx.client.cluster_readonly && use == SlotUse::read && !self.primary &&
        self.primary_index == owner) {
        return true;
    }
    reply_moved(ctx, slot, map.nodes()[owner].address);
    return false;
}

}  // namespace

bool cluster_admits(const CommandSpec& spec, Context& ctx, Args argv) {
    // ASKING covers one command, the next one run (cmd_asking sets the flag
    // again after this clears it for ASKING itself).
    // RESTORE-ASKING (what MIGRATE sends in cluster mode) implies it.
    const bool asking = std::exchange(ctx.client.cluster_asking, false) || spec.asking;
    // The positions Registry::key_positions lists (MIGRATE's after KEYS
    // included), walked without building its vector; each key hashed once.
    // A call without keys is never redirected.
    const KeyRange range = key_range(spec, argv);
    CommonSlot common;
    for (long position = range.first; position <= range.last; position += range.step) {
        if (!common.add(argv[static_cast<std::size_t>(position)])) {
            ctx.out.error(errors::kCrossSlot);
            return false;
        }
    }
    if (common.slot() < 0 || asking) return true;
    return node_serves(ctx, static_cast<std::uint16_t>(common.slot()),
                       spec.write ? SlotUse::write : SlotUse::read);
}

bool cluster_admits_transaction(Context& ctx) {
    const bool asking = std::exchange(ctx.client.cluster_asking, false);
    const TransactionState& transaction = ctx.client.transaction;
    CommonSlot common;
    SlotUse use = SlotUse::read;
    for (const TransactionState::Queued& queued : transaction.commands) {
        const CommandSpec& spec = *queued.spec;
        std::vector<std::string_view> argv;
        argv.reserve(queued.argument_count);
        for (std::uint32_t i = 0; i < queued.argument_count; ++i) {
            const auto& [offset, size] = transaction.arguments[queued.first_argument + i];
            argv.emplace_back(transaction.argument_bytes.data() + offset, size);
        }
        for (std::size_t position : Registry::key_positions(spec, argv)) {
            if (!common.add(argv[position])) {
                ctx.out.error(errors::kCrossSlot);
                return false;
            }
            if (spec.write) use = SlotUse::write;
        }
    }
    if (common.slot() < 0 || asking) return true;
    return node_serves(ctx, static_cast<std::uint16_t>(common.slot()), use);
}

void register_cluster_commands(Registry& registry) {
    registry.register_handler<cluster_only<cmd_cluster_slots>>("cluster|slots");
    registry.register_handler<cluster_only<cmd_cluster_shards>>("cluster|shards");
    registry.register_handler<cluster_only<cmd_cluster_nodes>>("cluster|nodes");
    registry.register_handler<cluster_only<cmd_cluster_info>>("cluster|info");
    registry.register_handler<cluster_only<cmd_cluster_keyslot>>("cluster|keyslot");
    registry.register_handler<cluster_only<cmd_cluster_myid>>("cluster|myid");
    registry.register_handler<cluster_only<cmd_cluster_countkeysinslot>>("cluster|countkeysinslot");
    registry.register_handler<cluster_only<cmd_cluster_getkeysinslot>>("cluster|getkeysinslot");
    registry.register_handler<cluster_only<cmd_cluster_help>>("cluster|help");
    registry.register_handler<cluster_only<cmd_readonly>>("readonly");
    registry.register_handler<cluster_only<cmd_readwrite>>("readwrite");
    registry.register_handler<cluster_only<cmd_asking>>("asking");
}

}  // namespace bloomery::command
