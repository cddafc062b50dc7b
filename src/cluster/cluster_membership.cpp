#include "bloomery/cluster/cluster_membership.hpp"

#include "bloomery/cluster/map_codec.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace bloomery::cluster {

core::Result<ClusterMap> set_config_epoch(const ClusterMap& map, std::int64_t epoch) {
    if (epoch < 0) {
        return core::Error{"ERR Invalid config epoch specified: " + std::to_string(epoch)};
    }
    if (map.nodes().size() > 1) {
        return core::Error{
            "ERR The user can assign a config epoch only when the node does not know any other "
            "node."};
    }
    if (map.self().config_epoch != 0)
        return core::Error{"ERR Node config epoch is already non-zero"};
    ClusterMap next = map;
    const auto value = static_cast<std::uint64_t>(epoch);
    next.mutable_node(next.self_index()).config_epoch = value;
    if (next.current_epoch() < value) next.set_current_epoch(value);
    next.finish();
    return next;
}

core::Result<ClusterMap> bump_epoch(const ClusterMap& map, bool& bumped) {
    std::uint64_t highest = map.current_epoch();
    for (const MapNode& node : map.nodes()) highest = std::max(highest, node.config_epoch);
    const std::uint64_t own = map.self().config_epoch;
    bumped = own == 0 || own != highest;
    if (!bumped) return map;
    ClusterMap next = map;
    next.set_current_epoch(highest + 1);
    next.mutable_node(next.self_index()).config_epoch = highest + 1;
    next.finish();
    return next;
}

core::Result<ClusterMap> replicate(const ClusterMap& map, std::string_view id,
                                   std::uint64_t keys_here) {
    const std::optional<std::uint16_t> index = map.find(id);
    if (!index) return core::Error{"ERR Unknown node " + std::string(id)};
    if (*index == map.self_index()) return core::Error{"ERR Can't replicate myself"};
    if (!map.node(*index).is_primary()) {
        return core::Error{"ERR I can only replicate a master, not a replica."};
    }
    const MapNode& self = map.self();
    bool owns_slots = false;
    for (const SlotRange& range : map.ranges()) owns_slots |= range.primary == map.self_index();
    if (self.is_primary() && (owns_slots || keys_here != 0)) {
        return core::Error{
            "ERR To set a master the node must be empty and without assigned slots."};
    }
    ClusterMap next = map;
    for (std::size_t i = 0; i < next.nodes().size(); ++i) {
        MapNode& node = next.mutable_node(static_cast<std::uint16_t>(i));
        if (node.primary_id == self.id) node.primary_id = std::string(id);
    }
    next.mutable_node(next.self_index()).primary_id = std::string(id);
    // Slots this node was importing or moving out are no longer its own.
    for (const ClusterMap::OpenSlot& open : map.open_slots()) {
        if (open.importer == map.self_index()) next.set_importing(open.slot, kNoNode, kNoNode);
        if (map.owner(open.slot) == map.self_index()) next.set_migrating(open.slot, kNoNode);
    }
    next.finish();
    return next;
}

ClusterMap without_node(const ClusterMap& map, std::uint16_t index) {
    const std::string& gone = map.node(index).id;
    std::vector<MapNode> nodes;
    std::vector<std::uint16_t> renumber(map.nodes().size(), kNoNode);
    for (std::size_t i = 0; i < map.nodes().size(); ++i) {
        if (i == index) continue;
        renumber[i] = static_cast<std::uint16_t>(nodes.size());
        nodes.push_back(map.nodes()[i]);
        if (nodes.back().primary_id == gone) nodes.back().primary_id.clear();
    }
    const std::uint16_t self = index == map.self_index() ? 0 : renumber[map.self_index()];
    ClusterMap next = ClusterMap::of_nodes(std::move(nodes), self);
    const auto remap = [&renumber](std::uint16_t node) {
        return node == kNoNode ? kNoNode : renumber[node];
    };
    for (std::uint32_t slot = 0; slot < kSlotCount; ++slot) {
        const auto s = static_cast<std::uint16_t>(slot);
        next.set_owner(s, remap(map.owner(s)));
    }
    for (const ClusterMap::OpenSlot& open : map.open_slots()) {
        const std::uint16_t to = remap(open.migrating_to);
        const std::uint16_t importer = remap(open.importer);
        const std::uint16_t from = remap(open.importing_from);
        // A migration is its owner's: it ends with the owner.
        if (to != kNoNode && remap(map.owner(open.slot)) != kNoNode) {
            next.set_migrating(open.slot, to);
        }
        if (importer != kNoNode && from != kNoNode) next.set_importing(open.slot, importer, from);
    }
    next.set_current_epoch(map.current_epoch());
    for (const std::string& id : map.forgotten()) next.remember_forgotten(id);
    next.finish();
    return next;
}

