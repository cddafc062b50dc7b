// Cluster mode: key slots (Redis Cluster spec vectors), the static slot map
// and its validation, per-slot key counts, and dispatch's redirects and the
// CLUSTER commands, driven without sockets.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bloomery/app/command_line.hpp"
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

using cluster::key_slot;
using cluster::parse_topology;
using cluster::Topology;

// ---- slots ----------------------------------------------------------------

TEST(KeySlot, Crc16IsXmodemAsInTheClusterSpec) {
    // "The CRC16 of 123456789 is 0x31C3" (Redis Cluster specification).
    EXPECT_EQ(cluster::crc16("123456789"), 0x31C3);
    EXPECT_EQ(cluster::crc16(""), 0);
}

TEST(KeySlot, MatchesRedisForPlainKeys) {
    // Values Redis's CLUSTER KEYSLOT gives (its documentation's somekey,
    // and redis-py's independent implementation for the rest).
    EXPECT_EQ(key_slot("somekey"), 11058);
    EXPECT_EQ(key_slot("foo"), 12182);
    EXPECT_EQ(key_slot("bar"), 5061);
    EXPECT_EQ(key_slot("hello"), 866);
    EXPECT_EQ(key_slot(""), 0);
    EXPECT_EQ(key_slot(std::string_view("\xff\x00\x80", 3)), 7915);
}

TEST(KeySlot, HashTagsFollowTheSpecRules) {
    // Only the text inside the first {...} is hashed.
    EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
    EXPECT_EQ(key_slot("{user1000}.followers"), key_slot("user1000"));
    EXPECT_EQ(key_slot("user1000"), 3443);
    EXPECT_EQ(key_slot("foo{hash_tag}"), 2515);
    EXPECT_EQ(key_slot("somekey{hash_tag}"), 2515);
    // The first '}' after the first '{': "foo{bar}{zap}" hashes "bar".
    EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
    // An empty tag hashes the whole key: "foo{}{bar}".
    EXPECT_EQ(cluster::hash_tag("foo{}{bar}"), "foo{}{bar}");
    EXPECT_EQ(key_slot("foo{}{bar}"), 8363);
    // "foo{{bar}}zap" hashes "{bar".
    EXPECT_EQ(cluster::hash_tag("foo{{bar}}zap"), "{bar");
    EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
    // No closing brace: the whole key.
    EXPECT_EQ(cluster::hash_tag("foo{bar"), "foo{bar");
}

// ---- the map ----------------------------------------------------------------

constexpr const char* kThree = "0-5460=a:6379,5461-10922=b:6379,10923-16383=c:6379";

Topology parse_ok(std::string_view spec, std::string_view self, std::string_view host = "") {
    auto topology = parse_topology(spec, self, host);
    EXPECT_TRUE(topology) << topology.error();
    return topology ? *topology : Topology();
}

std::string parse_error(std::string_view spec, std::string_view self = "a:1",
                        std::string_view host = "") {
    const auto topology = parse_topology(spec, self, host);
    EXPECT_FALSE(topology) << spec;
    return topology ? std::string() : topology.error();
}

TEST(SlotMap, ThreePrimariesCoverEverySlot) {
    const Topology map = parse_ok(kThree, "b:6379");
    ASSERT_EQ(map.nodes().size(), 3u);
    EXPECT_EQ(map.primary_count(), 3u);
    EXPECT_EQ(map.self().address, "b:6379");
    EXPECT_EQ(map.self_index(), 1u);
    EXPECT_EQ(map.owner(0), 0u);
    EXPECT_EQ(map.owner(5460), 0u);
    EXPECT_EQ(map.owner(5461), 1u);
    EXPECT_EQ(map.owner(16383), 2u);
    ASSERT_EQ(map.ranges().size(), 3u);
    EXPECT_EQ(map.ranges()[2].first, 10923);
    EXPECT_EQ(map.ranges()[2].last, 16383);
    EXPECT_EQ(map.nodes()[2].config_epoch, 3u);
    EXPECT_EQ(map.describe(), kThree);
}

TEST(SlotMap, NodeIdsAreDeterministicFortyHexDigits) {
    const Topology one = parse_ok(kThree, "a:6379");
    const Topology other =
        parse_ok("10923-16383=c:6379, 0-5460=A:6379 ,5461-10922=b:6379", "c:6379");
    std::set<std::string> ids;
    for (std::size_t i = 0; i < 3; ++i) {
        const std::string& id = one.nodes()[i].id;
        EXPECT_EQ(id.size(), 40u);
        EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
        // Every node computes the same ids whatever the entry order or case.
        EXPECT_EQ(id, other.nodes()[i].id);
        ids.insert(id);
    }
    EXPECT_EQ(ids.size(), 3u);
    EXPECT_EQ(one.nodes()[0].id, cluster::node_id("a", 6379));
    EXPECT_NE(cluster::node_id("a", 6379), cluster::node_id("a", 6380));
}

