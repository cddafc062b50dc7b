#pragma once
// The cluster map as the cluster's store keeps it (etcd): one JSON document
// for the whole cluster, the same for every node, which each node reads as
// its own view (cluster_map.hpp) by naming itself.
//
//   {"current_epoch": 7,
//    "nodes": [{"id": "<40 hex>", "host": "10.0.0.1", "port": 6379,
//               "primary": "" | "<id>", "config_epoch": 3}, ...],
//    "slots": [[0, 5460, "<id>"], ...],
//    "open": [{"slot": 12, "migrating_to": "<id>" | "",
//              "importer": "<id>" | "", "importing_from": "<id>" | ""}, ...],
//    "forgotten": ["<id>", ...]}
//
// "forgotten", optional: the ids CLUSTER FORGET removed lately.
// Whether a node is down is not part of it (the store knows that from the
// node's lease). Pure functions, safe from any thread.

#include <cstddef>
#include <string>
#include <string_view>

#include "bloomery/cluster/cluster_map.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::cluster {

// The most nodes a map may name (Redis Cluster's own bound).
inline constexpr std::size_t kMaxClusterNodes = 1000;

// Whether `text` is a node id: 40 lower-case hex digits.
bool is_node_id(std::string_view text);

// The map's document, whichever node's view `map` is.
std::string encode_map(const ClusterMap& map);

// The view of the map in `document` from the node `self_id`, or a one-line
// error naming what is wrong: a document written by something else is
// refused, never half read. A document that does not name `self_id` (a
// cluster this node is not a member of) is an error too; names_node()
// tells the two apart.
core::Result<ClusterMap> decode_map(std::string_view document, std::string_view self_id);

// Whether `document` (well formed) names the node `id`.
bool names_node(std::string_view document, std::string_view id);

// decode_map(), `self` added to the map's nodes when the document does not
// name it yet (a node joining the cluster), owning no slot.
core::Result<ClusterMap> join_map(std::string_view document, const MapNode& self);

}  // namespace bloomery::cluster
