// Cluster mode through dispatch: redirects, ASKING and the CLUSTER commands
// on a static three-node map, driven without sockets.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "bloomery/cluster/cluster_map.hpp"
#include "bloomery/cluster/topology.hpp"
#include "bloomery/command/acl.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/key_slot.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/store/keyspace.hpp"
#include "fake_hooks.hpp"
#include "resp_matchers.hpp"

namespace bloomery {
namespace {
constexpr const char* kThree = "0-5460=a:6379,5461-10922=b:6379,10923-16383=c:6379";
using cluster::key_slot;
}  // namespace

// ---- dispatch
// -----------------------------------------------------------------

namespace command {
namespace {

using testing::FakeHooks;
using namespace resp::testing;  // the reply matchers
using ::testing::Contains;
using ::testing::EndsWith;
using ::testing::SizeIs;
using ::testing::StartsWith;

// This node is b of kThree, serving slots 5461-10922. Keys used below:
// "c" 7365 (b's), "foo" 12182 and "a" 15495 (c's), "b" 3300 and
// "{user1000}..." 3443 (a's).
class ClusterCommands : public ::testing::Test {
protected:
    void SetUp() override {
        const auto built = build_default_registry(registry);
        ASSERT_TRUE(built) << built.error();
        use_map(kThree, "b:6379");
        keyspace.enable_slot_counts();
    }
    void use_map(std::string_view spec, std::string_view self) {
        auto topology = cluster::parse_topology(spec, self, "");
        ASSERT_TRUE(topology) << topology.error();
        config.cluster_enabled = true;
        config.cluster = std::make_shared<const cluster::Topology>(std::move(*topology));
        // What CONFIG GET shows, as the command line sets it once the map
        // is resolved (CommandLine.ClusterMapIsShownAsItDescribesItself).
        config.cluster_slots = config.cluster->describe();
        config.cluster_self = config.cluster->self().address;
        hooks.cluster.publish(cluster::ClusterMap::from_topology(*config.cluster));
    }
    std::string run(std::vector<std::string> words) {
        std::vector<std::string_view> argv(words.begin(), words.end());
        out.clear();
        DispatchContext ctx{registry, keyspace, config, settings, hooks, client, stats, writer};
        dispatch(registry, ctx, argv);
        return out;
    }

