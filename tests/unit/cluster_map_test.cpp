// The cluster map and its changes: what CLUSTER SETSLOT, ADDSLOTS and
// DELSLOTS do to a map, with Redis's refusals, and how ClusterState hands a
// map to readers on other threads.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/cluster/cluster_changes.hpp"
#include "bloomery/cluster/cluster_map.hpp"
#include "bloomery/cluster/cluster_state.hpp"
#include "bloomery/cluster/topology.hpp"

namespace bloomery::cluster {
namespace {

// a serves 0-8191 (a2 its replica), b 8192-16383; this node is `self`.
ClusterMap two_primaries(std::string_view self) {
    auto topology = parse_topology("0-8191=a:1|a2:1,8192-16383=b:1", self, "");
    EXPECT_TRUE(topology) << topology.error();
    return ClusterMap::from_topology(*topology);
}

std::string id_of(const ClusterMap& map, std::string_view address) {
    for (const MapNode& node : map.nodes()) {
        if (node.address == address) return node.id;
    }
    ADD_FAILURE() << "no node " << address;
    return {};
}

TEST(ClusterMap, FromTopologyKeepsOwnersRangesReplicasAndEpochs) {
    const ClusterMap map = two_primaries("a2:1");
    ASSERT_EQ(map.nodes().size(), 3u);
    EXPECT_EQ(map.self().address, "a2:1");
    EXPECT_FALSE(map.self().is_primary());
    const std::uint16_t a = *map.find(id_of(map, "a:1"));
    EXPECT_EQ(map.primary_of(map.self_index()), a);
    EXPECT_EQ(map.owner(0), a);
    EXPECT_EQ(map.node(map.owner(16383)).address, "b:1");
    ASSERT_EQ(map.ranges().size(), 2u);
    EXPECT_EQ(map.ranges()[0].last, 8191);
    EXPECT_EQ(map.replicas_of(a), std::vector<std::uint16_t>{map.self_index()});
    EXPECT_EQ(map.slots_assigned(), kSlotCount);
    EXPECT_EQ(map.serving_primaries(), 2u);
    EXPECT_EQ(map.current_epoch(), 2u);
    EXPECT_TRUE(map.state_ok());
    EXPECT_FALSE(map.has_open_slots());
}

TEST(ClusterChanges, SetSlotMigratingAndImportingFollowRedisRules) {
    const ClusterMap a = two_primaries("a:1");
    const std::string b_id = id_of(a, "b:1");
    EXPECT_EQ(set_slot(a, 9000, SlotAction::migrating, b_id, 0).error(),
              "ERR I'm not the owner of hash slot 9000");
    EXPECT_EQ(set_slot(a, 100, SlotAction::importing, b_id, 0).error(),
              "ERR I'm already the owner of hash slot 100");
    EXPECT_EQ(set_slot(a, 100, SlotAction::migrating, "nobody", 0).error(),
              "ERR I don't know about node nobody");
    EXPECT_EQ(set_slot(a, 100, SlotAction::migrating, id_of(a, "a2:1"), 0).error(),
              "ERR Target node is not a master");
    auto migrating = set_slot(a, 100, SlotAction::migrating, b_id, 5);
    ASSERT_TRUE(migrating);
    EXPECT_TRUE(migrating->has_open_slots());
    EXPECT_EQ(migrating->node(migrating->migrating_to(100)).address, "b:1");
    EXPECT_EQ(migrating->migrating_to(101), kNoNode);
    auto stable = set_slot(*migrating, 100, SlotAction::stable, "", 5);
    ASSERT_TRUE(stable);
    EXPECT_FALSE(stable->has_open_slots());

    const ClusterMap replica = two_primaries("a2:1");
    EXPECT_EQ(set_slot(replica, 100, SlotAction::stable, "", 0).error(),
              "ERR Please use SETSLOT only with masters.");
}

TEST(ClusterChanges, SetSlotNodeEndsAMoveAndRaisesTheImportersEpoch) {
    const ClusterMap a = two_primaries("a:1");
    const ClusterMap b = two_primaries("b:1");
    const std::string b_id = id_of(a, "b:1");
    EXPECT_EQ(set_slot(a, 100, SlotAction::node, b_id, 3).error(),
              "ERR Can't assign hashslot 100 to a different node while I still hold keys for "
              "this hash slot.");
    EXPECT_EQ(set_slot(a, 100, SlotAction::node, "nobody", 0).error(), "ERR Unknown node nobody");
    // The importer claims the slot: its epoch becomes the newest.
    auto importing = set_slot(b, 100, SlotAction::importing, id_of(b, "a:1"), 0);
    ASSERT_TRUE(importing);
    EXPECT_EQ(importing->node(importing->importing_from(100)).address, "a:1");
    auto claimed = set_slot(*importing, 100, SlotAction::node, b_id, 0);
    ASSERT_TRUE(claimed);
    EXPECT_EQ(claimed->owner(100), claimed->self_index());
    EXPECT_EQ(claimed->importing_from(100), kNoNode);
    EXPECT_EQ(claimed->current_epoch(), 3u);
    EXPECT_EQ(claimed->self().config_epoch, 3u);
    EXPECT_EQ(claimed->ranges().size(), 4u);  // 0-99 a, 100 b, 101-8191 a, 8192-16383 b
    // The source, once empty, hands it over and forgets the migration.
    auto migrating = set_slot(a, 100, SlotAction::migrating, b_id, 0);
    ASSERT_TRUE(migrating);
    auto handed = set_slot(*migrating, 100, SlotAction::node, b_id, 0);
    ASSERT_TRUE(handed);
    EXPECT_EQ(handed->node(handed->owner(100)).address, "b:1");
    EXPECT_FALSE(handed->has_open_slots());
    EXPECT_EQ(handed->self().config_epoch, 1u);  // only the importer's epoch moves
}

TEST(ClusterChanges, AddAndDeleteSlotsAllOrNothing) {
    const ClusterMap a = two_primaries("a:1");
    const std::vector<std::uint16_t> some{1, 2, 3};
    EXPECT_EQ(add_slots(a, some).error(), "ERR Slot 1 is already busy");
    auto removed = del_slots(a, some);
    ASSERT_TRUE(removed);
    EXPECT_EQ(removed->slots_assigned(), kSlotCount - 3);
    EXPECT_FALSE(removed->state_ok());
    EXPECT_EQ(removed->owner(2), kNoNode);
    EXPECT_EQ(del_slots(*removed, std::vector<std::uint16_t>{4, 2}).error(),
              "ERR Slot 2 is already unassigned");
    EXPECT_EQ(removed->owner(4), removed->self_index());  // the refusal changed nothing
    EXPECT_EQ(add_slots(*removed, std::vector<std::uint16_t>{1, 1}).error(),
              "ERR Slot 1 specified multiple times");
    auto back = add_slots(*removed, some);
    ASSERT_TRUE(back);
    EXPECT_TRUE(back->state_ok());
}

TEST(ClusterMap, AFailedOwnerTakesTheClusterDown) {
    ClusterMap map = two_primaries("a:1");
    map.mutable_node(*map.find(id_of(map, "b:1"))).failed = true;
    map.finish();
    EXPECT_EQ(map.slots_failed(), 8192u);
    EXPECT_FALSE(map.state_ok());
}

TEST(ClusterState, ChangesAreAllOrNothingAndReadersSeeWholeMaps) {
    ClusterState state(two_primaries("a:1"));
    const std::uint64_t first = state.version();
    core::Status refused;
    state.change(
        [](const ClusterMap& map) { return add_slots(map, std::vector<std::uint16_t>{1}); },
        [&](core::Status status) { refused = std::move(status); });
    EXPECT_EQ(refused.error(), "ERR Slot 1 is already busy");
    EXPECT_EQ(state.version(), first);

    // Readers on other threads see each map whole: the slots a node owns
    // are always a run from 0 (slots are given away from the top).
    std::atomic<bool> stop{false};
    std::atomic<int> torn{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 3; ++t) {
        readers.emplace_back([&] {
            while (!stop.load()) {
                const ClusterMap& map = state.view();
                const std::size_t assigned = map.slots_assigned();
                if (assigned > 0 &&
                    map.owner(static_cast<std::uint16_t>(assigned - 1)) == kNoNode) {
                    torn.fetch_add(1);
                }
            }
        });
    }
    for (int slot = kSlotCount - 1; slot >= 8192; --slot) {
        core::Status done;
        state.change(
            [slot](const ClusterMap& map) {
                return del_slots(map, std::vector<std::uint16_t>{static_cast<std::uint16_t>(slot)});
            },
            [&](core::Status status) { done = std::move(status); });
        ASSERT_TRUE(done) << done.error();
        if (slot % 1024 == 0) std::this_thread::yield();
    }
    stop.store(true);
    for (std::thread& reader : readers) reader.join();
    EXPECT_EQ(torn.load(), 0);
    EXPECT_EQ(state.view().slots_assigned(), 8192u);
    EXPECT_GT(state.version(), first);
}

}  // namespace
}  // namespace bloomery::cluster
