// The membership edits (cluster/cluster_membership.hpp): Redis's checks and
// texts, and what each leaves in the map.

#include "bloomery/cluster/cluster_membership.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "bloomery/cluster/cluster_changes.hpp"
#include "bloomery/cluster/topology.hpp"
#include "etcd_test_cluster.hpp"

namespace bloomery::cluster {
namespace {

const auto make_node = testing::loopback_node;

std::vector<std::uint16_t> slots(std::uint16_t first, std::uint16_t last) {
    std::vector<std::uint16_t> out;
    for (std::uint32_t slot = first; slot <= last; ++slot)
        out.push_back(static_cast<std::uint16_t>(slot));
    return out;
}

// Nodes 1 and 2 primaries (slots 0-99 and 100-199), 3 a replica of 1; the
// view from `self`.
ClusterMap three(std::uint16_t self) {
    std::vector<MapNode> nodes{make_node(1), make_node(2), make_node(3)};
    nodes[2].primary_id = nodes[0].id;
    ClusterMap map = ClusterMap::of_nodes(nodes, self);
    for (std::uint16_t slot = 0; slot < 200; ++slot) map.set_owner(slot, slot < 100 ? 0 : 1);
    map.set_migrating(5, 1);
    map.set_importing(150, 0, 1);
    map.finish();
    return map;
}

TEST(ClusterMembership, SetConfigEpochOnlyOnALoneNodeWithoutOne) {
    const ClusterMap lone = ClusterMap::lone(make_node(1));
    EXPECT_EQ(set_config_epoch(lone, -1).error(), "ERR Invalid config epoch specified: -1");
    const ClusterMap set = set_config_epoch(lone, 4).value();
    EXPECT_EQ(set.self().config_epoch, 4u);
    EXPECT_EQ(set.current_epoch(), 4u);
    EXPECT_EQ(set_config_epoch(set, 5).error(), "ERR Node config epoch is already non-zero");
    EXPECT_EQ(set_config_epoch(three(0), 1).error(),
              "ERR The user can assign a config epoch only when the node does not know any other "
              "node.");
}

TEST(ClusterMembership, BumpEpochTakesOnePastTheHighestUnlessAlreadyIt) {
    bool bumped = false;
    // A node at 0 always bumps, even alone.
    const ClusterMap lone = bump_epoch(ClusterMap::lone(make_node(1)), bumped).value();
    EXPECT_TRUE(bumped);
    EXPECT_EQ(lone.self().config_epoch, 1u);
    EXPECT_EQ(lone.current_epoch(), 1u);
    // Already the highest: STILL, the map unchanged.
    const ClusterMap still = bump_epoch(lone, bumped).value();
    EXPECT_FALSE(bumped);
    EXPECT_EQ(still.self().config_epoch, 1u);
    EXPECT_EQ(still.current_epoch(), 1u);
    // Another node's epoch, or the current epoch, higher: one past it.
    ClusterMap map = three(0);
    map.mutable_node(1).config_epoch = 7;
    map.mutable_node(0).config_epoch = 3;
    map.finish();
    const ClusterMap past = bump_epoch(map, bumped).value();
    EXPECT_TRUE(bumped);
    EXPECT_EQ(past.self().config_epoch, 8u);
    EXPECT_EQ(past.current_epoch(), 8u);
    EXPECT_EQ(past.node(1).config_epoch, 7u);
    ClusterMap ahead = past;
    ahead.set_current_epoch(12);
    ahead.finish();
    EXPECT_EQ(bump_epoch(ahead, bumped).value().self().config_epoch, 13u);
    EXPECT_TRUE(bumped);
}

TEST(ClusterMembership, ReplicateChecksInRedisOrderAndMovesFollowers) {
    const ClusterMap map = three(1);
    EXPECT_EQ(replicate(map, "x", 0).error(), "ERR Unknown node x");
    EXPECT_EQ(replicate(map, map.self().id, 0).error(), "ERR Can't replicate myself");
    EXPECT_EQ(replicate(map, map.node(2).id, 0).error(),
              "ERR I can only replicate a master, not a replica.");
    EXPECT_EQ(replicate(map, map.node(0).id, 0).error(),
              "ERR To set a master the node must be empty and without assigned slots.");
    // Node 1 (owning 0-99, with a replica) gives its slots away, then follows 2.
    ClusterMap emptied = del_slots(three(0), slots(0, 99)).value();
    EXPECT_EQ(replicate(emptied, emptied.node(1).id, 1).error(),
              "ERR To set a master the node must be empty and without assigned slots.");
    const ClusterMap next = replicate(emptied, emptied.node(1).id, 0).value();
    EXPECT_EQ(next.self().primary_id, next.node(1).id);
    EXPECT_EQ(next.node(2).primary_id, next.node(1).id);  // its replica follows along
    EXPECT_EQ(next.importing_from(150), kNoNode);
}

TEST(ClusterMembership, ForgetRemovesTheNodeItsSlotsAndIsRepeatable) {
    const ClusterMap map = three(1);
    const std::string gone = map.node(0).id;
    EXPECT_EQ(forget(map, "x").error(), "ERR Unknown node x");
    EXPECT_EQ(forget(map, map.self().id).error(), "ERR I tried hard but I can't forget myself...");
    EXPECT_EQ(forget(three(2), gone).error(), "ERR Can't forget my master!");
    const ClusterMap next = forget(map, gone).value();
    ASSERT_EQ(next.nodes().size(), 2u);
    EXPECT_EQ(next.self().id, map.self().id);
    EXPECT_EQ(next.slots_assigned(), 100u);  // 0-99 unassigned
    EXPECT_EQ(next.owner(150), next.self_index());
    EXPECT_TRUE(next.node(*next.find(map.node(2).id)).is_primary());  // its replica
    EXPECT_FALSE(next.has_open_slots());  // both open slots named the node forgotten
    EXPECT_TRUE(next.was_forgotten(gone));
    EXPECT_EQ(forget(next, gone).value().nodes().size(), 2u);
}

TEST(ClusterMembership, AdmitTakesALoneNodesSlotsAndEpochUnlessTaken) {
    ClusterMap lone = ClusterMap::lone(make_node(9));
    lone = add_slots(lone, slots(300, 310)).value();
    lone = set_config_epoch(lone, 7).value();
    const ClusterMap next = admit(three(0), lone).value();
    ASSERT_EQ(next.nodes().size(), 4u);
    EXPECT_EQ(next.node(next.owner(305)).id, lone.self().id);
    EXPECT_EQ(next.node(3).config_epoch, 7u);
    EXPECT_EQ(next.current_epoch(), 7u);
    EXPECT_EQ(next.self().id, three(0).self().id);
    ClusterMap clash = add_slots(ClusterMap::lone(make_node(8)), slots(99, 99)).value();
    EXPECT_EQ(admit(three(0), clash).error(),
              "ERR slot 99 is served by both " + three(0).node(0).id + " and " + clash.self().id);
    // Admitting a known node again changes nothing.
    EXPECT_EQ(admit(next, lone).value().nodes().size(), 4u);
}

TEST(ClusterMembership, ANodeLeavingSeesTheMapFromAnotherNode) {
    const ClusterMap map = three(0);
    const ClusterMap left = without_node(map, 0);
    ASSERT_EQ(left.nodes().size(), 2u);
    EXPECT_EQ(left.self().id, map.node(1).id);
    EXPECT_EQ(left.slots_assigned(), 100u);
    const ClusterMap moved = with_self_address(map, "10.0.0.1", 7000);
    EXPECT_EQ(moved.self().address, "10.0.0.1:7000");
    EXPECT_EQ(moved.self().id, map.self().id);
}

}  // namespace
}  // namespace bloomery::cluster
