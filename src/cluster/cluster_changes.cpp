#include "bloomery/cluster/cluster_changes.hpp"

#include <string>
#include <vector>

namespace bloomery::cluster {
namespace {

std::string text(std::string_view head, std::uint64_t number, std::string_view tail = {}) {
    std::string out(head);
    out += std::to_string(number);
    out += tail;
    return out;
}

// Raises this node's config epoch to a new highest one (Redis's
// clusterBumpConfigEpochWithoutConsensus, without the bus).
void bump_self_epoch(ClusterMap& map) {
    const std::uint64_t epoch = map.current_epoch() + 1;
    map.set_current_epoch(epoch);
    map.mutable_node(map.self_index()).config_epoch = epoch;
}

// The node a SETSLOT names: known, and a primary.
core::Result<std::uint16_t> target_node(const ClusterMap& map, std::string_view id,
                                        std::string_view unknown_prefix) {
    const std::optional<std::uint16_t> index = map.find(id);
    if (!index) return core::Error{std::string(unknown_prefix) + std::string(id)};
    if (!map.node(*index).is_primary()) return core::Error{"ERR Target node is not a master"};
    return *index;
}

core::Result<ClusterMap> assign_slot(const ClusterMap& map, std::uint16_t slot,
                                     std::string_view node_id, std::uint64_t keys_here) {
    const core::Result<std::uint16_t> target = target_node(map, node_id, "ERR Unknown node ");
    if (!target) return target.failure();
    const std::uint16_t self = map.self_index();
    if (map.owner(slot) == self && *target != self && keys_here != 0) {
        return core::Error{text("ERR Can't assign hashslot ", slot,
                                " to a different node while I still hold keys for this hash "
                                "slot.")};
    }
    ClusterMap next = map;
    // The owner's migration ends when the slot leaves it (or once this
    // node, the owner, holds no key of it).
    if (map.owner(slot) != *target || (map.owner(slot) == self && keys_here == 0)) {
        next.set_migrating(slot, kNoNode);
    }
    next.set_owner(slot, *target);
    if (*target == self && map.importing_from(slot) != kNoNode) {
        bump_self_epoch(next);
        next.set_importing(slot, kNoNode, kNoNode);
    }
    next.finish();
    return next;
}

}  // namespace

core::Result<ClusterMap> set_slot(const ClusterMap& map, std::uint16_t slot, SlotAction action,
                                  std::string_view node_id, std::uint64_t keys_here) {
    if (!map.self().is_primary()) return core::Error{"ERR Please use SETSLOT only with masters."};
    const std::uint16_t self = map.self_index();
    switch (action) {
        case SlotAction::migrating: {
            if (map.owner(slot) != self)
                return core::Error{text("ERR I'm not the owner of hash slot ", slot)};
            const core::Result<std::uint16_t> target =
                target_node(map, node_id, "ERR I don't know about node ");
            if (!target) return target.failure();
            ClusterMap next = map;
            next.set_migrating(slot, *target);
            next.finish();
            return next;
        }
        case SlotAction::importing: {
            if (map.owner(slot) == self) {
                return core::Error{text("ERR I'm already the owner of hash slot ", slot)};
            }
            const core::Result<std::uint16_t> source =
                target_node(map, node_id, "ERR I don't know about node ");
            if (!source) return source.failure();
            ClusterMap next = map;
            next.set_importing(slot, self, *source);
            next.finish();
            return next;
        }
        case SlotAction::stable: {
            // This node's own states of the slot, as Redis's are per node.
            ClusterMap next = map;
            if (map.owner(slot) == self) next.set_migrating(slot, kNoNode);
            if (map.importing_from(slot) != kNoNode) next.set_importing(slot, kNoNode, kNoNode);
            next.finish();
            return next;
        }
        case SlotAction::node:
            return assign_slot(map, slot, node_id, keys_here);
    }
    return map;
}

namespace {

core::Status no_repeats(std::span<const std::uint16_t> slots) {
    std::vector<bool> seen(kSlotCount, false);
    for (const std::uint16_t slot : slots) {
        if (seen[slot]) return core::Error{text("ERR Slot ", slot, " specified multiple times")};
        seen[slot] = true;
    }
    return {};
}

}  // namespace

core::Result<ClusterMap> add_slots(const ClusterMap& map, std::span<const std::uint16_t> slots) {
    for (const std::uint16_t slot : slots) {
        if (map.owner(slot) != kNoNode)
            return core::Error{text("ERR Slot ", slot, " is already busy")};
    }
    if (core::Status unique = no_repeats(slots); !unique) return unique.failure();
    ClusterMap next = map;
    for (const std::uint16_t slot : slots) {
        next.set_owner(slot, map.self_index());
        if (map.importing_from(slot) != kNoNode) next.set_importing(slot, kNoNode, kNoNode);
    }
    next.finish();
    return next;
}

core::Result<ClusterMap> del_slots(const ClusterMap& map, std::span<const std::uint16_t> slots) {
    for (const std::uint16_t slot : slots) {
        if (map.owner(slot) == kNoNode) {
            return core::Error{text("ERR Slot ", slot, " is already unassigned")};
        }
    }
    if (core::Status unique = no_repeats(slots); !unique) return unique.failure();
    ClusterMap next = map;
    for (const std::uint16_t slot : slots) {
        next.set_owner(slot, kNoNode);
        next.set_migrating(slot, kNoNode);
    }
    next.finish();
    return next;
}

}  // namespace bloomery::cluster
