#include "bloomery/cluster/cluster_map.hpp"

#include <algorithm>
#include <set>

#include "bloomery/cluster/topology.hpp"

namespace bloomery::cluster {
ClusterMap ClusterMap::lone(MapNode self) {
    ClusterMap map;
    map.nodes_.push_back(std::move(self));
    map.self_ = 0;
    map.finish();
    return map;
}

ClusterMap ClusterMap::of_nodes(std::vector<MapNode> nodes, std::uint16_t self) {
    ClusterMap map;
    map.nodes_ = std::move(nodes);
    map.self_ = self;
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

const ClusterMap::OpenSlot* ClusterMap::find_open_slot(std::uint16_t slot) const {
    const auto at =
        std::lower_bound(open_.begin(), open_.end(), slot,
                         [](const OpenSlot& open, std::uint16_t s) { return open.slot < s; });
    return at != open_.end() && at->slot == slot ? &*at : nullptr;
}

ClusterMap::OpenSlot* ClusterMap::open_slot(std::uint16_t slot) {
    const auto at =
        std::lower_bound(open_.begin(), open_.end(), slot,
                         [](const OpenSlot& open, std::uint16_t s) { return open.slot < s; });
    if (at != open_.end() && at->slot == slot) return &*at;
    return &*open_.insert(at, OpenSlot{.slot = slot});
}

void ClusterMap::drop_if_closed(std::uint16_t slot) {
    const OpenSlot* open = find_open_slot(slot);
    if (open != nullptr && open->migrating_to == kNoNode && open->importer == kNoNode) {
        open_.erase(open_.begin() + (open - open_.data()));
    }
}

std::uint16_t ClusterMap::migrating_to(std::uint16_t slot) const {
    if (open_.empty()) return kNoNode;
    const OpenSlot* open = find_open_slot(slot);
    return open != nullptr ? open->migrating_to : kNoNode;
}

std::uint16_t ClusterMap::importing_from(std::uint16_t slot) const {
    if (open_.empty()) return kNoNode;
    const OpenSlot* open = find_open_slot(slot);
    return open != nullptr && open->importer == self_ ? open->importing_from : kNoNode;
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

bool ClusterMap::was_forgotten(std::string_view id) const {
    return std::find(forgotten_.begin(), forgotten_.end(), id) != forgotten_.end();
}

void ClusterMap::remember_forgotten(std::string id) {
    drop_forgotten(id);
    forgotten_.push_back(std::move(id));
    if (forgotten_.size() > kForgottenKept) forgotten_.erase(forgotten_.begin());
}

void ClusterMap::drop_forgotten(std::string_view id) {
    std::erase(forgotten_, id);
}

void ClusterMap::set_migrating(std::uint16_t slot, std::uint16_t target) {
    if (target == kNoNode && find_open_slot(slot) == nullptr) return;
    open_slot(slot)->migrating_to = target;
    drop_if_closed(slot);
}

void ClusterMap::set_importing(std::uint16_t slot, std::uint16_t importer, std::uint16_t source) {
    if (importer == kNoNode && find_open_slot(slot) == nullptr) return;
    OpenSlot* open = open_slot(slot);
    open->importer = importer;
    open->importing_from = importer == kNoNode ? kNoNode : source;
    drop_if_closed(slot);
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