TEST(SlotMap, SeveralRangesOfOneNodeAndAdjacentRangesMerge) {
    const Topology map = parse_ok("0-100=a:1,101-200=b:1,201-300=a:1,301-16383=a:1", "a:1");
    ASSERT_EQ(map.nodes().size(), 2u);
    ASSERT_EQ(map.ranges().size(), 3u);  // 201-300 and 301-16383 are one range
    EXPECT_EQ(map.ranges()[2].first, 201);
    EXPECT_EQ(map.ranges()[2].last, 16383);
    EXPECT_EQ(map.describe(), "0-100=a:1,101-200=b:1,201-16383=a:1");
    // Single slots are allowed.
    const Topology singles = parse_ok("0=a:1,1-16382=b:1,16383=a:1", "b:1");
    EXPECT_EQ(singles.owner(16383), 0u);
}

TEST(SlotMap, ReplicasFollowTheirPrimary) {
    const Topology map = parse_ok("0-8191=a:1|a2:1|a3:1,8192-16383=b:1|b2:1", "a2:1");
    ASSERT_EQ(map.nodes().size(), 5u);
    // Primaries first (by slot), then replicas in map order.
    EXPECT_EQ(map.nodes()[0].address, "a:1");
    EXPECT_EQ(map.nodes()[1].address, "b:1");
    EXPECT_EQ(map.nodes()[2].address, "a2:1");
    EXPECT_EQ(map.nodes()[4].address, "b2:1");
    EXPECT_FALSE(map.self().primary);
    EXPECT_EQ(map.self().primary_index, 0u);
    EXPECT_EQ(map.self().config_epoch, 1u);
    EXPECT_EQ(map.nodes()[0].replicas, (std::vector<std::size_t>{2, 3}));
    EXPECT_EQ(map.describe(), "0-8191=a:1|a2:1|a3:1,8192-16383=b:1|b2:1");
}

TEST(SlotMap, Ipv6AddressesAreBracketedInTheMap) {
    const Topology map = parse_ok("0-16383=[::1]:7000", "[::1]:7000");
    EXPECT_EQ(map.self().host, "::1");
    EXPECT_EQ(map.self().address, "::1:7000");  // as Redis writes MOVED
    EXPECT_EQ(map.describe(), "0-16383=[::1]:7000");
    EXPECT_NE(parse_error("0-16383=::1:7000").find("brackets"), std::string::npos);
}

TEST(SlotMap, AutoSelfTakesTheHostNameOrdinal) {
    const std::string spec = "0-8191=a:1|a2:1,8192-16383=b:1";
    EXPECT_EQ(parse_ok(spec, "auto", "bloomery-0").self().address, "a:1");
    EXPECT_EQ(parse_ok(spec, "auto", "bloomery-1.bloomery.default.svc").self().address, "b:1");
    EXPECT_EQ(parse_ok(spec, "auto", "my-pod-2").self().address, "a2:1");
    EXPECT_NE(parse_error(spec, "auto", "bloomery").find("does not end in -N"), std::string::npos);
    EXPECT_NE(parse_error(spec, "auto", "bloomery-x").find("does not end in -N"),
              std::string::npos);
    EXPECT_NE(parse_error(spec, "auto", "bloomery-3").find("ordinal 3 but the map has 3 nodes"),
              std::string::npos);
}

TEST(SlotMap, RefusesMapsThatDoNotCoverEverySlotOnce) {
    EXPECT_NE(parse_error("0-5460=a:1,5461-10000=b:1").find("slots 10001-16383 are not assigned"),
              std::string::npos);
    EXPECT_NE(parse_error("1-16383=a:1").find("slots 0 are not assigned"), std::string::npos);
    EXPECT_NE(parse_error("0-200=a:1,100-16383=b:1").find("slot 100 is assigned twice"),
              std::string::npos);
    EXPECT_NE(parse_error("0-16384=a:1").find("0 to 16383"), std::string::npos);
    EXPECT_NE(parse_error("100-0=a:1").find("backwards"), std::string::npos);
    EXPECT_NE(parse_error("").find("empty"), std::string::npos);
    EXPECT_NE(parse_error(" , ").find("empty"), std::string::npos);
}

