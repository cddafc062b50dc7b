// EtcdClient against a real single etcd member: keys, transactions, leases.

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "bloomery/cluster/etcd.hpp"
#include "etcd_test_cluster.hpp"

namespace bloomery::cluster {
namespace {

using testing::EtcdTestCluster;
using namespace std::chrono_literals;

using testing::make_client;

TEST(EtcdClient, PutsGetsListsAPrefixAndErases) {
    EtcdTestCluster etcd;
    auto client = make_client(etcd.settings());
    auto first = client->put("/bloomery/slots/1", "node-a");
    ASSERT_TRUE(first) << first.error();
    ASSERT_TRUE(client->put("/bloomery/slots/2", std::string("node\0b\xff", 7)));
    ASSERT_TRUE(client->put("/bloomery/slotz", "outside"));

    auto one = client->get("/bloomery/slots/1");
    ASSERT_TRUE(one) << one.error();
    ASSERT_EQ(one->kvs.size(), 1u);
    EXPECT_EQ(one->kvs[0].value, "node-a");
    EXPECT_EQ(one->kvs[0].version, 1);
    EXPECT_EQ(one->kvs[0].mod_revision, *first);
    EXPECT_EQ(one->kvs[0].create_revision, *first);
    EXPECT_GE(one->revision, *first);

    auto listed = client->get_prefix("/bloomery/slots/");
    ASSERT_TRUE(listed) << listed.error();
    ASSERT_EQ(listed->kvs.size(), 2u);
    EXPECT_EQ(listed->kvs[0].key, "/bloomery/slots/1");
    EXPECT_EQ(listed->kvs[1].value, std::string("node\0b\xff", 7));

    auto erased = client->erase("/bloomery/slots/1");
    ASSERT_TRUE(erased) << erased.error();
    EXPECT_EQ(*erased, 1);
    EXPECT_EQ(*client->erase("/bloomery/slots/1"), 0);
    auto gone = client->get("/bloomery/slots/1");
    ASSERT_TRUE(gone);
    EXPECT_TRUE(gone->kvs.empty());
    EXPECT_EQ(client->get_prefix("")->kvs.size(), 2u);  // every key
}

// The client keeps its connection between calls; when etcd restarts, the
// next call connects again instead of failing on the old connection.
TEST(EtcdClient, ReconnectsAfterTheMemberRestarts) {
    EtcdTestCluster etcd;
    auto client = make_client(etcd.settings());
    ASSERT_TRUE(client->put("/restart/key", "v"));
    etcd.stop_member(0);
    auto down = client->get("/restart/key");
    ASSERT_FALSE(down);
    EXPECT_NE(down.error().find(etcd.endpoints()[0]), std::string::npos) << down.error();
    etcd.start_member(0);
    auto up = client->get("/restart/key");
    ASSERT_TRUE(up) << up.error();
    EXPECT_EQ(up->kvs.at(0).value, "v");
    // And again with the connection of that call kept alive, etcd restarted.
    etcd.stop_member(0);
    etcd.start_member(0);
    auto again = client->get("/restart/key");
    ASSERT_TRUE(again) << again.error();
}

// Two writers read the same mod_revision and race to swap: exactly one wins,
// the other's compare fails and its failure branch reads the winner's value.
TEST(EtcdClient, CompareAndSwapOnModRevisionHasExactlyOneWinner) {
    EtcdTestCluster etcd;
    auto writer_a = make_client(etcd.settings());
    auto writer_b = make_client(etcd.settings());
    ASSERT_TRUE(writer_a->put("/leader", "none"));
    const std::int64_t seen = writer_a->get("/leader")->kvs.at(0).mod_revision;
    ASSERT_EQ(writer_b->get("/leader")->kvs.at(0).mod_revision, seen);

    auto swap = [seen](EtcdClient& client, std::string me) {
        EtcdTxn txn;
        txn.compares.push_back(
            {"/leader", EtcdCompare::Target::mod_revision, EtcdCompare::Op::equal, seen, {}});
        txn.success.push_back(EtcdOp::put("/leader", me));
        txn.failure.push_back(EtcdOp::get("/leader"));
        return client.txn(txn);
    };
    core::Result<EtcdTxnResult> result_a = core::Error{"not run"},
                                result_b = core::Error{"not run"};
    std::thread racer([&] { result_b = swap(*writer_b, "b"); });
    result_a = swap(*writer_a, "a");
    racer.join();
    ASSERT_TRUE(result_a) << result_a.error();
    ASSERT_TRUE(result_b) << result_b.error();
    ASSERT_NE(result_a->succeeded, result_b->succeeded);
    const auto& loser = result_a->succeeded ? *result_b : *result_a;
    const std::string winner = result_a->succeeded ? "a" : "b";
    ASSERT_EQ(loser.ranges.size(), 1u);
    ASSERT_EQ(loser.ranges[0].kvs.size(), 1u);
    EXPECT_EQ(loser.ranges[0].kvs[0].value, winner);
    EXPECT_EQ(writer_a->get("/leader")->kvs.at(0).value, winner);
}

TEST(EtcdClient, TransactionComparesEveryTargetAndRunsTheOpsOfItsBranch) {
    EtcdTestCluster etcd;
    auto client = make_client(etcd.settings());
    ASSERT_TRUE(client->put("/t/a", "1"));
    ASSERT_TRUE(client->put("/t/b", "2"));
    EtcdTxn txn;
    using T = EtcdCompare::Target;
    using Op = EtcdCompare::Op;
    txn.compares = {{"/t/a", T::value, Op::equal, 0, "1"},
                    {"/t/a", T::version, Op::greater, 0, {}},
                    {"/t/a", T::create_revision, Op::less, 1000, {}},
                    {"/t/a", T::lease, Op::equal, 0, {}},
                    {"/t/missing", T::version, Op::equal, 0, {}},
                    {"/t/b", T::value, Op::not_equal, 0, "1"}};
    txn.success = {EtcdOp::get_prefix("/t/"), EtcdOp::erase_prefix("/t/"), EtcdOp::put("/u/c", "3"),
                   EtcdOp::get("/u/c")};
    auto result = client->txn(txn);
    ASSERT_TRUE(result) << result.error();
    EXPECT_TRUE(result->succeeded);
    ASSERT_EQ(result->ranges.size(), 2u);
    EXPECT_EQ(result->ranges[0].kvs.size(), 2u);
    ASSERT_EQ(result->ranges[1].kvs.size(), 1u);
    EXPECT_EQ(result->ranges[1].kvs[0].value, "3");
    EXPECT_TRUE(client->get_prefix("/t/")->kvs.empty());

    EtcdTxn failing;
    failing.compares = {{"/u/c", T::value, Op::equal, 0, "other"}};
    failing.success = {EtcdOp::erase("/u/c")};
    failing.failure = {EtcdOp::put("/u/d", "4")};
    auto failed = client->txn(failing);
    ASSERT_TRUE(failed) << failed.error();
    EXPECT_FALSE(failed->succeeded);
    EXPECT_EQ(client->get_prefix("/u/")->kvs.size(), 2u);
}

// A key on a lease lives as long as the lease is kept alive and vanishes on
// its own once keep-alives stop.
TEST(EtcdClient, LeasedKeyVanishesWithoutKeepAliveAndStaysWithIt) {
    EtcdTestCluster etcd;
    auto client = make_client(etcd.settings());
    auto lapsing = client->grant(1);
    auto kept = client->grant(1);
    ASSERT_TRUE(lapsing) << lapsing.error();
    ASSERT_TRUE(kept) << kept.error();
    EXPECT_GE(lapsing->ttl_seconds, 1);
    ASSERT_TRUE(client->put("/lease/lapsing", "x", lapsing->id));
    ASSERT_TRUE(client->put("/lease/kept", "y", kept->id));
    EXPECT_EQ(client->get("/lease/kept")->kvs.at(0).lease, kept->id);

    const auto deadline = std::chrono::steady_clock::now() + 15s;
    bool vanished = false;
    while (!vanished && std::chrono::steady_clock::now() < deadline) {
        auto ttl = client->keep_alive(kept->id);
        ASSERT_TRUE(ttl) << ttl.error();
        EXPECT_GT(*ttl, 0);
        vanished = client->get("/lease/lapsing")->kvs.empty();
        std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(vanished) << "the key of a lease without keep-alives did not vanish";
    EXPECT_EQ(client->get("/lease/kept")->kvs.size(), 1u);
    auto lapsed = client->keep_alive(lapsing->id);
    ASSERT_TRUE(lapsed) << lapsed.error();
    EXPECT_EQ(*lapsed, 0);

    ASSERT_TRUE(client->revoke(kept->id));
    EXPECT_TRUE(client->get("/lease/kept")->kvs.empty());
    auto again = client->revoke(kept->id);
    ASSERT_FALSE(again);
    EXPECT_NE(again.error().find("lease not found"), std::string::npos) << again.error();
}

}  // namespace
}  // namespace bloomery::cluster
