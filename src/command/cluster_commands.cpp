// Cluster commands that read the map: CLUSTER SLOTS, SHARDS, NODES, INFO,
// KEYSLOT, MYID, MYSHARDID, REPLICAS (SLAVES), COUNT-FAILURE-REPORTS,
// COUNTKEYSINSLOT, GETKEYSINSLOT and HELP, READONLY,
// READWRITE, ASKING. The map is the one this node last saw
// (cluster/cluster_state.hpp); the replies describe it as Redis 7 describes
// its cluster. The commands that change it are in cluster_admin_commands.cpp,
// the slot check before every command in cluster_routing.cpp.

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
#include "bloomery/core/printable.hpp"
#include "cluster_routing.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

using ClusterView = With<uses::Cluster>;

// Whether a map host is an address rather than a name (CLUSTER SHARDS adds a
// "hostname" field for names, as Redis does for announced host names).
bool is_ip_literal(const std::string& host) {
    unsigned char scratch[sizeof(in6_addr)];
    return inet_pton(AF_INET, host.c_str(), scratch) == 1 ||
           inet_pton(AF_INET6, host.c_str(), scratch) == 1;
}

// The cluster bus port Redis would announce: port + 10000 (0 where that does
// not fit). Nothing listens there; clients only parse it.
unsigned bus_port(const cluster::MapNode& node) {
    return node.port + 10000u <= 65535u ? node.port + 10000u : 0u;
}

// One node of CLUSTER SLOTS: ip, port, id and a map of further endpoints
// (Redis 7's fourth element; empty: the host is given as written).
void reply_slots_node(Context& ctx, const cluster::MapNode& node) {
    ctx.out.array(4);
    ctx.out.bulk(node.host);
    ctx.out.integer(node.port);
    ctx.out.bulk(node.id);
    ctx.out.map(0);
}

void cmd_cluster_slots(ClusterView& ctx, Args) {
    const cluster::ClusterMap& map = ctx.server.cluster.view();
    ctx.out.array(map.ranges().size());
    for (const cluster::SlotRange& range : map.ranges()) {
        const std::vector<std::uint16_t> replicas = map.replicas_of(range.primary);
        ctx.out.array(3 + replicas.size());
        ctx.out.integer(range.first);
        ctx.out.integer(range.last);
        reply_slots_node(ctx, map.node(range.primary));
        for (const std::uint16_t replica : replicas) reply_slots_node(ctx, map.node(replica));
    }
}

// One node of CLUSTER SHARDS, Redis 7.0's fields and order. The replication
// offset of other nodes is not known here: 0.
void reply_shard_node(Context& ctx, const cluster::MapNode& node) {
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
    ctx.out.bulk(node.is_primary() ? "master" : "replica");
    ctx.out.bulk("replication-offset");
    ctx.out.integer(0);
    ctx.out.bulk("health");
    ctx.out.bulk(node.failed ? "fail" : "online");
}

// One shard per primary, in node order: its slot ranges, then its nodes.
void cmd_cluster_shards(ClusterView& ctx, Args) {
    const cluster::ClusterMap& map = ctx.server.cluster.view();
    std::size_t primaries = 0;
    for (const cluster::MapNode& node : map.nodes()) primaries += node.is_primary();
    ctx.out.array(primaries);
    for (std::size_t index = 0; index < map.nodes().size(); ++index) {
        const auto p = static_cast<std::uint16_t>(index);
        if (!map.node(p).is_primary()) continue;
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
        const std::vector<std::uint16_t> replicas = map.replicas_of(p);
        ctx.out.bulk("nodes");
        ctx.out.array(1 + replicas.size());
        reply_shard_node(ctx, map.node(p));
        for (const std::uint16_t replica : replicas) reply_shard_node(ctx, map.node(replica));
    }
}

// The slot fields of a CLUSTER NODES line: the node's ranges and, on this
// node's own line, its open slots as Redis writes them: [slot->-target-id]
// for a slot migrating out, [slot-<-source-id] for one importing.
void append_slots(std::string& text, const cluster::ClusterMap& map, std::uint16_t index) {
    for (const cluster::SlotRange& range : map.ranges()) {
        if (range.primary != index) continue;
        text += ' ';
        text += std::to_string(range.first);
        if (range.last != range.first) {
            text += '-';
            text += std::to_string(range.last);
        }
    }
    if (index != map.self_index()) return;  // as Redis: only this node's line
    for (const cluster::ClusterMap::OpenSlot& open : map.open_slots()) {
        if (open.migrating_to != cluster::kNoNode && map.owner(open.slot) == index) {
            text += " [" + std::to_string(open.slot) + "->-";
            text += map.node(open.migrating_to).id;
            text += ']';
        }
        if (open.importer == index) {
            text += " [" + std::to_string(open.slot) + "-<-";
            text += map.node(open.importing_from).id;
            text += ']';
        }
    }
}

