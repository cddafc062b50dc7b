// Cluster commands that change the map: CLUSTER SETSLOT, ADDSLOTS,
// ADDSLOTSRANGE, DELSLOTS, DELSLOTSRANGE, SET-CONFIG-EPOCH, BUMPEPOCH, REPLICATE,
// FORGET, MEET, RESET and FAILOVER. Each builds an edit from the rules of
// cluster/cluster_changes.hpp and cluster_membership.hpp (MEET and RESET
// are the backend's own) and commits it through the node's
// ClusterState: at once for a map this node keeps itself, or through the
// backend that keeps the cluster's map, the reply waiting for it.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bloomery/cluster/cluster_changes.hpp"
#include "bloomery/cluster/cluster_membership.hpp"
#include "bloomery/cluster/cluster_state.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/printable.hpp"
#include "cluster_routing.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

using ClusterView = With<uses::Cluster>;
using ResetView = With<uses::Cluster, uses::Replication>;

// A slot argument, as Redis's getSlotOrReply reads it.
std::optional<std::uint16_t> parse_slot(std::string_view text) {
    std::int64_t value = 0;
    if (!core::parse_int64(text, value) || value < 0 || value >= cluster::kSlotCount) {
        return std::nullopt;
    }
    return static_cast<std::uint16_t>(value);
}

// Runs `change` (which calls its argument once, with the outcome) and
// answers the error, or what `success` writes (+OK when empty). A backend
// that commits elsewhere answers later: the client waits, and so does EXEC's
// reply for a change queued in MULTI (refused only where no reply can wait,
// as in a script).
template <class View, class Change>
void answer_change(View& ctx, Change change, ReplyWriter success = {}) {
    const auto answer = [success = std::move(success)](resp::Writer& out,
                                                       const core::Status& status) {
        if (!status) return out.error(status.error());
        success ? success(out) : out.ok();
    };
    if (!ctx.server.cluster.has_backend()) {
        core::Status outcome;
        change([&outcome](core::Status status) { outcome = std::move(status); });
        return answer(ctx.out, outcome);
    }
    DeferredReply reply = ctx.defer_reply();
    if (!reply) return ctx.out.error(errors::kCannotWait);
    change([reply, answer](core::Status status) {
        reply.complete(
            [answer, status = std::move(status)](resp::Writer& out) { answer(out, status); });
    });
}

void commit(ClusterView& ctx, cluster::MapEdit edit, ReplyWriter success = {}) {
    answer_change(
        ctx,
        [&ctx, &edit](cluster::ChangeDone done) {
            ctx.server.cluster.change(std::move(edit), std::move(done));
        },
        std::move(success));
}

void cmd_cluster_setslot(ClusterView& ctx, Args argv) {
    if (!ctx.server.cluster.view().self().is_primary()) {
        return ctx.out.error(errors::kSetSlotOnReplica);
    }
    const std::optional<std::uint16_t> slot = parse_slot(argv[2]);
    if (!slot) return ctx.out.error(errors::kInvalidOrOutOfRangeSlot);
    ArgCursor args(argv, 3);
    const std::optional<std::size_t> word =
        args.eat_one_of({"importing", "migrating", "stable", "node"});
    static constexpr cluster::SlotAction kActions[] = {
        cluster::SlotAction::importing, cluster::SlotAction::migrating, cluster::SlotAction::stable,
        cluster::SlotAction::node};
    const bool stable = word && kActions[*word] == cluster::SlotAction::stable;
    if (!word || argv.size() != (stable ? 4u : 5u)) return ctx.out.error(errors::kSetSlotSyntax);
    const cluster::SlotAction action = kActions[*word];
    std::string node_id(stable ? std::string_view() : args.next());
    const std::uint64_t keys_here = ctx.keyspace.count_keys_in_slot(*slot);
    commit(ctx, [slot = *slot, action, node_id = std::move(node_id),
                 keys_here](const cluster::ClusterMap& map) {
        return cluster::set_slot(map, slot, action, node_id, keys_here);
    });
}