    Registry registry;
    store::Keyspace keyspace{4};
    core::Config config;
    core::RuntimeSettings settings{config};
    FakeHooks hooks;
    ClientState client;
    WorkerStats stats;
    std::string out;
    resp::Writer writer{out};
};

TEST_F(ClusterCommands, KeysOfThisNodesSlotsAreServed) {
    // "c" hashes to 7365, in b's 5461-10922.
    ASSERT_EQ(key_slot("c"), 7365);
    EXPECT_THAT(run({"BF.ADD", "c", "x"}), IsInt(1));
    EXPECT_THAT(run({"BF.EXISTS", "c", "x"}), IsInt(1));
    EXPECT_THAT(run({"BF.MADD", "c", "y", "z"}), IsArray(IsInt(1), IsInt(1)));
    EXPECT_THAT(run({"TYPE", "c"}), IsSimple("MBbloom--"));
    EXPECT_THAT(run({"EXPIRE", "c", "100"}), IsInt(1));
    EXPECT_THAT(run({"CLUSTER", "COUNTKEYSINSLOT", "7365"}), IsInt(1));
    EXPECT_THAT(run({"CLUSTER", "GETKEYSINSLOT", "7365", "10"}), IsArray(IsBulk("c")));
    EXPECT_THAT(run({"DEL", "c"}), IsInt(1));
    EXPECT_THAT(run({"CLUSTER", "COUNTKEYSINSLOT", "7365"}), IsInt(0));
}

TEST_F(ClusterCommands, KeysOfOtherNodesAnswerMoved) {
    EXPECT_THAT(run({"BF.ADD", "foo", "x"}), IsError("MOVED 12182 c:6379"));
    EXPECT_THAT(run({"BF.EXISTS", "foo", "x"}), IsError("MOVED 12182 c:6379"));
    EXPECT_THAT(run({"bf.info", "b"}), IsError("MOVED 3300 a:6379"));
    EXPECT_THAT(run({"DEL", "b"}), IsError("MOVED 3300 a:6379"));
    EXPECT_THAT(run({"TTL", "{user1000}.following"}), IsError("MOVED 3443 a:6379"));
    EXPECT_THAT(run({"RENAME", "{x}1", "{x}2"}), IsError(StartsWith("MOVED ")));
    // Nothing was created here.
    EXPECT_THAT(run({"DBSIZE"}), IsInt(0));
}

TEST_F(ClusterCommands, KeysInSeveralSlotsAnswerCrossslot) {
    const auto crossslot = IsError("CROSSSLOT Keys in request don't hash to the same slot");
    // Both of b's slots: still refused, as Redis does.
    ASSERT_NE(key_slot("c"), key_slot("bar{c2}"));
    EXPECT_THAT(run({"EXISTS", "c", "foo"}), crossslot);
    EXPECT_THAT(run({"DEL", "c", "a", "b"}), crossslot);
    EXPECT_THAT(run({"RENAME", "c", "foo"}), crossslot);
    // One hash tag: one slot, served here.
    EXPECT_THAT(run({"BF.ADD", "{c}1", "x"}), IsInt(1));
    EXPECT_THAT(run({"EXISTS", "{c}1", "{c}2", "c"}), IsInt(1));
    EXPECT_THAT(run({"RENAME", "{c}1", "{c}2"}), IsOk());
    EXPECT_THAT(run({"DEL", "{c}1", "{c}2"}), IsInt(1));
}

TEST_F(ClusterCommands, KeylessCommandsAreNeverRedirected) {
    EXPECT_THAT(run({"PING"}), IsSimple("PONG"));
    EXPECT_THAT(run({"DBSIZE"}), IsInt(0));
    EXPECT_THAT(run({"KEYS", "*"}), IsArray());
    EXPECT_THAT(run({"SCAN", "0"}), IsArray(IsBulk("0"), IsArray()));
    EXPECT_THAT(run({"CLUSTER", "KEYSLOT", "foo"}), IsInt(12182));
    EXPECT_THAT(run({"COMMAND", "GETKEYS", "BF.ADD", "foo", "x"}), IsArray(IsBulk("foo")));
}

TEST_F(ClusterCommands, ReplicaServesReadsAfterReadonlyOnly) {
    use_map("0-8191=a:1|a2:1,8192-16383=b:1", "a2:1");
    // "b" is slot 3300, a's: a replica of a redirects until READONLY.
    EXPECT_THAT(run({"BF.EXISTS", "b", "x"}), IsError("MOVED 3300 a:1"));
    EXPECT_THAT(run({"READONLY"}), IsOk());
    EXPECT_THAT(run({"BF.EXISTS", "b", "x"}), IsInt(0));
    EXPECT_THAT(run({"BF.CARD", "b"}), IsInt(0));
    EXPECT_THAT(run({"EXISTS", "b"}), IsInt(0));
    // Writes still go to the primary, and b's slots are b's.
    EXPECT_THAT(run({"BF.ADD", "b", "x"}), IsError("MOVED 3300 a:1"));
    EXPECT_THAT(run({"DEL", "b"}), IsError("MOVED 3300 a:1"));
    EXPECT_THAT(run({"BF.EXISTS", "foo", "x"}), IsError("MOVED 12182 b:1"));
    EXPECT_THAT(run({"READWRITE"}), IsOk());
    EXPECT_THAT(run({"BF.EXISTS", "b", "x"}), IsError("MOVED 3300 a:1"));
}

TEST_F(ClusterCommands, ReadonlyOnAPrimaryChangesNothing) {
    EXPECT_THAT(run({"READONLY"}), IsOk());
    EXPECT_THAT(run({"BF.EXISTS", "foo", "x"}), IsError("MOVED 12182 c:6379"));
}

TEST_F(ClusterCommands, AskingLetsExactlyTheNextCommandThroughForAnImportingSlot) {
    EXPECT_THAT(run({"ASKING"}), IsOk());
    EXPECT_THAT(run({"BF.ADD", "foo", "x"}), IsError("MOVED 12182 c:6379"));  // not importing
    const std::string c_id = cluster::node_id("c", 6379);
    EXPECT_THAT(run({"CLUSTER", "SETSLOT", "12182", "IMPORTING", c_id}), IsOk());
    EXPECT_THAT(run({"ASKING"}), IsOk());
    EXPECT_THAT(run({"BF.ADD", "foo", "x"}), IsInt(1));
    EXPECT_THAT(run({"BF.ADD", "foo", "y"}), IsError("MOVED 12182 c:6379"));
    EXPECT_THAT(run({"ASKING"}), IsOk());
    EXPECT_THAT(run({"PING"}), IsSimple("PONG"));  // any command uses it up
    EXPECT_THAT(run({"BF.EXISTS", "foo", "x"}), IsError("MOVED 12182 c:6379"));
    EXPECT_THAT(run({"CLUSTER", "COUNTKEYSINSLOT", "12182"}), IsInt(1));
}

TEST_F(ClusterCommands, AuthComesBeforeRedirectsAndRedirectsBeforeMemory) {
    auto acl = Acl::build(registry, "secret", "", "");
    ASSERT_TRUE(acl) << acl.error();
    registry.set_acl(*acl);
    EXPECT_THAT(run({"BF.ADD", "foo", "x"}), IsError("NOAUTH Authentication required."));
    EXPECT_THAT(run({"AUTH", "secret"}), IsOk());
    config.maxmemory = 1;  // exceeded: a write here would answer -OOM
    EXPECT_THAT(run({"BF.ADD", "foo", "x"}), IsError("MOVED 12182 c:6379"));
    EXPECT_THAT(run({"BF.ADD", "c", "x"}), IsError(StartsWith("OOM ")));
    hooks.snapshot_failed = true;
    config.maxmemory = 0;
    EXPECT_THAT(run({"BF.ADD", "foo", "x"}), IsError("MOVED 12182 c:6379"));
    EXPECT_THAT(run({"BF.ADD", "c", "x"}), IsError(StartsWith("MISCONF ")));
}

TEST_F(ClusterCommands, ClusterSlotsListsRangesWithIds) {
    use_map("0-8191=a:1|a2:2,8192-16383=b:1", "b:1");
    const std::string a = cluster::node_id("a", 1);
    const std::string a2 = cluster::node_id("a2", 2);
    const std::string b = cluster::node_id("b", 1);
    EXPECT_THAT(
        run({"CLUSTER", "SLOTS"}),
        IsArray(IsArray(IsInt(0), IsInt(8191), IsArray(IsBulk("a"), IsInt(1), IsBulk(a), IsArray()),
                        IsArray(IsBulk("a2"), IsInt(2), IsBulk(a2), IsArray())),
                IsArray(IsInt(8192), IsInt(16383),
                        IsArray(IsBulk("b"), IsInt(1), IsBulk(b), IsArray()))));
}

TEST_F(ClusterCommands, ClusterNodesLinesDescribeEveryNode) {
    use_map("0-100=a:1|r:1,101-200=b:1,201-16383=a:1|r:1", "r:1");
    const RespValue reply = decode_reply(run({"CLUSTER", "NODES"}));
    const std::string a = cluster::node_id("a", 1);
    const std::string b = cluster::node_id("b", 1);
    const std::string r = cluster::node_id("r", 1);
    // A bulk string (RESP2), lines ending in "\n".
    ASSERT_THAT(reply, IsBulk(EndsWith("\n")));
    const std::string& text = reply.text;
    std::vector<std::string> lines;
    for (std::size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1) {
        lines.push_back(text.substr(at, end - at));
    }
    ASSERT_EQ(lines.size(), 3u) << text;
    EXPECT_EQ(lines[0].rfind(a + " a:1@10001 master - 0 ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(" 1 connected 0-100 201-16383"), std::string::npos) << lines[0];
    EXPECT_EQ(lines[1].rfind(b + " b:1@10001 master - 0 ", 0), 0u) << lines[1];
    EXPECT_NE(lines[1].find(" 2 connected 101-200"), std::string::npos) << lines[1];
    EXPECT_EQ(lines[2], r + " r:1@10001 myself,slave " + a + " 0 0 1 connected");
}

TEST_F(ClusterCommands, ClusterShardsGroupsRangesByPrimary) {
    use_map("0-100=a:1|r:1,101-200=b:1,201-16383=a:1|r:1", "a:1");
    const RespValue shards = decode_reply(run({"CLUSTER", "SHARDS"}));
    // Two shards; a's with its two ranges and two nodes, b's with one each.
    ASSERT_THAT(shards, IsArray(IsArray(IsBulk("slots"),
                                        IsArray(IsInt(0), IsInt(100), IsInt(201), IsInt(16383)),
                                        IsBulk("nodes"), IsArrayThat(SizeIs(2))),
                                IsArray(IsBulk("slots"), IsArray(IsInt(101), IsInt(200)),
                                        IsBulk("nodes"), IsArrayThat(SizeIs(1)))));
    const RespValue& a_nodes = shards.elements[0].elements[3];
    EXPECT_THAT(a_nodes.elements[0], IsArrayThat(SizeIs(16)));
    EXPECT_THAT(a_nodes.elements[0].elements[0], IsBulk("id"));
    EXPECT_THAT(a_nodes, IsArrayThat(Contains(HasEntry(IsBulk("role"), IsBulk("replica")))));
    // A name, not an IP.
    EXPECT_THAT(a_nodes, IsArrayThat(Contains(HasEntry(IsBulk("hostname"), IsBulk("r")))));
    EXPECT_THAT(a_nodes, IsArrayThat(Contains(HasEntry(IsBulk("health"), IsBulk("online")))));
}

TEST_F(ClusterCommands, ClusterInfoMyidAndKeyslotAnswerAsRedis) {
    const std::string info = run({"CLUSTER", "INFO"});
    EXPECT_NE(info.find("cluster_state:ok\r\n"), std::string::npos) << info;
    EXPECT_NE(info.find("cluster_slots_assigned:16384\r\n"), std::string::npos);
    EXPECT_NE(info.find("cluster_slots_ok:16384\r\n"), std::string::npos);
    EXPECT_NE(info.find("cluster_known_nodes:3\r\n"), std::string::npos);
    EXPECT_NE(info.find("cluster_size:3\r\n"), std::string::npos);
    EXPECT_NE(info.find("cluster_current_epoch:3\r\n"), std::string::npos);
    EXPECT_NE(info.find("cluster_my_epoch:2\r\n"), std::string::npos);
    EXPECT_THAT(run({"CLUSTER", "MYID"}), IsBulk(cluster::node_id("b", 6379)));
    EXPECT_THAT(run({"CLUSTER", "KEYSLOT", "{user1000}.following"}), IsInt(3443));
    EXPECT_THAT(run({"cluster", "keyslot", "foo{}{bar}"}), IsInt(8363));
    EXPECT_NE(run({"INFO", "cluster"}).find("cluster_enabled:1\r\n"), std::string::npos);
    EXPECT_NE(run({"INFO", "server"}).find("redis_mode:cluster\r\n"), std::string::npos);
    EXPECT_THAT(run({"HELLO", "3"}), HasEntry(IsBulk("mode"), IsBulk("cluster")));
}

TEST_F(ClusterCommands, SlotArgumentsAreChecked) {
    EXPECT_THAT(run({"CLUSTER", "COUNTKEYSINSLOT", "16384"}), IsError("ERR Invalid slot"));
    EXPECT_THAT(run({"CLUSTER", "COUNTKEYSINSLOT", "-1"}), IsError("ERR Invalid slot"));
    EXPECT_THAT(run({"CLUSTER", "COUNTKEYSINSLOT", "x"}),
                IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"CLUSTER", "GETKEYSINSLOT", "0", "-1"}),
                IsError("ERR Invalid slot or number of keys"));
    EXPECT_THAT(run({"CLUSTER", "GETKEYSINSLOT", "16384", "1"}),
                IsError("ERR Invalid slot or number of keys"));
    EXPECT_THAT(run({"CLUSTER", "GETKEYSINSLOT", "1", "y"}),
                IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"CLUSTER", "KEYSLOT"}),
                IsError("ERR wrong number of arguments for 'cluster|keyslot' command"));
    // Nodes meet through the map's store; a static map has none.
    EXPECT_THAT(run({"CLUSTER", "MEET", "a", "1"}),
                IsError(StartsWith("ERR this node serves the static map of --cluster-slots")));
    EXPECT_THAT(run({"CLUSTER", "MEET", "a", "x"}), IsError("ERR Invalid base port specified: x"));
}

TEST_F(ClusterCommands, GetkeysinslotIsBoundedByItsCount) {
    for (int i = 0; i < 50; ++i) {
        ASSERT_THAT(run({"BF.ADD", "{c}" + std::to_string(i), "x"}), IsInt(1));
    }
    EXPECT_THAT(run({"CLUSTER", "COUNTKEYSINSLOT", "7365"}), IsInt(50));
    EXPECT_THAT(run({"CLUSTER", "GETKEYSINSLOT", "7365", "7"}), IsArrayThat(SizeIs(7)));
    EXPECT_THAT(run({"CLUSTER", "GETKEYSINSLOT", "7365", "0"}), IsArray());
    EXPECT_THAT(run({"CLUSTER", "GETKEYSINSLOT", "7365", "1000"}), IsArrayThat(SizeIs(50)));
    EXPECT_THAT(run({"CLUSTER", "GETKEYSINSLOT", "7366", "1000"}), IsArray());
}

TEST_F(ClusterCommands, WithoutClusterModeEverythingIsServedAndClusterIsRefused) {
    config.cluster_enabled = false;
    config.cluster.reset();
    const auto disabled = IsError("ERR This instance has cluster support disabled");
    EXPECT_THAT(run({"BF.ADD", "foo", "x"}), IsInt(1));
    EXPECT_THAT(run({"EXISTS", "foo", "b", "c"}), IsInt(1));
    EXPECT_THAT(run({"CLUSTER", "SLOTS"}), disabled);
    EXPECT_THAT(run({"CLUSTER", "INFO"}), disabled);
    EXPECT_THAT(run({"CLUSTER", "KEYSLOT", "foo"}), disabled);
    EXPECT_THAT(run({"READONLY"}), disabled);
    EXPECT_THAT(run({"READWRITE"}), disabled);
    EXPECT_THAT(run({"ASKING"}), disabled);
    EXPECT_NE(run({"INFO"}).find("# Cluster\r\ncluster_enabled:0\r\n"), std::string::npos);
    EXPECT_THAT(run({"CONFIG", "GET", "cluster-enabled"}),
                IsArray(IsBulk("cluster-enabled"), IsBulk("no")));
}

TEST_F(ClusterCommands, ConfigGetShowsTheCanonicalMapAndSelf) {
    const std::string reply = run({"CONFIG", "GET", "cluster-*"});
    EXPECT_THAT(reply, HasEntry(IsBulk("cluster-enabled"), IsBulk("yes")));
    EXPECT_THAT(reply, HasEntry(IsBulk("cluster-slots"), IsBulk(kThree)));
    EXPECT_THAT(reply, HasEntry(IsBulk("cluster-self"), IsBulk("b:6379")));
}

}  // namespace
}  // namespace command
}  // namespace bloomery