// One CLUSTER NODES line, "\n"-terminated, Redis's fields:
// <id> <ip:port@cport> <flags> <primary id or -> <ping sent> <pong received>
// <config epoch> <link state> <slot ranges...>
void append_node_line(std::string& text, const cluster::ClusterMap& map, std::uint16_t i,
                      std::string_view now) {
    // Appended piece by piece: GCC 12 reports a false -Wrestrict on
    // "literal" + std::string once inlined (GCC bug 105329).
    const auto add = [&text](std::string_view piece) { text.append(piece); };
    const cluster::MapNode& node = map.node(i);
    const bool myself = i == map.self_index();
    add(node.id);
    add(" ");
    add(node.address);
    add("@");
    add(std::to_string(bus_port(node)));
    add(myself ? " myself," : " ");
    add(node.is_primary() ? "master" : "slave");
    if (node.failed) add(",fail");
    add(" ");
    add(node.is_primary() ? std::string_view("-") : std::string_view(node.primary_id));
    add(" 0 ");
    add(myself ? std::string_view("0") : now);
    add(" ");
    add(std::to_string(node.config_epoch));
    add(node.failed ? " disconnected" : " connected");
    append_slots(text, map, i);
    add("\n");
}

// CLUSTER NODES: one line per node (redis-benchmark stops at the last "\n").
void cmd_cluster_nodes(ClusterView& ctx, Args) {
    const cluster::ClusterMap& map = ctx.server.cluster.view();
    const std::string now = std::to_string(store::now_ms());
    std::string text;
    for (std::size_t index = 0; index < map.nodes().size(); ++index) {
        append_node_line(text, map, static_cast<std::uint16_t>(index), now);
    }
    ctx.out.verbatim(text);
}

// The node `argv[2]` names, or nullopt once "Unknown node" is written.
std::optional<std::uint16_t> named_node(ClusterView& ctx, const cluster::ClusterMap& map,
                                        Args argv) {
    const std::optional<std::uint16_t> index = map.find(argv[2]);
    if (!index) {
        std::string message(errors::kUnknownNode);
        core::append_printable(message, argv[2]);
        ctx.out.error(message);
    }
    return index;
}

// The primary `argv[2]` names, or nullopt once the error is written.
std::optional<std::uint16_t> named_primary(ClusterView& ctx, const cluster::ClusterMap& map,
                                           Args argv) {
    const std::optional<std::uint16_t> index = named_node(ctx, map, argv);
    if (!index) return std::nullopt;
    if (!map.node(*index).is_primary()) {
        ctx.out.error(errors::kNotAMaster);
        return std::nullopt;
    }
    return index;
}

// CLUSTER REPLICAS (SLAVES) node-id: its replicas' CLUSTER NODES lines.
void cmd_cluster_replicas(ClusterView& ctx, Args argv) {
    const cluster::ClusterMap& map = ctx.server.cluster.view();
    const std::optional<std::uint16_t> primary = named_primary(ctx, map, argv);
    if (!primary) return;
    const std::string now = std::to_string(store::now_ms());
    const std::vector<std::uint16_t> replicas = map.replicas_of(*primary);
    ctx.out.array(replicas.size());
    for (const std::uint16_t replica : replicas) {
        std::string line;
        append_node_line(line, map, replica, now);
        ctx.out.bulk(line);
    }
}

// CLUSTER MYSHARDID: a shard is a primary and its replicas; its id is the
// primary's node id (as CLUSTER SHARDS groups them).
void cmd_cluster_myshardid(ClusterView& ctx, Args) {
    const cluster::ClusterMap& map = ctx.server.cluster.view();
    const std::uint16_t primary = map.primary_of(map.self_index());
    ctx.out.bulk(primary == cluster::kNoNode ? map.self().id : map.node(primary).id);
}

// CLUSTER COUNT-FAILURE-REPORTS node-id: no node reports failures to
// others here; each reads the node's liveness from the map's store, so a
// node seen down is reported down by every other primary.
void cmd_cluster_count_failure_reports(ClusterView& ctx, Args argv) {
    const cluster::ClusterMap& map = ctx.server.cluster.view();
    const std::optional<std::uint16_t> index = named_node(ctx, map, argv);
    if (!index) return;
    std::int64_t reports = 0;
    if (map.node(*index).failed) {
        for (std::size_t i = 0; i < map.nodes().size(); ++i) {
            reports += i != *index && i != map.self_index() && map.nodes()[i].is_primary() &&
                       !map.nodes()[i].failed;
        }
    }
    ctx.out.integer(reports);
}