// The slots of ADDSLOTS / DELSLOTS (one per argument) or of their RANGE
// forms (first last pairs), from argv[2] on; nullopt once the error is
// written.
std::optional<std::vector<std::uint16_t>> slot_arguments(Context& ctx, Args argv, bool ranges,
                                                         std::string_view name) {
    std::vector<std::uint16_t> slots;
    if (ranges && argv.size() % 2 != 0) {
        ctx.out.error(wrong_arity(name).text);
        return std::nullopt;
    }
    for (std::size_t i = 2; i < argv.size(); i += ranges ? 2 : 1) {
        const std::optional<std::uint16_t> first = parse_slot(argv[i]);
        const std::optional<std::uint16_t> last = ranges ? parse_slot(argv[i + 1]) : first;
        if (!first || !last) {
            ctx.out.error(errors::kInvalidOrOutOfRangeSlot);
            return std::nullopt;
        }
        if (*first > *last) {
            ctx.out.error("ERR start slot number " + std::to_string(*first) +
                          " is greater than end slot number " + std::to_string(*last));
            return std::nullopt;
        }
        for (std::uint32_t slot = *first; slot <= *last; ++slot) {
            slots.push_back(static_cast<std::uint16_t>(slot));
        }
    }
    return slots;
}

enum class SlotChange { add, remove };

template <SlotChange Change, bool Ranges>
void cmd_cluster_slots_change(ClusterView& ctx, Args argv) {
    const std::string_view name =
        Change == SlotChange::add ? "cluster|addslotsrange" : "cluster|delslotsrange";
    std::optional<std::vector<std::uint16_t>> slots = slot_arguments(ctx, argv, Ranges, name);
    if (!slots) return;
    commit(ctx, [slots = std::move(*slots)](const cluster::ClusterMap& map) {
        return Change == SlotChange::add ? cluster::add_slots(map, slots)
                                         : cluster::del_slots(map, slots);
    });
}

// CLUSTER SET-CONFIG-EPOCH epoch
void cmd_cluster_set_config_epoch(ClusterView& ctx, Args argv) {
    ArgCursor args(argv, 2);
    const core::Result<std::int64_t> epoch = args.take_int(errors::kNotInteger);
    if (!epoch) return ctx.out.error(epoch.error());
    commit(ctx, [epoch = *epoch](const cluster::ClusterMap& map) {
        return cluster::set_config_epoch(map, epoch);
    });
}

// CLUSTER BUMPEPOCH: +BUMPED <epoch> or +STILL <epoch>, from the last
// application of the edit (a backend applies it again after a lost race;
// its reply comes after that).
void cmd_cluster_bumpepoch(ClusterView& ctx, Args) {
    struct Outcome {
        bool bumped = false;
        std::uint64_t epoch = 0;
    };
    auto outcome = std::make_shared<Outcome>();
    commit(
        ctx,
        [outcome](const cluster::ClusterMap& map) {
            core::Result<cluster::ClusterMap> next = cluster::bump_epoch(map, outcome->bumped);
            if (next) outcome->epoch = next->self().config_epoch;
            return next;
        },
        [outcome](resp::Writer& out) {
            out.simple((outcome->bumped ? "BUMPED " : "STILL ") + std::to_string(outcome->epoch));
        });
}

// CLUSTER REPLICATE node-id: the map says whom this node follows; the
// server follows it (net/cluster_node.hpp).
void cmd_cluster_replicate(ClusterView& ctx, Args argv) {
    std::string id(argv[2]);
    const std::uint64_t keys_here = ctx.keyspace.size();
    commit(ctx, [id = std::move(id), keys_here](const cluster::ClusterMap& map) {
        return cluster::replicate(map, id, keys_here);
    });
}

// CLUSTER FORGET node-id
void cmd_cluster_forget(ClusterView& ctx, Args argv) {
    std::string id(argv[2]);
    commit(ctx, [id = std::move(id)](const cluster::ClusterMap& map) {
        return cluster::forget(map, id);
    });
}

// CLUSTER MEET ip port [cluster-bus-port]: the bus port is taken and
// unused (there is no bus).
void cmd_cluster_meet(ClusterView& ctx, Args argv) {
    if (argv.size() > 5) return ctx.out.error(wrong_arity("cluster|meet").text);
    ArgCursor args(argv, 2);
    std::string host(args.next());
    const std::optional<std::int64_t> port = args.next_int();
    if (!port || *port < 0 || *port > 65535) {
        std::string message(errors::kInvalidBasePort);
        core::append_printable(message, argv[3]);
        return ctx.out.error(message);
    }
    if (args.has_next()) {
        const std::optional<std::int64_t> bus = args.next_int();
        if (!bus || *bus < 0 || *bus > 65535) {
            std::string message(errors::kInvalidBusPort);
            core::append_printable(message, argv[4]);
            return ctx.out.error(message);
        }
    }
    answer_change(ctx, [&ctx, &host, &port](cluster::ChangeDone done) {
        ctx.server.cluster.meet(std::move(host), static_cast<std::uint16_t>(*port),
                                std::move(done));
    });
}

