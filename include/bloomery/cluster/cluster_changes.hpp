#pragma once
// The changes CLUSTER's subcommands make to a map (cluster_map.hpp), as
// functions from the current map to the next. Each checks what Redis 7
// checks, in Redis's order, and fails with Redis's text ("ERR ..."), the map
// unchanged; the caller publishes the result or commits it to a backend.
// Pure: no state, safe from any thread.

#include <cstdint>
#include <span>
#include <string_view>

#include "bloomery/cluster/cluster_map.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::cluster {

enum class SlotAction { importing, migrating, stable, node };

// CLUSTER SETSLOT <slot> IMPORTING|MIGRATING|STABLE|NODE [node_id], on this
// node's (map.self()) behalf. `keys_here`: how many keys this node holds in
// the slot (NODE will not give away a slot this node still holds keys of).
// NODE naming this node ends an import and raises its config epoch above
// every other, as Redis does, so the new owner's claim is the newest.
core::Result<ClusterMap> set_slot(const ClusterMap& map, std::uint16_t slot, SlotAction action,
                                  std::string_view node_id, std::uint64_t keys_here);

// CLUSTER ADDSLOTS / ADDSLOTSRANGE: the slots become this node's. Refused as
// a whole if one is assigned already or named twice.
core::Result<ClusterMap> add_slots(const ClusterMap& map, std::span<const std::uint16_t> slots);

// CLUSTER DELSLOTS / DELSLOTSRANGE: the slots become unassigned (whoever
// served them). Refused as a whole if one is unassigned or named twice.
core::Result<ClusterMap> del_slots(const ClusterMap& map, std::span<const std::uint16_t> slots);

}  // namespace bloomery::cluster