void cmd_cluster_info(ClusterView& ctx, Args) {
    const cluster::ClusterMap& map = ctx.server.cluster.view();
    std::string text;
    const auto line = [&text](std::string_view field, const std::string& value) {
        text.append(field);
        text.push_back(':');
        text.append(value);
        text.append("\r\n");
    };
    const std::uint16_t self = map.self_index();
    const std::uint16_t primary = map.node(self).is_primary() ? self : map.primary_of(self);
    const std::uint64_t my_epoch =
        primary != cluster::kNoNode ? map.node(primary).config_epoch : map.self().config_epoch;
    line("cluster_state", map.state_ok() ? "ok" : "fail");
    line("cluster_slots_assigned", std::to_string(map.slots_assigned()));
    line("cluster_slots_ok", std::to_string(map.slots_assigned() - map.slots_failed()));
    line("cluster_slots_pfail", "0");
    line("cluster_slots_fail", std::to_string(map.slots_failed()));
    line("cluster_known_nodes", std::to_string(map.nodes().size()));
    line("cluster_size", std::to_string(map.serving_primaries()));
    line("cluster_current_epoch", std::to_string(map.current_epoch()));
    line("cluster_my_epoch", std::to_string(my_epoch));
    line("cluster_stats_messages_sent", "0");
    line("cluster_stats_messages_received", "0");
    line("total_cluster_links_buffer_limit_exceeded", "0");
    ctx.out.verbatim(text);
}

void cmd_cluster_keyslot(Context& ctx, Args argv) {
    ctx.out.integer(cluster::key_slot(ArgCursor(argv, 2).next()));
}

void cmd_cluster_myid(ClusterView& ctx, Args) {
    ctx.out.bulk(ctx.server.cluster.view().self().id);
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
         "ADDSLOTS <slot> [<slot> ...]",
         "    Assign slots to current node.",
         "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
         "    Assign slots which are between <start-slot> and <end-slot> to current node.",
         "BUMPEPOCH",
         "    Advance the cluster config epoch.",
         "COUNT-FAILURE-REPORTS <node-id>",
         "    Return the number of primaries that see <node-id> down.",
         "COUNTKEYSINSLOT <slot>",
         "    Return the number of keys in <slot>.",
         "DELSLOTS <slot> [<slot> ...]",
         "    Delete slots information from current node.",
         "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
         "    Delete slots information which are between <start-slot> and <end-slot>.",
         "GETKEYSINSLOT <slot> <count>",
         "    Return key names stored by this node in a slot.",
         "FAILOVER [FORCE|TAKEOVER]",
         "    Promote current replica node to being a master.",
         "FORGET <node-id>",
         "    Remove a node from the cluster.",
         "INFO",
         "    Return information about the cluster.",
         "KEYSLOT <key>",
         "    Return the hash slot for <key>.",
         "MEET <ip> <port> [<bus-port>]",
         "    Connect nodes into a working cluster.",
         "MYID",
         "    Return the node id.",
         "MYSHARDID",
         "    Return the node's shard id.",
         "NODES",
         "    Return cluster configuration seen by node. Output format:",
         "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
         "REPLICAS <node-id>",
         "    Return <node-id> replicas.",
         "REPLICATE <node-id>",
         "    Configure current node as replica to <node-id>.",
         "RESET [HARD|SOFT]",
         "    Reset current node (default: soft).",
         "SET-CONFIG-EPOCH <epoch>",
         "    Set config epoch of current node.",
         "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
         "    Set slot state.",
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

// As in Redis, ASKING lets the next command through only for a slot this
// node is importing (CLUSTER SETSLOT IMPORTING); for any other slot the
// command is routed as without it (cluster_routing.cpp).
void cmd_asking(Context& ctx, Args) {
    ctx.client.cluster_asking = true;
    ctx.out.ok();
}

}  // namespace

void register_cluster_commands(Registry& registry) {
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_slots>>("cluster|slots");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_shards>>("cluster|shards");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_nodes>>("cluster|nodes");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_info>>("cluster|info");
    registry.register_handler<cluster_only<Context, cmd_cluster_keyslot>>("cluster|keyslot");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_myid>>("cluster|myid");
    registry.register_handler<cluster_only<Context, cmd_cluster_countkeysinslot>>(
        "cluster|countkeysinslot");
    registry.register_handler<cluster_only<Context, cmd_cluster_getkeysinslot>>(
        "cluster|getkeysinslot");
    registry.register_handler<cluster_only<Context, cmd_cluster_help>>("cluster|help");
    registry.register_handler<cluster_only<Context, cmd_readonly>>("readonly");
    registry.register_handler<cluster_only<Context, cmd_readwrite>>("readwrite");
    registry.register_handler<cluster_only<Context, cmd_asking>>("asking");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_replicas>>("cluster|replicas");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_replicas>>("cluster|slaves");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_myshardid>>(
        "cluster|myshardid");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_count_failure_reports>>(
        "cluster|count-failure-reports");
    register_cluster_admin_commands(registry);
}

}  // namespace bloomery::command
