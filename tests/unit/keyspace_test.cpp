// The sharded keyspace: lookups, expiry, rename, and concurrent use.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
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
    std::set<std::string> live;
    for (int i = 0; i < 100; ++i) {
        live.insert("key" + std::to_string(i));
        keyspace.put("key" + std::to_string(i), make_filter(10));
    }
    // Live keys with a deadline, keys whose deadline has long passed, and
    // keys whose deadline passes while the test waits.
    for (int i = 0; i < 10; ++i) {
        live.insert("later" + std::to_string(i));
        keyspace.put("later" + std::to_string(i), make_filter(10), now_ms() + 3600'000);
        keyspace.put("past" + std::to_string(i), make_filter(10), now_ms() - 1000);
    }
    const std::int64_t soon = now_ms() + 20;
    for (int i = 0; i < 10; ++i) keyspace.put("soon" + std::to_string(i), make_filter(10), soon);
    while (now_ms() <= soon) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // Overwriting keys must not leave a second entry behind.
    for (int i = 0; i < 100; i += 7) keyspace.put("key" + std::to_string(i), make_filter(20));

    std::vector<std::string> listed;
    for (std::size_t s = 0; s < keyspace.num_shards(); ++s) {
        for (const auto& entry : keyspace.shard_entries(s)) {
            listed.push_back(entry.key);
            EXPECT_TRUE(entry.filter) << entry.key;
        }
    }
    const std::set<std::string> unique(listed.begin(), listed.end());
    EXPECT_EQ(unique.size(), listed.size()) << "a key was listed twice";
    EXPECT_EQ(unique, live) << "expired keys listed, or live keys missing";
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

// Lock-free lookups validate against the shard's version: a key that is
// never removed is always found, even while a writer in the same (only)
// shard deletes and re-inserts the keys around it. Stable keys are inserted
// after the others, so many sit displaced behind them in probe runs, and
// every delete in front of one shifts it back a slot: a lookup that did not
// check the version would see the hole and miss it.
TEST(Keyspace, LockFreeLookupsNeverMissAStableKeyWhileTheShardChanges) {
    Keyspace keyspace(1);
    std::vector<std::string> churn;
    for (int i = 0; i < 3000; ++i) churn.push_back("churn:" + std::to_string(i));
    const FilterRef shared = make_filter(10);
    for (const std::string& key : churn) keyspace.put(key, shared);
    constexpr int kStable = 64;
    std::vector<std::string> stable;
    for (int i = 0; i < kStable; ++i) stable.push_back("stable:" + std::to_string(i));
    for (const std::string& key : stable) keyspace.put(key, make_filter());
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> misses{0};
    std::atomic<std::uint64_t> lookups{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
        readers.emplace_back([&, r] {
            std::uint64_t i = static_cast<std::uint64_t>(r);
            while (!done.load(std::memory_order_relaxed)) {
                if (!keyspace.with_filter(stable[i++ % kStable],
                                          [](const bloom::ScalableFilter&) {})) {
                    misses.fetch_add(1);
                }
                lookups.fetch_add(1, std::memory_order_relaxed);
            }
        });
    }
    while (lookups.load() == 0) std::this_thread::yield();
    // Bounded three ways: enough lookups, a round cap, and 5 s of wall time
    // (sanitizer builds run many times slower).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (int round = 0; round < 1000 && (round < 2 || lookups.load() < 20000000) &&
                        std::chrono::steady_clock::now() < deadline;
         ++round) {
        for (const std::string& key : churn) {
            keyspace.erase(key);
            keyspace.put(key, shared);
        }
    }
    done.store(true);
    for (auto& reader : readers) reader.join();
    EXPECT_EQ(misses.load(), 0u);
    EXPECT_EQ(keyspace.size(), churn.size() + kStable);
}

