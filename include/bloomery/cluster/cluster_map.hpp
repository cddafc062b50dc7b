#pragma once
// A cluster's map as one node sees it at one moment: its nodes, the primary
// serving each hash slot, the slots being moved out of or into this node,
// and the epochs. Immutable once published (cluster_state.hpp publishes a
// new map for every change). Changes are functions from one map to the next
// (cluster_changes.hpp), so every backend that keeps the map (a node's own
// memory for the static map of --cluster-slots, etcd) runs the same rules.
//
// Thread safety: a const ClusterMap may be read from any thread; the
// setters are for the one thread building the next map.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bloomery/core/key_slot.hpp"

namespace bloomery::cluster {

class Topology;

// "No node": an unassigned slot, a slot neither migrating nor importing.
inline constexpr std::uint16_t kNoNode = 0xffff;

struct MapNode {
    std::string id;  // 40 lower-case hex digits
    std::string host;
    std::uint16_t port = 0;
    std::string address;     // "host:port", as MOVED and CLUSTER NODES write it
    std::string primary_id;  // a replica's primary; empty for a primary
    std::uint64_t config_epoch = 0;
    bool failed = false;  // known to be down (CLUSTER NODES flag "fail")

    bool is_primary() const { return primary_id.empty(); }
};

// Consecutive slots served by one primary, as CLUSTER SLOTS reports them.
struct SlotRange {
    std::uint16_t first = 0;
    std::uint16_t last = 0;
    std::uint16_t primary = 0;  // index into ClusterMap::nodes()
};

class ClusterMap {
public:
    // A map of this node alone, owning no slot (a node nobody has met).
    static ClusterMap lone(MapNode self);
    // The map of --cluster-slots, seen from the node it names as self.
    static ClusterMap from_topology(const Topology& topology);
    // A map of these nodes, seen from nodes[self], with no slot assigned yet.
    static ClusterMap of_nodes(std::vector<MapNode> nodes, std::uint16_t self);

    const std::vector<MapNode>& nodes() const { return nodes_; }
    const MapNode& node(std::uint16_t index) const { return nodes_[index]; }
    std::uint16_t self_index() const { return self_; }
    const MapNode& self() const { return nodes_[self_]; }
    // The index of the node with this id; nullopt if unknown.
    std::optional<std::uint16_t> find(std::string_view id) const;

    // The primary serving `slot`, kNoNode while it is unassigned.
    std::uint16_t owner(std::uint16_t slot) const { return owner_[slot]; }
    // Where the slot's owner moves `slot` to (its CLUSTER SETSLOT
    // MIGRATING), kNoNode when it does not; routing reads it on the owner.
    std::uint16_t migrating_to(std::uint16_t slot) const;
    // Where this node takes `slot` from (its SETSLOT IMPORTING), kNoNode
    // when it does not.
    std::uint16_t importing_from(std::uint16_t slot) const;
    // Whether any slot is migrating or importing anywhere: commands on a map
    // without open slots are routed by owner() alone.
    bool has_open_slots() const { return !open_.empty(); }
    // Every open slot of the cluster, by slot: kept for the whole cluster,
    // so that a map kept outside this node loses no other node's state.
    struct OpenSlot {
        std::uint16_t slot = 0;
        std::uint16_t migrating_to = kNoNode;    // set by the owner
        std::uint16_t importer = kNoNode;        // the node importing it
        std::uint16_t importing_from = kNoNode;  // the source the importer named
    };
    const std::vector<OpenSlot>& open_slots() const { return open_; }

    std::uint64_t current_epoch() const { return current_epoch_; }

    // The ids CLUSTER FORGET removed, newest last, at most kForgottenKept:
    // a FORGET of one of them again answers OK (redis-cli --cluster
    // del-node sends FORGET to every node in turn).
    static constexpr std::size_t kForgottenKept = 64;
    const std::vector<std::string>& forgotten() const { return forgotten_; }
    bool was_forgotten(std::string_view id) const;

    // Derived, computed by finish(): the assigned slots as ranges in slot
    // order; the replicas of a primary, in node order; how many slots are
    // assigned; how many primaries serve at least one slot (cluster_size).
    const std::vector<SlotRange>& ranges() const { return ranges_; }
    std::vector<std::uint16_t> replicas_of(std::uint16_t primary) const;
    std::size_t slots_assigned() const { return slots_assigned_; }
    std::size_t serving_primaries() const { return serving_primaries_; }
    // Slots whose owner is known to be down.
    std::size_t slots_failed() const { return slots_failed_; }
    // CLUSTER INFO's cluster_state: every slot assigned, to a node that is
    // up (Redis's rule with cluster-require-full-coverage yes).
    bool state_ok() const { return slots_assigned_ == kSlotCount && slots_failed_ == 0; }
    // The primary a replica follows, kNoNode for a primary (or a replica of
    // a node this map does not know).
    std::uint16_t primary_of(std::uint16_t index) const;

    // ---- Building the next map (copy one, change it, finish() it) ----
    std::uint16_t add_node(MapNode node);  // its index
    MapNode& mutable_node(std::uint16_t index) { return nodes_[index]; }
    void set_owner(std::uint16_t slot, std::uint16_t node) { owner_[slot] = node; }
    void set_migrating(std::uint16_t slot, std::uint16_t target);  // kNoNode clears
    // `importer` takes `slot` from `source`; kNoNode for both clears it.
    void set_importing(std::uint16_t slot, std::uint16_t importer, std::uint16_t source);
    void set_current_epoch(std::uint64_t epoch) { current_epoch_ = epoch; }
    void remember_forgotten(std::string id);  // drops the oldest beyond kForgottenKept
    void drop_forgotten(std::string_view id);
    // Recomputes the derived fields; call once the changes are made.
    void finish();

private:
    std::vector<MapNode> nodes_;
    std::uint16_t self_ = 0;
    std::vector<std::uint16_t> owner_ = std::vector<std::uint16_t>(kSlotCount, kNoNode);
    std::vector<OpenSlot> open_;              // sorted by slot; a handful at a time
    OpenSlot* open_slot(std::uint16_t slot);  // made if missing
    const OpenSlot* find_open_slot(std::uint16_t slot) const;
    void drop_if_closed(std::uint16_t slot);
    std::uint64_t current_epoch_ = 0;
    std::vector<std::string> forgotten_;
    std::vector<SlotRange> ranges_;
    std::size_t slots_assigned_ = 0;
    std::size_t serving_primaries_ = 0;
    std::size_t slots_failed_ = 0;
};

}  // namespace bloomery::cluster