core::Result<ClusterMap> forget(const ClusterMap& map, std::string_view id) {
    const std::optional<std::uint16_t> index = map.find(id);
    if (!index) {
        if (map.was_forgotten(id)) return map;
        return core::Error{"ERR Unknown node " + std::string(id)};
    }
    if (*index == map.self_index()) {
        return core::Error{"ERR I tried hard but I can't forget myself..."};
    }
    if (map.self().primary_id == id) return core::Error{"ERR Can't forget my master!"};
    ClusterMap next = without_node(map, *index);
    next.remember_forgotten(std::string(id));
    next.finish();
    return next;
}

core::Result<ClusterMap> admit(const ClusterMap& map, const ClusterMap& lone) {
    const MapNode& joining = lone.self();
    ClusterMap next = map;
    std::uint16_t index = 0;
    if (const std::optional<std::uint16_t> known = map.find(joining.id)) {
        index = *known;
    } else {
        if (map.nodes().size() >= kMaxClusterNodes)
            return core::Error{"ERR the cluster has too many nodes"};
        MapNode added = joining;
        added.failed = false;
        index = next.add_node(std::move(added));
        next.drop_forgotten(joining.id);
    }
    for (const SlotRange& range : lone.ranges()) {
        for (std::uint32_t slot = range.first; slot <= range.last; ++slot) {
            const auto s = static_cast<std::uint16_t>(slot);
            const std::uint16_t owner = map.owner(s);
            if (owner != kNoNode && owner != index) {
                return core::Error{"ERR slot " + std::to_string(slot) + " is served by both " +
                                   map.node(owner).id + " and " + joining.id};
            }
            next.set_owner(s, index);
        }
    }
    MapNode& node = next.mutable_node(index);
    if (node.config_epoch < joining.config_epoch) node.config_epoch = joining.config_epoch;
    if (next.current_epoch() < lone.current_epoch()) next.set_current_epoch(lone.current_epoch());
    if (next.current_epoch() < node.config_epoch) next.set_current_epoch(node.config_epoch);
    next.finish();
    return next;
}

core::Result<ClusterMap> take_over(const ClusterMap& map, std::string_view primary) {
    const std::optional<std::uint16_t> index = map.find(primary);
    if (!index) return core::Error{"ERR Unknown node " + std::string(primary)};
    if (map.self().primary_id != primary) {
        return core::Error{"ERR this node is not a replica of " + std::string(primary)};
    }
    const std::uint16_t self = map.self_index();
    const std::string self_id = map.self().id;
    ClusterMap next = map;
    for (std::uint32_t slot = 0; slot < kSlotCount; ++slot) {
        const auto s = static_cast<std::uint16_t>(slot);
        if (map.owner(s) == *index) next.set_owner(s, self);
    }
    for (const ClusterMap::OpenSlot& open : map.open_slots()) {
        if (open.importer == *index) next.set_importing(open.slot, self, open.importing_from);
        if (open.migrating_to == self) next.set_migrating(open.slot, kNoNode);
    }
    for (std::size_t i = 0; i < next.nodes().size(); ++i) {
        MapNode& node = next.mutable_node(static_cast<std::uint16_t>(i));
        if (node.primary_id == primary) node.primary_id = self_id;
    }
    next.mutable_node(*index).primary_id = self_id;
    next.mutable_node(self).primary_id.clear();
    const std::uint64_t epoch = next.current_epoch() + 1;
    next.set_current_epoch(epoch);
    next.mutable_node(self).config_epoch = epoch;
    next.finish();
    return next;
}

ClusterMap with_self_address(const ClusterMap& map, std::string_view host, std::uint16_t port) {
    ClusterMap next = map;
    MapNode& self = next.mutable_node(next.self_index());
    self.host = std::string(host);
    self.port = port;
    self.address = self.host + ":" + std::to_string(port);
    next.finish();
    return next;
}

}  // namespace bloomery::cluster