// A node (and its filter) unlinked while a lookup may still be reading it is
// freed only after that lookup leaves its epoch guard.
TEST(Keyspace, UnlinkedFiltersWaitForReadersInsideAGuard) {
    Keyspace keyspace(4);
    keyspace.put("k", make_filter());
    keyspace.reclaim();
    ASSERT_EQ(keyspace.pending_reclaim(), 0u);
    std::atomic<int> stage{0};
    std::thread reader([&] {
        EpochGuard guard;
        ASSERT_TRUE(guard.active());
        stage.store(1);
        while (stage.load() != 2) std::this_thread::yield();
    });
    while (stage.load() != 1) std::this_thread::yield();
    EXPECT_TRUE(keyspace.erase("k"));
    EXPECT_EQ(keyspace.pending_reclaim(), 1u);  // the reader entered before the unlink
    keyspace.reclaim();
    EXPECT_EQ(keyspace.pending_reclaim(), 1u);
    stage.store(2);
    reader.join();
    keyspace.reclaim();
    EXPECT_EQ(keyspace.pending_reclaim(), 0u);
}

// A guard entered after the unlink does not hold the unlinked object back:
// once the older reader leaves, the object is freed although a later reader
// is still inside its guard.
TEST(Keyspace, ReadersThatEnterAfterAnUnlinkDoNotDelayIt) {
    Keyspace keyspace(4);
    keyspace.put("k", make_filter());
    std::atomic<int> older_stage{0};
    std::atomic<int> later_stage{0};
    std::thread older([&] {
        EpochGuard guard;
        older_stage.store(1);
        while (older_stage.load() != 2) std::this_thread::yield();
    });
    while (older_stage.load() != 1) std::this_thread::yield();
    EXPECT_TRUE(keyspace.erase("k"));
    EXPECT_EQ(keyspace.pending_reclaim(), 1u);  // the older reader holds it
    std::thread later([&] {
        EpochGuard guard;
        later_stage.store(1);
        while (later_stage.load() != 2) std::this_thread::yield();
    });
    while (later_stage.load() != 1) std::this_thread::yield();
    older_stage.store(2);
    older.join();
    keyspace.reclaim();
    EXPECT_EQ(keyspace.pending_reclaim(), 0u);  // the later reader does not
    later_stage.store(2);
    later.join();
}

// More threads than epoch slots: the ones without a slot take the shard's
// lock, and every lookup still answers right.
TEST(Keyspace, ThreadsBeyondTheEpochSlotsFallBackToTheLock) {
    Keyspace keyspace(4);
    keyspace.put("k", make_filter());
    constexpr std::size_t kThreads = kEpochSlots + 16;
    std::atomic<std::size_t> found{0};
    std::atomic<std::size_t> inactive{0};
    std::atomic<std::size_t> arrived{0};
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
            {
                EpochGuard probe;  // claims this thread's slot, if any is left
                if (!probe.active()) inactive.fetch_add(1);
            }
            // Every thread stays alive (holding its slot) until all have run.
            arrived.fetch_add(1);
            while (arrived.load() < kThreads) std::this_thread::yield();
            if (keyspace.with_filter("k", [](const bloom::ScalableFilter&) {})) found.fetch_add(1);
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(found.load(), kThreads);
    EXPECT_GE(inactive.load(), 16u);
}

// Every node and table is charged while held and uncharged when freed, also
// when freeing waits for readers: after FLUSHALL nothing is left.
TEST(Keyspace, MemoryChargedForNodesAndTablesReturnsToZero) {
    Keyspace keyspace(4);
    EXPECT_EQ(keyspace.overhead_bytes(), 0u);
    for (int i = 0; i < 1000; ++i) keyspace.put("key:" + std::to_string(i), make_filter());
    EXPECT_GT(keyspace.overhead_bytes(), 1000u * 24);
    for (int i = 0; i < 500; ++i) keyspace.erase("key:" + std::to_string(i));
    keyspace.rename("key:700", "renamed");
    {
        EpochGuard reading;  // an unlinked table waits for this guard
        EXPECT_EQ(keyspace.clear(), 500u);
        EXPECT_GT(keyspace.overhead_bytes(), 0u);
        EXPECT_GT(keyspace.pending_reclaim(), 0u);
    }
    keyspace.reclaim();
    EXPECT_EQ(keyspace.pending_reclaim(), 0u);
    EXPECT_EQ(keyspace.overhead_bytes(), 0u);
}

}  // namespace
}  // namespace bloomery::store