// CLUSTER RESET [HARD|SOFT]: this node leaves the map, owning nothing. A
// replica, as in Redis, stops following its primary and drops the data it
// held (a copy of its primary's, which has them all): once it is a primary
// on its own (ReplicationController: its link stopped), its keyspace is
// emptied, journaled as a FLUSHALL, and then the reply comes.
void cmd_cluster_reset(ResetView& ctx, Args argv) {
    ArgCursor args(argv, 2);
    if (args.has_next() && !args.eat_one_of({"hard", "soft"})) {
        return ctx.out.error(errors::kSyntax);
    }
    if (args.has_next()) return ctx.out.error(errors::kSyntax);
    const bool primary = ctx.server.cluster.view().self().is_primary();
    if (primary && ctx.keyspace.size() != 0) return ctx.out.error(errors::kResetWithKeys);
    if (primary || !ctx.server.cluster.has_backend()) {
        return answer_change(
            ctx, [&ctx](cluster::ChangeDone done) { ctx.server.cluster.leave(std::move(done)); });
    }
    DeferredReply reply = ctx.defer_reply();
    if (!reply) return ctx.out.error(errors::kCannotWait);
    const auto answer = [reply](std::string error) {
        reply.complete([error = std::move(error)](resp::Writer& out) {
            error.empty() ? out.ok() : out.error(error);
        });
    };
    command::Replication& replication = ctx.server.replication;
    store::Keyspace& keyspace = ctx.keyspace;
    ctx.server.cluster.leave([&replication, &keyspace, answer](const core::Status& left) {
        if (!left) return answer(left.error());
        replication.replicaof("", 0, [&keyspace, answer](const std::string& error) {
            if (error.empty()) keyspace.clear();
            answer(error);
        });
    });
}

// CLUSTER FAILOVER [FORCE|TAKEOVER], on a replica: it becomes its
// primary's primary (net/cluster_failover.hpp); the reply comes once done.
void cmd_cluster_failover(ClusterView& ctx, Args argv) {
    using Mode = cluster::ClusterState::FailoverMode;
    ArgCursor args(argv, 2);
    Mode mode = Mode::handshake;
    if (const std::optional<std::size_t> word = args.eat_one_of({"force", "takeover"})) {
        mode = *word == 0 ? Mode::force : Mode::takeover;
    }
    if (args.has_next()) return ctx.out.error(errors::kSyntax);
    answer_change(ctx, [&ctx, mode](cluster::ChangeDone done) {
        ctx.server.cluster.failover(mode, std::move(done));
    });
}

}  // namespace

void register_cluster_admin_commands(Registry& registry) {
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_failover>>("cluster|failover");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_set_config_epoch>>(
        "cluster|set-config-epoch");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_replicate>>(
        "cluster|replicate");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_bumpepoch>>(
        "cluster|bumpepoch");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_forget>>("cluster|forget");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_meet>>("cluster|meet");
    registry.register_handler<cluster_only<ResetView, cmd_cluster_reset>>("cluster|reset");
    registry.register_handler<cluster_only<ClusterView, cmd_cluster_setslot>>("cluster|setslot");
    registry.register_handler<
        cluster_only<ClusterView, cmd_cluster_slots_change<SlotChange::add, false>>>(
        "cluster|addslots");
    registry.register_handler<
        cluster_only<ClusterView, cmd_cluster_slots_change<SlotChange::add, true>>>(
        "cluster|addslotsrange");
    registry.register_handler<
        cluster_only<ClusterView, cmd_cluster_slots_change<SlotChange::remove, false>>>(
        "cluster|delslots");
    registry.register_handler<
        cluster_only<ClusterView, cmd_cluster_slots_change<SlotChange::remove, true>>>(
        "cluster|delslotsrange");
}

}  // namespace bloomery::command
