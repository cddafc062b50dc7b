// The cluster map kept in etcd, with real etcd: nodes change one map
// through compare-and-swap transactions and see each other's changes
// through their watches; the document round-trips and hostile documents
// are refused.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/cluster/cluster_changes.hpp"
#include "bloomery/cluster/etcd_map_backend.hpp"
#include "bloomery/cluster/map_codec.hpp"
#include "bloomery/cluster/topology.hpp"
#include "etcd_test_cluster.hpp"

namespace bloomery::cluster {
namespace {

using testing::eventually;
const auto node = testing::loopback_node;

// Runs `change` through `state` and waits for its outcome.
core::Status change(ClusterState& state, MapEdit edit) {
    std::promise<core::Status> outcome;
    state.change(std::move(edit),
                 [&](core::Status status) { outcome.set_value(std::move(status)); });
    return outcome.get_future().get();
}

core::Status join(EtcdMapBackend& backend) {
    std::promise<core::Status> outcome;
    backend.join([&](core::Status status) { outcome.set_value(std::move(status)); });
    return outcome.get_future().get();
}

// One node: its state and the backend keeping its map in etcd.
struct Node {
    Node(const testing::EtcdTestCluster& etcd, std::uint16_t port)
        : self(node(port)), backend(testing::make_client(etcd.settings()), "test", self, state) {
        state.set_backend(&backend);
        const core::Status started = backend.start();
        EXPECT_TRUE(started) << started.error();
    }
    MapNode self;
    ClusterState state;
    EtcdMapBackend backend;
};

std::vector<std::uint16_t> range(std::uint16_t first, std::uint16_t last) {
    std::vector<std::uint16_t> slots;
    for (std::uint32_t slot = first; slot <= last; ++slot)
        slots.push_back(static_cast<std::uint16_t>(slot));
    return slots;
}

TEST(MapCodec, RoundTripsEveryFieldAndRefusesWhatIsNotAMap) {
    auto topology = parse_topology("0-8191=a:1|a2:1,8192-16383=b:1", "a:1", "");
    ASSERT_TRUE(topology) << topology.error();
    ClusterMap map = ClusterMap::from_topology(*topology);
    const std::string b_id = node_id("b", 1);
    map = set_slot(map, 100, SlotAction::migrating, b_id, 1).value();
    const std::string document = encode_map(map);
    const core::Result<ClusterMap> back = decode_map(document, node_id("b", 1));
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(back->self().address, "b:1");
    EXPECT_EQ(encode_map(*back), document);
    EXPECT_EQ(back->node(back->migrating_to(100)).address, "b:1");
    EXPECT_EQ(back->current_epoch(), 2u);
    EXPECT_EQ(back->node(back->primary_of(*back->find(node_id("a2", 1)))).address, "a:1");
    EXPECT_FALSE(decode_map(document, node_id("c", 1)));
    EXPECT_FALSE(names_node(document, node_id("c", 1)));
    const core::Result<ClusterMap> joined = join_map(document, node(7000));
    ASSERT_TRUE(joined) << joined.error();
    EXPECT_EQ(joined->nodes().size(), 4u);
    EXPECT_EQ(joined->self().address, "127.0.0.1:7000");
    for (const char* hostile :
         {"", "[]", "{}", "{\"current_epoch\":1}",
          "{\"current_epoch\":1,\"nodes\":[1],\"slots\":[],\"open\":[]}",
          "{\"current_epoch\":1,\"nodes\":[],\"slots\":[[0,16384,\"x\"]],\"open\":[]}",
          "{\"current_epoch\":-1,\"nodes\":[],\"slots\":[],\"open\":[]}"}) {
        EXPECT_FALSE(decode_map(hostile, b_id)) << hostile;
    }
}

TEST(EtcdMapBackend, NodesShareOneMapAndSeeEachOthersChanges) {
    testing::EtcdTestCluster etcd;
    Node a(etcd, 7001), b(etcd, 7002);
    // No map yet: each serves itself alone. A node not met yet keeps its
    // changes in its registration (as redis-cli --cluster create's
    // ADDSLOTS before MEET); the map takes them when it joins.
    EXPECT_EQ(a.state.view().nodes().size(), 1u);
    ASSERT_TRUE(join(a.backend));
    ASSERT_TRUE(
        change(b.state, [](const ClusterMap& map) { return add_slots(map, range(8192, 8200)); }));
    EXPECT_EQ(b.state.view().slots_assigned(), 9u);
    EXPECT_EQ(b.state.view().nodes().size(), 1u);
    EXPECT_EQ(a.state.view().nodes().size(), 1u);
    ASSERT_TRUE(join(b.backend));
    ASSERT_TRUE(
        change(a.state, [](const ClusterMap& map) { return add_slots(map, range(0, 8191)); }));
    ASSERT_TRUE(
        change(b.state, [](const ClusterMap& map) { return add_slots(map, range(8201, 16383)); }));
    // Each sees the whole map through its watch.
    ASSERT_TRUE(eventually([&] { return a.state.view().state_ok() && b.state.view().state_ok(); }));
    EXPECT_EQ(a.state.view().node(a.state.view().owner(9000)).address, "127.0.0.1:7002");
    EXPECT_EQ(b.state.view().node(b.state.view().owner(10)).address, "127.0.0.1:7001");
    EXPECT_EQ(
        change(a.state, [](const ClusterMap& map) { return add_slots(map, range(9000, 9000)); })
            .error(),
        "ERR Slot 9000 is already busy");
    // A later node joins and sees it all at once.
    Node c(etcd, 7003);
    EXPECT_EQ(c.state.view().nodes().size(), 1u);
    ASSERT_TRUE(join(c.backend));
    EXPECT_EQ(c.state.view().nodes().size(), 3u);
    EXPECT_TRUE(c.state.view().state_ok());
}

core::Status meet(ClusterState& state, const std::string& host, std::uint16_t port) {
    std::promise<core::Status> outcome;
    state.meet(host, port, [&](core::Status status) { outcome.set_value(std::move(status)); });
    return outcome.get_future().get();
}

core::Status leave(ClusterState& state) {
    std::promise<core::Status> outcome;
    state.leave([&](core::Status status) { outcome.set_value(std::move(status)); });
    return outcome.get_future().get();
}

TEST(EtcdMapBackend, NodesMeetByAddressBringTheirSlotsAndLeave) {
    testing::EtcdTestCluster etcd;
    Node a(etcd, 7021), b(etcd, 7022), c(etcd, 7023);
    ASSERT_TRUE(
        change(a.state, [](const ClusterMap& map) { return add_slots(map, range(0, 99)); }));
    ASSERT_TRUE(
        change(b.state, [](const ClusterMap& map) { return add_slots(map, range(50, 200)); }));
    // Both claim slots 50-99 before they meet: refused, nothing changed.
    EXPECT_EQ(meet(a.state, "127.0.0.1", 7022).error(),
              "ERR slot 50 is served by both " + a.self.id + " and " + b.self.id);
    ASSERT_TRUE(
        change(b.state, [](const ClusterMap& map) { return del_slots(map, range(50, 99)); }));
    EXPECT_EQ(meet(a.state, "127.0.0.1", 7099).error(),
              "ERR no node of this cluster is registered at 127.0.0.1:7099 (is it started with "
              "the same --cluster-etcd and --cluster-name?)");
    // A host name for the address registered finds the node too.
    ASSERT_TRUE(meet(a.state, "localhost", 7022));
    ASSERT_TRUE(eventually([&] { return b.state.view().nodes().size() == 2; }));
    EXPECT_EQ(b.state.view().slots_assigned(), 100u + 101u);
    ASSERT_TRUE(meet(c.state, "127.0.0.1", 7021));
    ASSERT_TRUE(eventually(
        [&] { return a.state.view().nodes().size() == 3 && b.state.view().nodes().size() == 3; }));
    // A node that leaves serves itself alone, owning nothing; the others
    // see it gone.
    ASSERT_TRUE(leave(b.state));
    EXPECT_EQ(b.state.view().nodes().size(), 1u);
    EXPECT_EQ(b.state.view().slots_assigned(), 0u);
    ASSERT_TRUE(eventually([&] { return a.state.view().nodes().size() == 2; }));
    EXPECT_EQ(a.state.view().slots_assigned(), 100u);
}

TEST(EtcdMapBackend, RacingChangesForOneSlotLeaveExactlyOneOwner) {
    testing::EtcdTestCluster etcd;
    Node a(etcd, 7011), b(etcd, 7012);
    ASSERT_TRUE(join(a.backend));
    ASSERT_TRUE(join(b.backend));
    for (std::uint16_t slot = 0; slot < 20; ++slot) {
        std::atomic<int> won{0};
        const auto claim = [slot, &won](ClusterState& state) {
            if (change(state, [slot](const ClusterMap& map) {
                    return add_slots(map, range(slot, slot));
                })) {
                ++won;
            }
        };
        std::thread first(claim, std::ref(a.state)), second(claim, std::ref(b.state));
        first.join();
        second.join();
        EXPECT_EQ(won.load(), 1) << "slot " << slot;
    }
    ASSERT_TRUE(eventually([&] {
        return a.state.view().slots_assigned() == 20 && b.state.view().slots_assigned() == 20;
    }));
    for (std::uint16_t slot = 0; slot < 20; ++slot) {
        EXPECT_EQ(a.state.view().node(a.state.view().owner(slot)).id,
                  b.state.view().node(b.state.view().owner(slot)).id);
    }
}

TEST(EtcdMapBackend, AWatchThatLostEtcdCatchesUpWhenItIsBack) {
    testing::EtcdTestCluster etcd;
    Node a(etcd, 7021), b(etcd, 7022);
    ASSERT_TRUE(join(a.backend));
    ASSERT_TRUE(join(b.backend));
    etcd.stop_member(0);
    // Unreachable: the change fails, the map served stays.
    EXPECT_FALSE(
        change(a.state, [](const ClusterMap& map) { return add_slots(map, range(0, 0)); }));
    EXPECT_EQ(b.state.view().nodes().size(), 2u);
    etcd.start_member(0);
    ASSERT_TRUE(
        change(a.state, [](const ClusterMap& map) { return add_slots(map, range(0, 99)); }));
    ASSERT_TRUE(eventually([&] { return b.state.view().slots_assigned() == 100; }));
}

}  // namespace
}  // namespace bloomery::cluster
