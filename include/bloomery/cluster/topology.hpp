#pragma once
// A static Redis Cluster: which node serves which hash slots, fixed at start
// by --cluster-slots and --cluster-self (README "Cluster"). There is no
// cluster bus, no gossip and no failover: every node is started with the same
// map and computes the same node ids, so CLUSTER SLOTS / SHARDS / NODES agree
// on every node.
//
// Map syntax: comma-separated entries RANGE=NODE[|NODE...], RANGE being SLOT
// or FIRST-LAST (inclusive), NODE host:port ([v6addr]:port for IPv6). The
// first node of an entry is the range's primary, the rest its replicas. One
// node may serve several ranges; every slot 0-16383 must be covered exactly
// once. A node is either a primary or a replica of exactly one primary, and a
// primary lists the same replicas in each of its ranges (replicas copy a whole
// node, not a range).
//
// Thread safety: immutable after parse_topology(); read from every worker.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/cluster/cluster_map.hpp"
#include "bloomery/core/key_slot.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::cluster {

struct Node {
    std::string host;  // as written, without the brackets of an IPv6 address
    std::uint16_t port = 0;
    std::string address;  // "host:port" (unbracketed, as Redis writes MOVED and NODES)
    std::string id;       // 40 lower-case hex digits, node_id(host, port)
    bool primary = false;
    std::size_t primary_index = 0;      // a replica's primary (a primary: itself)
    std::vector<std::size_t> replicas;  // a primary's replicas, in map order
    std::uint64_t config_epoch =
        0;  // a primary's 1-based rank in slot order; a replica: its primary's
};

class Topology {
public:
    // Nodes ordered: primaries by their lowest slot, then replicas in the
    // order they first appear in the map. `--cluster-self auto` picks by
    // this order.
    const std::vector<Node>& nodes() const { return nodes_; }
    const std::vector<SlotRange>& ranges() const { return ranges_; }
    std::size_t self_index() const { return self_; }
    const Node& self() const { return nodes_[self_]; }
    // The primary serving `slot` (index into nodes()).
    std::size_t owner(std::uint16_t slot) const { return slot_owner_[slot]; }
    std::size_t primary_count() const { return primary_count_; }
    // The map in canonical form (sorted, merged, one entry per range): what
    // CONFIG GET cluster-slots shows and what parse_topology() accepts back.
    std::string describe() const;

private:
    friend class TopologyBuilder;  // parse_topology's steps (topology.cpp)
    std::vector<Node> nodes_;
    std::vector<SlotRange> ranges_;
    std::vector<std::uint16_t> slot_owner_;  // kSlotCount entries
    std::size_t self_ = 0;
    std::size_t primary_count_ = 0;
};

// The id every node computes for host:port: the first 20 bytes of
// SHA-256("host:port") in hex (host unbracketed, lower-cased), so ids agree
// across nodes without a bus to exchange them.
std::string node_id(std::string_view host, std::uint16_t port);

// "host:port" or "[v6-address]:port", checked as the map's nodes are
// (--cluster-announce, CLUSTER MEET's address).
struct NodeAddress {
    std::string host;  // unbracketed
    std::uint16_t port = 0;
};
core::Result<NodeAddress> parse_node_address(std::string_view text);

// Parses `slots_spec` (the syntax above) and finds this node: `self_spec` is
// "host:port" (matched case-insensitively on the host) or "auto", which takes
// the trailing -N of `hostname`'s first label (a StatefulSet pod
// "bloomery-2") and picks nodes()[N]. Fails with a one-line message naming
// the offending entry on any error.
core::Result<Topology> parse_topology(std::string_view slots_spec, std::string_view self_spec,
                                      std::string_view hostname);

}  // namespace bloomery::cluster
