// The sharded keyspace: lookups, expiry, rename, scans, and concurrent use
// (its transactions: keyspace_transaction_test.cpp).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "keyspace_test_support.hpp"

namespace bloomery::store {
namespace {

using keyspace_testing::kNoLimits;
using keyspace_testing::make_filter;

TEST(Keyspace, InsertNewRefusesAnExistingKeyAndPutReplaces) {
    Keyspace keyspace(4);
    EXPECT_TRUE(keyspace.insert_new("k", make_filter()));
    EXPECT_FALSE(keyspace.insert_new("k", make_filter()));
    EXPECT_TRUE(keyspace.contains("k"));
    keyspace.put("k", make_filter(5));
    EXPECT_EQ(keyspace.get("k")->value.filter().capacity(), 5u);
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
    // Counted as Redis's DBSIZE counts: until a lookup or the cycle erases
    // them (counts are kept as keys are linked and unlinked, not by looking).
    EXPECT_EQ(keyspace.size(), 3u);
    EXPECT_EQ(keyspace.counts().with_expiry, 3u);
    EXPECT_FALSE(keyspace.with_filter("old", [](bloom::ScalableFilter&) {}));
    EXPECT_EQ(keyspace.size(), 2u);
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

TEST(Keyspace, LoadChunkSaysWhetherItLoadedAndWhyNot) {
    Keyspace keyspace(4);
    FilterRef source = make_filter();
    source->add("x", kNoLimits);
    const core::Result<FilterRef> decoded = bloom::decode_header(bloom::encode_header(*source), 0);
    ASSERT_TRUE(decoded) << decoded.error();
    const FilterRef target = *decoded;
    ASSERT_TRUE(keyspace.insert_new("k", target));
    const bloom::DumpChunk chunk = bloom::dump_chunk(*source, 1);
    ASSERT_NE(chunk.next_iter, 0);
    const auto missing = keyspace.load_chunk("absent", chunk.next_iter, chunk.data);
    ASSERT_TRUE(missing) << missing.error();
    EXPECT_EQ(*missing, Keyspace::ChunkStatus::missing);
    // Refused with the reason, and nothing of it set.
    const auto refused =
        keyspace.load_chunk("k", chunk.next_iter, std::string_view(chunk.data).substr(1));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error(), "invalid chunk length");
    EXPECT_FALSE(target->contains("x"));
    const auto loaded = keyspace.load_chunk("k", chunk.next_iter, chunk.data);
    ASSERT_TRUE(loaded) << loaded.error();
    EXPECT_EQ(*loaded, Keyspace::ChunkStatus::loaded);
    EXPECT_TRUE(target->contains("x"));
}

// Adds redone from records (replay, a replica's stream) count their items
// once, as live adds do.
TEST(Keyspace, RedoneAddsCountTheirItemsOnce) {
    Keyspace keyspace(4);
    FilterRef filter = make_filter();
    ASSERT_TRUE(keyspace.insert_new("k", filter));
    const Keyspace::RecordedAdd adds[] = {{0, {1, 2}}, {0, {3, 4}}, {0, {5, 6}}};
    ASSERT_TRUE(keyspace.redo_adds(*filter, adds));
    EXPECT_EQ(filter->items(), 3u);
    EXPECT_EQ(keyspace.counts().items, 3u);
    ASSERT_TRUE(keyspace.erase("k"));
    EXPECT_EQ(keyspace.counts().items, 0u);
}

TEST(Keyspace, AKeyIsGoneOnceTheClockReachesItsDeadline) {
    ManualClock clock;
    Keyspace keyspace(4);
    keyspace.put("k", make_filter(), clock.now() + 1000);
    clock.advance(std::chrono::milliseconds(999));
    EXPECT_TRUE(keyspace.contains("k"));
    EXPECT_EQ(*keyspace.expiry("k"), clock.now() + 1);
    clock.advance(std::chrono::milliseconds(1));
    EXPECT_FALSE(keyspace.contains("k"));
    EXPECT_EQ(keyspace.expired_keys(), 1u);
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
    EXPECT_EQ(keyspace.get("to")->value.bloom_or_null(), filter.get());
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
    // keys whose deadline passes as the clock moves on.
    for (int i = 0; i < 10; ++i) {
        live.insert("later" + std::to_string(i));
        keyspace.put("later" + std::to_string(i), make_filter(10), now_ms() + 3600'000);
        keyspace.put("past" + std::to_string(i), make_filter(10), now_ms() - 1000);
    }
    ManualClock clock;
    for (int i = 0; i < 10; ++i) {
        keyspace.put("soon" + std::to_string(i), make_filter(10), clock.now() + 20);
    }
    clock.advance(std::chrono::milliseconds(21));
    // Overwriting keys must not leave a second entry behind.
    for (int i = 0; i < 100; i += 7) keyspace.put("key" + std::to_string(i), make_filter(20));

    std::vector<std::string> listed;
    for (std::size_t s = 0; s < keyspace.num_shards(); ++s) {
        for (const auto& entry : keyspace.shard_entries(s)) {
            listed.push_back(entry.key);
            EXPECT_TRUE(entry.value) << entry.key;
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

// What counts() and average_ttl_ms() keep as keys come and go must equal
// what walking every key finds, after any mix of operations.
TEST(Keyspace, CountsKeptAsKeysComeAndGoEqualAWalkOfTheKeys) {
    Keyspace keyspace(8);
    std::mt19937 rng(11);
    const std::int64_t far = now_ms() + 3600'000;
    for (int step = 0; step < 20000; ++step) {
        const std::string key = "k" + std::to_string(rng() % 500);
        const std::string other = "k" + std::to_string(rng() % 500);
        switch (rng() % 9) {
            case 0:
                keyspace.put(key, make_filter(10));
                break;
            case 1:
                keyspace.put(key, make_filter(10), far + static_cast<std::int64_t>(rng() % 1000));
                break;
            case 2:
                keyspace.erase(key);
                break;
            case 3:
                keyspace.rename(key, other);
                break;
            case 4:
                keyspace.set_expiry(key, far + static_cast<std::int64_t>(rng() % 100000));
                break;
            case 5:
                keyspace.set_expiry(key, 0);
                break;
            case 6: {
                std::vector<bloom::AddResult> results;
                const std::string item = "i" + std::to_string(rng() % 50);
                const std::string_view items[] = {item, "x"};
                keyspace.add_items(key, items, kNoLimits, nullptr, results);
                break;
            }
            case 7:
                keyspace.insert_new(key, make_filter(10));
                break;
            default:
                if (rng() % 200 == 0) keyspace.clear();
                break;
        }
        if (step % 997 != 0) continue;
        std::size_t keys = 0, with_expiry = 0;
        std::uint64_t items = 0;
        Int128 deadlines = 0;
        for (std::size_t s = 0; s < keyspace.num_shards(); ++s) {
            for (const auto& entry : keyspace.shard_entries(s)) {
                ++keys;
                items += entry.value.filter().items();
                if (entry.expire_at_ms != 0) {
                    ++with_expiry;
                    deadlines += entry.expire_at_ms;
                }
            }
        }
        const Keyspace::Counts counts = keyspace.counts();
        ASSERT_EQ(counts.keys, keys) << "step " << step;
        ASSERT_EQ(counts.with_expiry, with_expiry) << "step " << step;
        ASSERT_EQ(counts.items, items) << "step " << step;
        if (with_expiry > 0) {
            const auto expected = static_cast<std::int64_t>(deadlines / with_expiry) - now_ms();
            EXPECT_NEAR(static_cast<double>(keyspace.average_ttl_ms()),
                        static_cast<double>(expected), 1000.0);
        } else {
            EXPECT_EQ(keyspace.average_ttl_ms(), 0);
        }
    }
}

// Renaming a key with a deadline onto another with one, alone in its
// shard's ExpirySet: the set must not shrink away the room reserved for
// the moved key.
TEST(Keyspace, RenameOntoAKeyWithADeadlineKeepsBothCounted) {
    for (int i = 0; i < 64; ++i) {
        Keyspace keyspace(64);
        const std::int64_t later = now_ms() + 3600'000;
        const std::string from = "from" + std::to_string(i), to = "to" + std::to_string(i);
        keyspace.put(to, make_filter(1), later);
        keyspace.put(from, make_filter(1), later + 1);
        ASSERT_TRUE(keyspace.rename(from, to));
        EXPECT_EQ(*keyspace.expiry(to), later + 1);
        EXPECT_EQ(keyspace.counts().keys, 1u);
        EXPECT_EQ(keyspace.counts().with_expiry, 1u);
        EXPECT_TRUE(keyspace.set_expiry(to, 0));
        EXPECT_EQ(keyspace.counts().with_expiry, 0u);
    }
}

// Active expiry samples only keys with a deadline: a keyspace with many
// keys and none expiring costs it nothing, and expired keys among them go
// within a few rounds, each with the DEL a lookup would have made.
TEST(Keyspace, ActiveExpiryErasesExpiredKeysWithinAFewRounds) {
    Keyspace keyspace(4);
    for (int i = 0; i < 20000; ++i) keyspace.put("plain" + std::to_string(i), make_filter(1));
    EXPECT_EQ(keyspace.active_expire_cycle(), 0u);
    for (int i = 0; i < 3000; ++i) {
        keyspace.put("gone" + std::to_string(i), make_filter(1), now_ms() - 1);
    }
    for (int i = 0; i < 300; ++i) {
        keyspace.put("later" + std::to_string(i), make_filter(1), now_ms() + 3600'000);
    }
    EXPECT_EQ(keyspace.counts().with_expiry, 3300u);
    std::size_t erased = 0;
    int rounds = 0;
    // A round samples a shard again while a tenth of its sample expired,
    // so once the expired keys are few they may wait for later rounds: the
    // first rounds take nearly all.
    for (; rounds < 3; ++rounds) erased += keyspace.active_expire_cycle(std::chrono::seconds(10));
    EXPECT_GE(erased, 2700u);
    while (erased < 3000 && rounds < 1000) {
        erased += keyspace.active_expire_cycle(std::chrono::seconds(10));
        ++rounds;
    }
    EXPECT_EQ(erased, 3000u);
    EXPECT_EQ(keyspace.expired_keys(), 3000u);
    EXPECT_EQ(keyspace.size(), 20300u);
    EXPECT_EQ(keyspace.counts().with_expiry, 300u);
}

// A round stops once its budget is spent, and the next resumes with the
// shards it had not reached.
TEST(Keyspace, ActiveExpiryStopsAtItsBudgetAndResumes) {
    Keyspace keyspace(16);
    for (int i = 0; i < 4000; ++i) {
        keyspace.put("gone" + std::to_string(i), make_filter(1), now_ms() - 1);
    }
    // A zero budget still samples one shard per round.
    const std::size_t first = keyspace.active_expire_cycle(std::chrono::microseconds(0));
    EXPECT_GT(first, 0u);
    EXPECT_LT(first, 4000u);
    std::size_t erased = first;
    for (int round = 0; round < 5000 && erased < 4000; ++round) {
        erased += keyspace.active_expire_cycle(std::chrono::microseconds(0));
    }
    EXPECT_EQ(erased, 4000u);
    EXPECT_EQ(keyspace.size(), 0u);
}

// Redis's SCAN guarantee: a key present for the whole scan is returned at
// least once, even while tables grow and shrink between calls; each call
// does bounded work.
TEST(Keyspace, ScanReturnsEveryStableKeyAcrossResizes) {
    Keyspace keyspace(4);
    std::set<std::string> stable;
    for (int i = 0; i < 5000; ++i) {
        stable.insert("stable" + std::to_string(i));
        keyspace.put("stable" + std::to_string(i), make_filter(1));
    }
    std::set<std::string> seen;
    std::uint64_t cursor = 0;
    int calls = 0;
    do {
        std::vector<std::string> keys;
        cursor = keyspace.scan(cursor, 10, keys);
        // At most COUNT keys, plus the rest of the last bucket looked at.
        EXPECT_LE(keys.size(), 10u + 8u);
        seen.insert(keys.begin(), keys.end());
        ++calls;
        // Grow every table eightfold, then shrink it back, mid-scan.
        if (calls == 100) {
            for (int i = 0; i < 40000; ++i)
                keyspace.put("churn" + std::to_string(i), make_filter(1));
        }
        if (calls == 300) {
            for (int i = 0; i < 40000; ++i) keyspace.erase("churn" + std::to_string(i));
        }
    } while (cursor != 0 && calls < 100000);
    EXPECT_EQ(cursor, 0u);
    for (const std::string& key : stable) EXPECT_TRUE(seen.count(key)) << key;
}

// With few keys among many buckets, a call may return nothing with a
// cursor that is not 0; the scan still ends, after a bounded number of
// calls.
TEST(Keyspace, ScanWorkIsBoundedByCount) {
    Keyspace keyspace(64);
    for (int i = 0; i < 100000; ++i) keyspace.put("k" + std::to_string(i), make_filter(1));
    for (int i = 0; i < 99990; ++i) keyspace.erase("k" + std::to_string(i));
    std::set<std::string> seen;
    std::uint64_t cursor = 0;
    int calls = 0, empty_calls = 0;
    do {
        std::vector<std::string> keys;
        cursor = keyspace.scan(cursor, 1, keys);
        EXPECT_LE(keys.size(), 1u + 8u);
        if (keys.empty() && cursor != 0) ++empty_calls;
        seen.insert(keys.begin(), keys.end());
        ++calls;
    } while (cursor != 0 && calls < 1000000);
    EXPECT_EQ(cursor, 0u);
    EXPECT_EQ(seen.size(), 10u);
    EXPECT_GT(empty_calls, 0);
    // A cursor naming a shard that does not exist ends the scan.
    Keyspace five(5);  // three bits of the cursor name the shard
    five.put("k", make_filter(1));
    std::vector<std::string> keys;
    EXPECT_EQ(five.scan(7, 10, keys), 0u);
    EXPECT_TRUE(keys.empty());
}

}  // namespace
}  // namespace bloomery::store
