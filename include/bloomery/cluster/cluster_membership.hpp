#pragma once
// The changes to who is in a cluster and who follows whom: CLUSTER MEET's
// admission of a node, SET-CONFIG-EPOCH, BUMPEPOCH, REPLICATE, FORGET, and a node's
// address. Functions from one map to the next, as cluster_changes.hpp's,
// checking what Redis 7 checks, with its texts. Pure, safe from any thread.

#include <cstdint>
#include <string_view>

#include "bloomery/cluster/cluster_map.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::cluster {

// CLUSTER SET-CONFIG-EPOCH: only on a node that knows no other node, and
// whose config epoch is still 0.
core::Result<ClusterMap> set_config_epoch(const ClusterMap& map, std::int64_t epoch);

// CLUSTER BUMPEPOCH: this node's config epoch becomes one past the
// highest epoch the map knows (its current epoch, advanced too), unless it
// is already that highest and not 0. `bumped` says which: Redis's BUMPED or
// STILL, with the node's config epoch after.
core::Result<ClusterMap> bump_epoch(const ClusterMap& map, bool& bumped);

// CLUSTER REPLICATE <id>: this node follows the primary `id`. A primary
// must hold no slot and (`keys_here`) no key to become a replica. Replicas
// this node had follow `id` too.
core::Result<ClusterMap> replicate(const ClusterMap& map, std::string_view id,
                                   std::uint64_t keys_here);

// CLUSTER FORGET <id>: the node leaves the map, its slots unassigned, its
// replicas primaries of no slot; its id is remembered (ClusterMap::forgotten),
// and forgetting it again changes nothing.
core::Result<ClusterMap> forget(const ClusterMap& map, std::string_view id);

// The map without the node at `index`, as forget() leaves it; when that is
// this node (a node leaving), the view is from the first node left (the map
// must have another).
ClusterMap without_node(const ClusterMap& map, std::uint16_t index);

// `lone`, a node's view of itself before it was met (its own slots and
// config epoch), merged into `map`: the node is added if the map does not
// name it, takes its slots unless another node serves one (an error, the
// map unchanged), and its config epoch when that is higher.
core::Result<ClusterMap> admit(const ClusterMap& map, const ClusterMap& lone);

// Failover: this node, a replica of `primary`, takes its place: it serves
// the primary's slots (and its open slots' states), the primary and its
// other replicas follow it, and its config epoch becomes the newest.
core::Result<ClusterMap> take_over(const ClusterMap& map, std::string_view primary);

// This node at a new address (a restart with another --cluster-announce).
ClusterMap with_self_address(const ClusterMap& map, std::string_view host, std::uint16_t port);

}  // namespace bloomery::cluster
