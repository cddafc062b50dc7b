// Cluster commands that change the map: CLUSTER SETSLOT, ADDSLOTS,
// ADDSLOTSRANGE, DELSLOTS, DELSLOTSRANGE. Each builds an edit from the
// rules of cluster/cluster_changes.hpp and commits it through the node's
// ClusterState: at once for a map this node keeps itself, or through the
// backend that keeps the cluster's map, the reply waiting for it.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bloomery/cluster/cluster_changes.hpp"
#include "bloomery/cluster/cluster_state.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "cluster_routing.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

using ClusterView = With<uses::Cluster>;

// A slot argument, as Redis's getSlotOrReply reads it.
std::optional<std::uint16_t> parse_slot(std::string_view text) {
    std::int64_t value = 0;
    if (!core::parse_int64(text, value) || value < 0 || value >= cluster::kSlotCount) {
        return std::nullopt;
    }
    return static_cast<std::uint16_t>(value);
}

// Commits `edit` and answers +OK or the error. A backend that commits
// elsewhere answers later: the client waits (refused where it cannot wait,
// inside MULTI).
void commit(ClusterView& ctx, cluster::MapEdit edit) {
    if (!ctx.server.cluster.has_backend()) {
        core::Status outcome;
        ctx.server.cluster.change(std::move(edit),
                                  [&outcome](core::Status status) { outcome = std::move(status); });
        return outcome ? ctx.out.ok() : ctx.out.error(outcome.error());
    }
    DeferredReply reply = ctx.defer_reply();
    if (!reply) return ctx.out.error(errors::kClusterChangeCannotWait);
    ctx.server.cluster.change(std::move(edit), [reply](core::Status status) {
        reply.complete([status = std::move(status)](resp::Writer& out) {
            status ? out.ok() : out.error(status.error());
        });
    });
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

}  // namespace

void register_cluster_admin_commands(Registry& registry) {
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
