// A node's lease in etcd, with real etcd: other nodes mark it failed once
// the lease lapses, and it stops counting on its lease (its deadline)
// before any other node can see the lease gone.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/cluster/cluster_changes.hpp"
#include "bloomery/cluster/etcd_liveness.hpp"
#include "bloomery/cluster/etcd_map_backend.hpp"
#include "bloomery/cluster/topology.hpp"
#include "etcd_test_cluster.hpp"

namespace bloomery::cluster {
namespace {

using Clock = std::chrono::steady_clock;

using testing::eventually;
const auto node = testing::loopback_node;

std::unique_ptr<EtcdClient> client(const testing::EtcdTestCluster& etcd) {
    return testing::make_client(etcd.settings());
}

core::Status joined(EtcdMapBackend& backend) {
    std::promise<core::Status> outcome;
    backend.join([&](core::Status status) { outcome.set_value(std::move(status)); });
    return outcome.get_future().get();
}

bool failed_in(const ClusterState& state, const std::string& id) {
    const ClusterMap& map = state.view();
    const std::optional<std::uint16_t> index = map.find(id);
    return index && map.node(*index).failed;
}

TEST(EtcdLiveness, ALapsedLeaseMarksTheNodeFailedAfterItsOwnDeadlinePassed) {
    testing::EtcdTestCluster etcd;
    const MapNode a = node(7101), b = node(7102);
    ClusterState a_state, b_state;
    EtcdMapBackend a_map(client(etcd), "live", a, a_state);
    EtcdMapBackend b_map(client(etcd), "live", b, b_state, EtcdMapBackend::Liveness::track);
    ASSERT_TRUE(a_map.start());
    ASSERT_TRUE(b_map.start());
    ASSERT_TRUE(joined(a_map));
    ASSERT_TRUE(joined(b_map));
    EtcdLiveness a_lease(client(etcd), "live", a.id, std::chrono::milliseconds(1000));
    EtcdLiveness b_lease(client(etcd), "live", b.id, std::chrono::milliseconds(1000));
    ASSERT_TRUE(b_lease.start());
    ASSERT_TRUE(eventually([&] { return failed_in(b_state, a.id); }));  // no lease yet
    ASSERT_TRUE(a_lease.start());
    EXPECT_TRUE(a_lease.held());
    ASSERT_TRUE(eventually([&] { return !failed_in(b_state, a.id); }));
    // Renewed: still up well past one time to live.
    ASSERT_TRUE(eventually([&] { return a_lease.renewals() >= 4; }));
    EXPECT_FALSE(failed_in(b_state, a.id));
    EXPECT_TRUE(a_lease.held());

    // a stops renewing without giving the lease up (a crash, a pause): its
    // deadline passes before b sees its key gone.
    const Clock::time_point fence = a_lease.deadline();
    a_lease.stop(EtcdLiveness::Release::keep);
    EXPECT_FALSE(a_lease.held());  // stopped: no longer claimed
    ASSERT_TRUE(eventually([&] { return failed_in(b_state, a.id); }));
    const Clock::time_point seen = Clock::now();
    EXPECT_LT(fence, seen);
    EXPECT_GT(fence + std::chrono::seconds(3), seen);  // and not long before: one time to live
    b_lease.stop();
}

TEST(EtcdLiveness, WithoutEtcdTheLeaseEndsAndANewOneIsTakenOnceItIsBack) {
    testing::EtcdTestCluster etcd;
    const MapNode a = node(7111);
    EtcdLiveness lease(client(etcd), "fence", a.id, std::chrono::milliseconds(1000));
    ASSERT_TRUE(lease.start());
    ASSERT_TRUE(eventually([&] { return lease.renewals() >= 1; }));
    const Clock::time_point last_deadline = lease.deadline();
    // etcd becomes unreachable: no renewal is answered.
    etcd.stop_member(0);
    ASSERT_TRUE(eventually([&] { return !lease.held(); }, std::chrono::seconds(5)));
    EXPECT_LE(lease.deadline(), last_deadline + std::chrono::seconds(2));
    EXPECT_GE(lease.failures(), 1u);
    // Back: a new lease (the old one lapsed) and the node holds one again.
    etcd.start_member(0);
    ASSERT_TRUE(eventually([&] { return lease.held(); }, std::chrono::seconds(10)));
    std::unique_ptr<EtcdClient> reader = client(etcd);
    const core::Result<EtcdRange> key = reader->get(EtcdLiveness::alive_prefix("fence") + a.id);
    ASSERT_TRUE(key) << key.error();
    EXPECT_EQ(key->kvs.size(), 1u);
    lease.stop();
    const core::Result<EtcdRange> gone = reader->get(EtcdLiveness::alive_prefix("fence") + a.id);
    ASSERT_TRUE(gone) << gone.error();
    EXPECT_TRUE(gone->kvs.empty());  // revoked: seen down at once
}

}  // namespace
}  // namespace bloomery::cluster