TEST(SlotMap, RefusesMalformedEntries) {
    EXPECT_NE(parse_error("0-16383").find("is not RANGE=host:port"), std::string::npos);
    EXPECT_NE(parse_error("x-16383=a:1").find("not a slot"), std::string::npos);
    EXPECT_NE(parse_error("0-+16383=a:1").find("not a slot"), std::string::npos);
    EXPECT_NE(parse_error("0-16383=a").find("is not host:port"), std::string::npos);
    EXPECT_NE(parse_error("0-16383=a:0").find("port from 1 to 65535"), std::string::npos);
    EXPECT_NE(parse_error("0-16383=a:65536").find("port from 1 to 65535"), std::string::npos);
    EXPECT_NE(parse_error("0-16383=:1").find("host of 1 to 253"), std::string::npos);
    EXPECT_NE(parse_error("0-16383=a b:1").find("character"), std::string::npos);
    EXPECT_NE(parse_error("0-16383=a:1|").find("is not host:port"), std::string::npos);
    EXPECT_NE(parse_error("0-16383=a:1|A:1").find("twice"), std::string::npos);
}

TEST(SlotMap, RefusesInconsistentRoles) {
    EXPECT_NE(parse_error("0-100=a:1|b:1,101-16383=b:1").find("a primary in"), std::string::npos);
    EXPECT_NE(parse_error("0-100=b:1,101-16383=a:1|b:1").find("a primary in"), std::string::npos);
    EXPECT_NE(parse_error("0-100=a:1|r:1,101-16383=b:1|r:1").find("under two primaries"),
              std::string::npos);
    EXPECT_NE(parse_error("0-100=a:1|r:1,101-200=b:1,201-16383=a:1")
                  .find("list the same replicas in each of its ranges"),
              std::string::npos);
}

TEST(SlotMap, RefusesASelfOutsideTheMap) {
    const std::string error = parse_error(kThree, "d:6379");
    EXPECT_NE(error.find("d:6379 is not in the map"), std::string::npos) << error;
    EXPECT_NE(error.find("a:6379, b:6379, c:6379"), std::string::npos) << error;
    EXPECT_NE(parse_error(kThree, "").find("--cluster-self is needed"), std::string::npos);
    // The port matters: the same host on another port is another node.
    EXPECT_NE(parse_error(kThree, "a:6380").find("not in the map"), std::string::npos);
}

// ---- flags
// --------------------------------------------------------------------

app::CommandLine parse_flags(std::vector<std::string> words) {
    words.insert(words.begin(), "bloomery");
    std::vector<char*> argv;
    for (auto& word : words) argv.push_back(word.data());
    return app::parse_command_line(static_cast<int>(argv.size()), argv.data());
}

TEST(ClusterFlags, EnabledWithAMapAndSelf) {
    const app::CommandLine line = parse_flags(
        {"--cluster-enabled", "yes", "--cluster-slots", kThree, "--cluster-self", "c:6379"});
    ASSERT_EQ(line.exit_code, -1);
    ASSERT_TRUE(line.config.cluster_enabled);
    ASSERT_TRUE(line.config.cluster);
    EXPECT_EQ(line.config.cluster->self().address, "c:6379");
    const app::CommandLine off = parse_flags({});
    EXPECT_FALSE(off.config.cluster_enabled);
    EXPECT_FALSE(off.config.cluster);
}

TEST(ClusterFlags, ComeFromAConfigFileToo) {
    const std::string path = ::testing::TempDir() + "bloomery_cluster_test.conf";
    {
        std::ofstream file(path);
        file << "cluster-enabled = \"yes\"\ncluster-slots = \"" << kThree
             << "\"\ncluster-self = \"a:6379\"\n";
    }
    const app::CommandLine line = parse_flags({"--config", path});
    std::remove(path.c_str());
    ASSERT_EQ(line.exit_code, -1);
    ASSERT_TRUE(line.config.cluster);
    EXPECT_EQ(line.config.cluster->describe(), kThree);
    EXPECT_EQ(line.config.cluster->self().address, "a:6379");
}

TEST(ClusterFlags, AutoSelfReadsTheHostNameVariable) {
    setenv("HOSTNAME", "bloomery-2", 1);
    const app::CommandLine line = parse_flags(
        {"--cluster-enabled", "yes", "--cluster-slots", kThree, "--cluster-self", "auto"});
    unsetenv("HOSTNAME");
    ASSERT_EQ(line.exit_code, -1);
    EXPECT_EQ(line.config.cluster->self().address, "c:6379");
}

