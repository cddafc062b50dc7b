// The sharded keyspace: lookups, expiry, rename, and concurrent use.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "bloomery/store/keyspace.hpp"

namespace bloomery::store {
namespace {

FilterRef make_filter(std::uint64_t capacity = 1000) {
    bloom::FilterOptions options;
    options.capacity = capacity;
    return bloom::ScalableFilter::create(options);
}

constexpr bloom::GrowthLimits kNoLimits{};

TEST(Keyspace, InsertNewRefusesAnExistingKeyAndPutReplaces) {
    Keyspace keyspace(4);
    EXPECT_TRUE(keyspace.insert_new("k", make_filter()));
    EXPECT_FALSE(keyspace.insert_new("k", make_filter()));
    EXPECT_TRUE(keyspace.contains("k"));
    keyspace.put("k", make_filter(5));
    EXPECT_EQ(keyspace.get("k")->filter->capacity(), 5u);
    EXPECT_EQ(keyspace.size(), 1u);
    EXPECT_TRUE(keyspace.erase("k"));
    EXPECT_FALSE(keyspace.erase("k"));
    EXPECT_EQ(keyspace.size(), 0u);
}

TEST(Keyspace, ExpiredKeysAreDeletedOnAccessOrByTheCycle) {
    Keyspace keyspace(4);
    keyspace.put("old", make_filter(), now_ms() - 1);
    keyspace.put("untouched", make_filter(), now_ms() - 1);
    keyspace.put("new", make_filter(), now_ms() + 60000);
    EXPECT_EQ(keyspace.size(), 1u);  // expired keys are not counted
    EXPECT_FALSE(keyspace.with_filter("old", [](bloom::ScalableFilter&) {}));
    EXPECT_EQ(keyspace.expired_keys(), 1u);  // the lookup deleted it
    EXPECT_FALSE(keyspace.contains("old"));
    EXPECT_FALSE(keyspace.expiry("old").has_value());
    EXPECT_TRUE(keyspace.contains("new"));
    EXPECT_EQ(keyspace.active_expire_cycle(), 1u);  // "untouched"
    EXPECT_EQ(keyspace.expired_keys(), 2u);
    EXPECT_EQ(keyspace.size(), 1u);
    // An expired key can be created again.
    keyspace.put("old", make_filter(), now_ms() - 1);
    EXPECT_TRUE(keyspace.insert_new("old", make_filter()));
    EXPECT_EQ(*keyspace.expiry("old"), 0);
}

TEST(Keyspace, SetExpiryInThePastDeletesAndZeroPersists) {
    Keyspace keyspace(4);
    keyspace.put("k", make_filter());
    EXPECT_TRUE(keyspace.set_expiry("k", now_ms() + 1000));
    EXPECT_GT(*keyspace.expiry("k"), 0);
    EXPECT_TRUE(keyspace.set_expiry("k", 0));
    EXPECT_EQ(*keyspace.expiry("k"), 0);
    EXPECT_TRUE(keyspace.set_expiry("k", 1));
    EXPECT_FALSE(keyspace.contains("k"));
    EXPECT_FALSE(keyspace.set_expiry("missing", 0));
}

TEST(Keyspace, RenameMovesTheFilterAndItsExpiryAcrossShards) {
    Keyspace keyspace(16);
    FilterRef filter = make_filter();
    filter->add("x", kNoLimits);
    const std::int64_t deadline = now_ms() + 60000;
    keyspace.put("from", filter, deadline);
    keyspace.put("to", make_filter());
    EXPECT_TRUE(keyspace.rename("from", "to"));
    EXPECT_FALSE(keyspace.contains("from"));
    EXPECT_EQ(keyspace.get("to")->filter.get(), filter.get());
    EXPECT_EQ(*keyspace.expiry("to"), deadline);
    EXPECT_FALSE(keyspace.rename("from", "to"));
    EXPECT_TRUE(keyspace.rename("to", "to"));
}

TEST(Keyspace, ShardEntriesListEveryLiveKeyOnce) {
    Keyspace keyspace(8);
    for (int i = 0; i < 100; ++i) keyspace.put("key" + std::to_string(i), make_filter(10));
    std::size_t total = 0;
    for (std::size_t s = 0; s < keyspace.num_shards(); ++s)
        total += keyspace.shard_entries(s).size();
    EXPECT_EQ(total, 100u);
}

TEST(Keyspace, ConcurrentCreateAddDeleteKeepsNoFalseNegatives) {
    Keyspace keyspace(8);
    constexpr int kThreads = 4;
    constexpr int kItems = 2000;
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            const std::string key = "shared";
            for (int i = 0; i < kItems; ++i) {
                const std::string item = std::to_string(t) + ":" + std::to_string(i);
                keyspace.with_filter_or_create(
                    key, [] { return make_filter(500); },
                    [&](bloom::ScalableFilter& filter) { filter.add(item, kNoLimits); });
            }
        });
    }
    // A churner creates and deletes other keys meanwhile.
    std::thread churn([&] {
        for (int i = 0; !stop.load(); ++i) {
            const std::string key = "tmp" + std::to_string(i % 16);
            keyspace.insert_new(key, make_filter(10));
            keyspace.erase(key);
            keyspace.rename("tmp" + std::to_string((i + 1) % 16), "tmp" + std::to_string(i % 7));
        }
    });
    for (auto& thread : threads) thread.join();
    stop = true;
    churn.join();
    bool all_present = true;
    ASSERT_TRUE(keyspace.with_filter("shared", [&](bloom::ScalableFilter& filter) {
        for (int t = 0; t < kThreads; ++t) {
            for (int i = 0; i < kItems; ++i) {
                all_present &= filter.contains(std::to_string(t) + ":" + std::to_string(i));
            }
        }
    }));
    EXPECT_TRUE(all_present);
}

}  // namespace
}  // namespace bloomery::store
