// The keyspace's transactions: the shards a transaction holds, what other
// threads see while it runs, and WATCH's stamps.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "keyspace_test_support.hpp"

namespace bloomery::store {
namespace {

using keyspace_testing::kNoLimits;
using keyspace_testing::make_filter;

// Runs `access` on another thread and reports whether it finished within
// `patience` (it is left to finish on its own when it did not).
template <class Access>
bool finishes_within(Access access, std::chrono::milliseconds patience, std::thread& thread,
                     std::atomic<bool>& done) {
    thread = std::thread([access, &done] {
        access();
        done.store(true);
    });
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (!done.load() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return done.load();
}

TEST(KeyspaceTransaction, OtherThreadsWaitForItAndSeeAllOfIt) {
    // Every kind of access to a shard a transaction holds waits until it
    // ends, then sees every change it made.
    const std::vector<std::pair<const char*, std::function<void(Keyspace&)>>> accesses = {
        {"lookup", [](Keyspace& k) { k.with_filter("a", [](bloom::ScalableFilter&) {}); }},
        {"contains", [](Keyspace& k) { k.contains("a"); }},
        {"erase", [](Keyspace& k) { k.erase("a"); }},
        {"insert", [](Keyspace& k) { k.insert_new("a", make_filter()); }},
        {"expiry", [](Keyspace& k) { k.set_expiry("a", 0); }},
        {"rename", [](Keyspace& k) { k.rename("a", "elsewhere"); }},
        {"view", [](Keyspace& k) { k.view(store::ViewFor::keys); }},
        {"clear", [](Keyspace& k) { k.clear(); }},
        {"scan",
         [](Keyspace& k) {
             std::vector<std::string> keys;
             for (std::uint64_t c = k.scan(0, 100, keys); c != 0; c = k.scan(c, 100, keys)) {
             }
         }},
        {"shard entries",
         [](Keyspace& k) {
             for (std::size_t s = 0; s < k.num_shards(); ++s) k.shard_entries(s);
         }},
    };
    for (const auto& [name, access] : accesses) {
        SCOPED_TRACE(name);
        Keyspace keyspace(4);
        ASSERT_TRUE(keyspace.insert_new("a", make_filter()));
        const std::string key = "a";
        const std::vector<std::string_view> keys{key};
        Keyspace::Transaction transaction = keyspace.begin_transaction(keys);
        // The holder itself goes on using its shards.
        std::vector<bloom::AddResult> results;
        const std::string_view item = "x";
        ASSERT_TRUE(keyspace.add_items("a", std::span(&item, 1), kNoLimits, nullptr, results));
        std::thread thread;
        std::atomic<bool> done{false};
        const auto run = access;
        EXPECT_FALSE(finishes_within([&keyspace, run] { run(keyspace); },
                                     std::chrono::milliseconds(50), thread, done));
        EXPECT_TRUE(keyspace.get("a").has_value());
        transaction.end();
        thread.join();
        EXPECT_TRUE(done.load());
    }
}

TEST(KeyspaceTransaction, KeysOfOtherShardsAreNotHeld) {
    Keyspace keyspace(64);
    // Two keys in different shards.
    std::string held_key = "k0", free_key;
    ASSERT_TRUE(keyspace.insert_new(held_key, make_filter()));
    const std::vector<std::string_view> keys{held_key};
    for (int i = 1; free_key.empty(); ++i) {
        const std::string candidate = "k" + std::to_string(i);
        ASSERT_TRUE(keyspace.insert_new(candidate, make_filter()));
        Keyspace::Transaction probe = keyspace.begin_transaction(keys);
        std::thread thread;
        std::atomic<bool> done{false};
        if (finishes_within([&keyspace, candidate] { keyspace.contains(candidate); },
                            std::chrono::milliseconds(1000), thread, done)) {
            free_key = candidate;
        }
        probe.end();
        thread.join();
    }
    EXPECT_FALSE(free_key.empty());
}

TEST(KeyspaceTransaction, TransactionsOnOverlappingShardsRunOneAfterTheOther) {
    Keyspace keyspace(8);
    ASSERT_TRUE(keyspace.insert_new("a", make_filter(100000)));
    ASSERT_TRUE(keyspace.insert_new("b", make_filter(100000)));
    // Each transaction adds one item to both filters; a reader in a
    // transaction of its own must always find the same count in both.
    constexpr int kThreads = 4, kRounds = 200;
    std::atomic<bool> stop{false};
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    const std::string a = "a", b = "b";
    const std::vector<std::string_view> keys{a, b};
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kRounds; ++i) {
                Keyspace::Transaction transaction = keyspace.begin_transaction(keys);
                const std::string item = std::to_string(t) + "-" + std::to_string(i);
                const std::string_view view = item;
                std::vector<bloom::AddResult> results;
                keyspace.add_items("a", std::span(&view, 1), kNoLimits, nullptr, results);
                keyspace.add_items("b", std::span(&view, 1), kNoLimits, nullptr, results);
            }
        });
    }
    std::thread reader([&] {
        while (!stop.load()) {
            Keyspace::Transaction transaction = keyspace.begin_transaction(keys);
            if (keyspace.get("a")->value.filter().items() !=
                keyspace.get("b")->value.filter().items()) {
                mismatches.fetch_add(1);
            }
        }
    });
    // Outside any transaction, lookups wait for them, never seeing half.
    std::thread outsider([&] {
        while (!stop.load()) {
            std::uint64_t in_a = 0;
            keyspace.with_filter("a", [&](bloom::ScalableFilter& f) { in_a = f.items(); });
            (void)in_a;
        }
    });
    for (std::thread& thread : threads) thread.join();
    stop.store(true);
    reader.join();
    outsider.join();
    EXPECT_EQ(mismatches.load(), 0);
    EXPECT_EQ(keyspace.get("a")->value.filter().items(), std::uint64_t{kThreads * kRounds});
    EXPECT_EQ(keyspace.get("b")->value.filter().items(), std::uint64_t{kThreads * kRounds});
}

TEST(KeyspaceTransaction, WatchStampsChangeWithWhatAClientCouldSee) {
    Keyspace keyspace(4);
    const auto add = [&](std::string_view item) {
        std::vector<bloom::AddResult> results;
        const std::function<FilterRef()> make = [] { return make_filter(); };
        keyspace.add_items("k", std::span(&item, 1), kNoLimits, &make, results);
        return results.front();
    };
    const Keyspace::WatchStamp absent = keyspace.watch_stamp("k");
    EXPECT_FALSE(absent.exists);
    add("x");
    const Keyspace::WatchStamp first = keyspace.watch_stamp("k");
    EXPECT_TRUE(first.exists);
    EXPECT_NE(first, absent);
    EXPECT_EQ(add("x"), bloom::AddResult::exists);
    EXPECT_EQ(keyspace.watch_stamp("k"), first);  // nothing changed
    add("y");
    const Keyspace::WatchStamp second = keyspace.watch_stamp("k");
    EXPECT_NE(second, first);
    ASSERT_TRUE(keyspace.set_expiry("k", now_ms() + 100000));
    const Keyspace::WatchStamp third = keyspace.watch_stamp("k");
    EXPECT_NE(third, second);
    ASSERT_TRUE(keyspace.erase("k"));
    EXPECT_EQ(keyspace.watch_stamp("k"), absent);
    add("x");
    add("y");
    // Created again: same items, another filter.
    EXPECT_NE(keyspace.watch_stamp("k"), second);
}

}  // namespace
}  // namespace bloomery::store
