// The shifter of expiring filters (store/age_shifter.hpp): count windows
// shifted when adds fill a generation, time windows by a clock the test
// controls, a server back from a long outage catching up in one step, and
// every shift recorded so that replay gives back the same filter.

#include "bloomery/store/age_shifter.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "journal_test_support.hpp"

namespace bloomery::persist {
namespace {

using namespace bloomery::persist::journal_testing;  // the journal tests' helpers
using bloom::AgeFilter;
using store::AgeShifter;
using store::Keyspace;

AgeFilter& reserve(Keyspace& keyspace, const std::string& key, std::uint64_t items,
                   std::uint64_t window_ms, std::uint64_t now_ms) {
    const std::optional<bloom::AgeGeometry> geometry = bloom::age_geometry(0.01, items, window_ms);
    EXPECT_TRUE(geometry);
    bloom::AgeFilterRef filter = AgeFilter::create(*geometry, 0, now_ms);
    filter->set_id(bloom::ScalableFilter::next_id());
    AgeFilter& held = *filter;
    EXPECT_TRUE(keyspace.insert_new(key, std::move(filter)));
    return held;
}

// BF.MADD as the server will run it: a full generation wakes the shifter.
void add(Keyspace& keyspace, AgeShifter& shifter, AgeFilter& filter, const std::string& key,
         const std::vector<std::string>& items) {
    const std::vector<std::string_view> views(items.begin(), items.end());
    std::vector<Keyspace::AgeAdded> results;
    bool full = false;
    ASSERT_TRUE(keyspace.add_age_items(key, views, results, full));
    if (full) shifter.wake(filter);
}

TEST(AgeShifter, CountWindowsShiftAsAddsFillThemAndReplayExactly) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::no);
    AgeShifter shifter(live.keyspace, [] { return std::uint64_t{1}; });
    shifter.start();
    // Generations of 3,449 items: a few ms of adds each, longer than a
    // shift takes to come.
    AgeFilter& filter = reserve(live.keyspace, "w", 300'000, 0, 0);
    std::vector<std::thread> adders;
    for (int t = 0; t < 2; ++t) {
        adders.emplace_back([&, t] {
            // Until the ring has gone round (bounded), however the shifter
            // is scheduled.
            for (int batch = 0; batch < 200'000 && filter.generation() <= filter.slices();
                 ++batch) {
                std::vector<std::string> items;
                for (int i = 0; i < 20; ++i) {
                    items.push_back(std::to_string(t) + "/" + std::to_string(batch * 20 + i));
                }
                add(live.keyspace, shifter, filter, "w", items);
            }
        });
    }
    for (std::thread& a : adders) a.join();
    for (int i = 0; i < 2000 && filter.shift_wanted(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    shifter.stop();
    // Late shifts only ever add items to a generation.
    const std::uint64_t g = filter.geometry().generation_items;
    ASSERT_GT(filter.generation(), filter.slices());
    for (std::uint64_t L = filter.generation() - filter.geometry().shape.l; L < filter.generation();
         ++L) {
        EXPECT_GE(filter.generation_count(L), g) << "generation " << L << " shifted early";
    }
    expect_journal_gives_back(dir, live);
}

TEST(AgeShifter, TimeWindowsShiftOnScheduleByTheClock) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::no);
    std::atomic<std::uint64_t> now{1'000'000};
    AgeShifter shifter(live.keyspace, [&] { return now.load(); });
    // A window of 87 s: l = 87 generations of one second.
    AgeFilter& filter = reserve(live.keyspace, "t", 10'000, 87'000, now.load());
    ASSERT_EQ(filter.geometry().generation_ms(), 1'000u);
    shifter.track(filter);
    std::vector<std::string> early;
    for (int i = 0; i < 50; ++i) early.push_back("early" + std::to_string(i));
    add(live.keyspace, shifter, filter, "t", early);
    const auto found = [&] {
        int n = 0;
        for (const std::string& item : early) n += filter.contains(bloom::hash_item(item)) ? 1 : 0;
        return n;
    };
    EXPECT_EQ(shifter.run_due(), 0u);
    EXPECT_EQ(shifter.next_due_in(5'000), 1'000u);
    now += 3'500;
    EXPECT_EQ(shifter.run_due(), 3u);
    EXPECT_EQ(filter.generation(), 3u);
    EXPECT_EQ(filter.shifted_ms(), 1'003'000u) << "the time it was due, not the time it ran";
    EXPECT_EQ(shifter.next_due_in(5'000), 500u);
    // Added in generation 0: found through generation 87 (the window),
    // faded (but for false positives) well after 87 + 12.
    now += 84'000;
    shifter.run_due();
    EXPECT_EQ(filter.generation(), 87u);
    EXPECT_EQ(found(), 50);
    now += 40'000;
    shifter.run_due();
    EXPECT_EQ(filter.generation(), 127u);
    EXPECT_LE(found(), 4);
    expect_journal_gives_back(dir, live);
}

// A server down for longer than the window: at start, each time window is
// brought to the clock in one step, every slice cleared, and recorded.
TEST(AgeShifter, AfterALongOutageTimeWindowsCatchUpInOneStep) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::no);
    std::atomic<std::uint64_t> now{5'000};
    AgeShifter shifter(live.keyspace, [&] { return now.load(); });
    AgeFilter& filter = reserve(live.keyspace, "t", 10'000, 87'000, now.load());
    shifter.track(filter);
    add(live.keyspace, shifter, filter, "t", {"a", "b", "c"});
    now += 10 * 87'000 + 250;  // ten windows and a quarter of a generation
    EXPECT_EQ(shifter.catch_up(), 1u);
    EXPECT_EQ(filter.generation(), 870u);
    EXPECT_EQ(filter.shifted_ms(), 5'000u + 870'000u);
    EXPECT_EQ(filter.items(), 0u);
    for (std::uint64_t w = 0; w < filter.num_words(); ++w) ASSERT_EQ(filter.load_word(w), 0u);
    EXPECT_EQ(shifter.catch_up(), 0u);
    expect_journal_gives_back(dir, live);
}

// Count windows are not tracked; a time window no one else holds any more
// (its key deleted) is let go.
TEST(AgeShifter, OnlyHeldTimeWindowsAreWatched) {
    Keyspace keyspace(8);
    std::atomic<std::uint64_t> now{0};
    AgeShifter shifter(keyspace, [&] { return now.load(); });
    AgeFilter& counted = reserve(keyspace, "c", 1'000, 0, 0);
    shifter.track(counted);
    EXPECT_EQ(shifter.next_due_in(777), 777u);
    bloom::AgeFilterRef timed = AgeFilter::create(*bloom::age_geometry(0.01, 1'000, 87'000), 0, 0);
    shifter.track(*timed);
    shifter.track(*timed);
    EXPECT_EQ(shifter.next_due_in(5'000), 1'000u);
    timed = bloom::AgeFilterRef();
    now += 5'000;
    EXPECT_EQ(shifter.run_due(), 0u);
    EXPECT_EQ(shifter.next_due_in(777), 777u);
}

}  // namespace
}  // namespace bloomery::persist