TEST(ClusterFlags, RefusesToStartOnABadOrMissingMap) {
    EXPECT_GT(parse_flags({"--cluster-enabled", "yes"}).exit_code, 0);
    EXPECT_GT(parse_flags({"--cluster-enabled", "yes", "--cluster-slots", kThree}).exit_code, 0);
    EXPECT_GT(parse_flags({"--cluster-enabled", "yes", "--cluster-slots", "0-100=a:1",
                           "--cluster-self", "a:1"})
                  .exit_code,
              0);
    // A map without cluster mode would be ignored silently.
    EXPECT_GT(parse_flags({"--cluster-slots", kThree, "--cluster-self", "a:6379"}).exit_code, 0);
    EXPECT_GT(parse_flags({"--cluster-enabled", "maybe"}).exit_code, 0);
}

// ---- per-slot key counts
// --------------------------------------------------------

bloom::FilterRef small_filter() {
    bloom::FilterOptions options;
    options.capacity = 100;
    return bloom::ScalableFilter::create(options);
}

TEST(SlotCounts, FollowCreatesDeletesRenamesAndFlushes) {
    store::Keyspace keyspace(4);
    EXPECT_EQ(keyspace.count_keys_in_slot(key_slot("{a}1")), 0u);  // off: always 0
    keyspace.enable_slot_counts();
    const std::uint16_t a = key_slot("a");
    ASSERT_EQ(key_slot("{a}1"), a);
    ASSERT_TRUE(keyspace.insert_new("{a}1", small_filter()));
    ASSERT_TRUE(keyspace.insert_new("{a}2", small_filter()));
    ASSERT_TRUE(keyspace.insert_new("b", small_filter()));
    EXPECT_FALSE(keyspace.insert_new("{a}1", small_filter()));  // exists: no change
    keyspace.put("{a}1", small_filter());                       // replaced: no change
    EXPECT_EQ(keyspace.count_keys_in_slot(a), 2u);
    EXPECT_EQ(keyspace.count_keys_in_slot(key_slot("b")), 1u);
    ASSERT_TRUE(keyspace.rename("{a}2", "b2"));
    EXPECT_EQ(keyspace.count_keys_in_slot(a), 1u);
    EXPECT_EQ(keyspace.count_keys_in_slot(key_slot("b2")), 1u);
    ASSERT_TRUE(keyspace.rename("b2", "b"));  // replaces b
    EXPECT_EQ(keyspace.count_keys_in_slot(key_slot("b2")), 0u);
    EXPECT_EQ(keyspace.count_keys_in_slot(key_slot("b")), 1u);
    ASSERT_TRUE(keyspace.erase("{a}1"));
    EXPECT_EQ(keyspace.count_keys_in_slot(a), 0u);
    keyspace.clear();
    EXPECT_EQ(keyspace.count_keys_in_slot(key_slot("b")), 0u);
}

TEST(SlotCounts, KeysInSlotStopAtTheirLimit) {
    store::Keyspace keyspace(8);
    keyspace.enable_slot_counts();
    for (int i = 0; i < 300; ++i) {
        ASSERT_TRUE(keyspace.insert_new("{t}" + std::to_string(i), small_filter()));
        ASSERT_TRUE(keyspace.insert_new("other" + std::to_string(i), small_filter()));
    }
    const std::uint16_t slot = key_slot("t");
    EXPECT_EQ(keyspace.count_keys_in_slot(slot), 300u);
    EXPECT_EQ(keyspace.keys_in_slot(slot, 10).size(), 10u);
    EXPECT_EQ(keyspace.keys_in_slot(slot, 0).size(), 0u);
    const std::vector<std::string> all = keyspace.keys_in_slot(slot, 1000);
    EXPECT_EQ(all.size(), 300u);
    for (const std::string& key : all) EXPECT_EQ(key.rfind("{t}", 0), 0u) << key;
    // An expired key is not listed (lookups cannot see it either).
    ASSERT_TRUE(keyspace.set_expiry("{t}0", store::now_ms() - 1));
    EXPECT_EQ(keyspace.keys_in_slot(slot, 1000).size(), 299u);
}

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

TEST_F(ClusterCommands, AskingLetsExactlyTheNextCommandThrough) {
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
    EXPECT_THAT(run({"CLUSTER", "MEET", "a", "1"}),
                IsError(StartsWith("ERR unknown subcommand 'MEET'")));
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
