// Cluster mode: key slots (Redis Cluster spec vectors), the static slot map
// and its validation, the cluster flags, and per-slot key counts
// (cluster_commands_test.cpp drives the commands).

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
#include "bloomery/core/config.hpp"
#include "bloomery/core/key_slot.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/store/keyspace.hpp"

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
}  // namespace bloomery
