#include "bloomery/cluster/cluster_map.hpp"

#include <algorithm>
#include <set>

#include "bloomery/cluster/topology.hpp"

namespace bloomery::cluster {
namespace {

using OpenSlots = std::vector<std::pair<std::uint16_t, std::uint16_t>>;

std::uint16_t open_slot_node(const OpenSlots& open, std::uint16_t slot) {
    const auto at =
        std::lower_bound(open.begin(), open.end(), std::make_pair(slot, std::uint16_t{0}));
    return at != open.end() && at->first == slot ? at->second : kNoNode;
}

void set_open_slot(OpenSlots& open, std::uint16_t slot, std::uint16_t node) {
    const auto at =
        std::lower_bound(open.begin(), open.end(), std::make_pair(slot, std::uint16_t{0}));
    const bool present = at != open.end() && at->first == slot;
    if (node == kNoNode) {
        if (present) open.erase(at);
    } else if (present) {
        at->second = node;
    } else {
        open.insert(at, {slot, node});
    }
}

}  // namespace

ClusterMap ClusterMap::lone(MapNode self) {
    ClusterMap map;
    map.nodes_.push_back(std::move(self));
    map.self_ = 0;
    map.finish();
    return map;
}

ClusterMap ClusterMap::from_topology(const Topology& topology) {
    ClusterMap map;
    for (const Node& node : topology.nodes()) {
        MapNode entry;
        entry.id = node.id;
        entry.host = node.host;
        entry.port = node.port;
        entry.address = node.address;
        if (!node.primary) entry.primary_id = topology.nodes()[node.primary_index].id;
        entry.config_epoch = node.config_epoch;
        map.nodes_.push_back(std::move(entry));
    }
    map.self_ = static_cast<std::uint16_t>(topology.self_index());
    for (std::uint32_t slot = 0; slot < kSlotCount; ++slot) {
        map.owner_[slot] =
            static_cast<std::uint16_t>(topology.owner(static_cast<std::uint16_t>(slot)));
    }
    // The epochs of a static map are the primaries' ranks: the highest is
    // the number of primaries.
    map.current_epoch_ = topology.primary_count();
    map.finish();
    return map;
}

std::optional<std::uint16_t> ClusterMap::find(std::string_view id) const {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i].id == id) return static_cast<std::uint16_t>(i);
    }
    return std::nullopt;
}

std::uint16_t ClusterMap::migrating_to(std::uint16_t slot) const {
    return migrating_.empty() ? kNoNode : open_slot_node(migrating_, slot);
}

std::uint16_t ClusterMap::importing_from(std::uint16_t slot) const {
    return importing_.empty() ? kNoNode : open_slot_node(importing_, slot);
}

std::vector<std::uint16_t> ClusterMap::replicas_of(std::uint16_t primary) const {
    std::vector<std::uint16_t> replicas;
    const std::string& id = nodes_[primary].id;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i].primary_id == id) replicas.push_back(static_cast<std::uint16_t>(i));
    }
    return replicas;
}

std::uint16_t ClusterMap::primary_of(std::uint16_t index) const {
    const MapNode& node = nodes_[index];
    if (node.is_primary()) return kNoNode;
    return find(node.primary_id).value_or(kNoNode);
}

std::uint16_t ClusterMap::add_node(MapNode node) {
    nodes_.push_back(std::move(node));
    return static_cast<std::uint16_t>(nodes_.size() - 1);
}

void ClusterMap::set_migrating(std::uint16_t slot, std::uint16_t node) {
    set_open_slot(migrating_, slot, node);
}

void ClusterMap::set_importing(std::uint16_t slot, std::uint16_t node) {
    set_open_slot(importing_, slot, node);
}

void ClusterMap::finish() {
    ranges_.clear();
    slots_assigned_ = 0;
    slots_failed_ = 0;
    std::set<std::uint16_t> serving;
    for (std::uint32_t slot = 0; slot < kSlotCount; ++slot) {
        const std::uint16_t owner = owner_[slot];
        if (owner == kNoNode) continue;
        ++slots_assigned_;
        if (nodes_[owner].failed) ++slots_failed_;
        serving.insert(owner);
        if (!ranges_.empty() && ranges_.back().primary == owner &&
            ranges_.back().last + 1u == slot) {
            ranges_.back().last = static_cast<std::uint16_t>(slot);
        } else {
            const auto first = static_cast<std::uint16_t>(slot);
            ranges_.push_back(SlotRange{first, first, owner});
        }
    }
    serving_primaries_ = serving.size();
}

}  // namespace bloomery::cluster
