// Counting filters in the journal and snapshots: their changes do not
// commute (saturating counters, deletes that need the item present), so
// each change's records reach the stream before the next change to the
// filter, replay redoes them in the order they took effect, and a snapshot
// holds the filter as it was at its cut (store/snapshot_counts.hpp).

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/journal_reader.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "journal_test_support.hpp"

namespace bloomery::persist {
namespace {

using namespace bloomery::persist::journal_testing;  // the journal tests' helpers
using bloom::RemoveResult;
using store::Keyspace;

// A counting filter of `capacity` that grows: adds land in several layers.
FilterOptions counting_options(std::uint64_t capacity) {
    FilterOptions options = small_options(capacity);
    options.layout = bloom::Layout::counting;
    return options;
}

std::vector<RemoveResult> remove_items(Keyspace& keyspace, const std::string& key,
                                       const std::vector<std::string>& items) {
    const std::vector<std::string_view> views(items.begin(), items.end());
    std::vector<RemoveResult> results;
    EXPECT_EQ(keyspace.remove_items(key, views, results), std::optional<bool>(true));
    return results;
}

TEST(CountingJournal, AChangesRecordsAreInTheStreamWhenItReturns) {
    // everysec: a plain filter's adds wait in the thread's buffer; a counting
    // filter's reach the stream before the call returns, so a later change
    // by another thread is behind them.
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    ASSERT_TRUE(live.keyspace.insert_new("c", ScalableFilter::create(counting_options(100))));
    for (int i = 0; i < 20; ++i) {
        std::thread([&, i] {
            const std::uint64_t before = live.journal.appended();
            add_items(live.keyspace, "c", {"item" + std::to_string(i)});
            EXPECT_GT(live.journal.appended(), before) << "the add stayed in its thread's buffer";
            const std::uint64_t between = live.journal.appended();
            EXPECT_EQ(remove_items(live.keyspace, "c", {"item" + std::to_string(i)}),
                      std::vector<RemoveResult>{RemoveResult::removed});
            EXPECT_GT(live.journal.appended(), between) << "the delete stayed in the buffer";
        }).join();
    }
    live.close();
    Keyspace replayed(8);
    replay_into(dir, replayed);
    expect_exact_replay(live.keyspace, replayed);
}

// Threads adding and deleting items of a small pool on two counting
// filters: counters reach 15, deletes meet other threads' adds.
void race_adds_and_deletes(Keyspace& keyspace, int threads, int rounds) {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            unsigned state = 2654435761u * static_cast<unsigned>(t + 1);
            for (int i = 0; i < rounds; ++i) {
                state = state * 1103515245u + 12345u;
                const std::string key = (state >> 8) % 2 == 0 ? "a" : "b";
                std::vector<std::string> items;
                for (unsigned j = 0; j < 1 + (state >> 12) % 8; ++j) {
                    items.push_back("i" + std::to_string((state >> (j + 4)) % 60));
                }
                if ((state >> 20) % 2 == 0) {
                    add_items(keyspace, key, items, counting_options(50));
                } else {
                    remove_items(keyspace, key, items);
                }
            }
        });
    }
    for (auto& worker : workers) worker.join();
}

TEST(CountingJournal, AddsAndDeletesRacingOnThreadsReplayExactly) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    ASSERT_TRUE(live.keyspace.insert_new("a", ScalableFilter::create(counting_options(50))));
    ASSERT_TRUE(live.keyspace.insert_new("b", ScalableFilter::create(counting_options(50))));
    race_adds_and_deletes(live.keyspace, 4, 3000);
    live.close();
    EXPECT_GT(live.keyspace.get("a")->value.filter().num_layers(), 1u);
    Keyspace replayed(8);
    replay_into(dir, replayed);
    expect_exact_replay(live.keyspace, replayed);
}

// Every word of every layer, and the item counts.
std::vector<std::uint64_t> contents(const ScalableFilter& filter) {
    std::vector<std::uint64_t> out;
    for (std::size_t l = 0; l < filter.num_layers(); ++l) {
        const bloom::BloomLayer& layer = filter.layer(l);
        out.push_back(layer.items());
        for (std::uint64_t w = 0; w < layer.num_words(); ++w) out.push_back(layer.load_word(w));
    }
    return out;
}

TEST(CountingJournal, AViewHoldsTheCountingFilterAsItWasAtItsCut) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    ASSERT_TRUE(live.keyspace.insert_new("a", ScalableFilter::create(counting_options(50))));
    for (int i = 0; i < 40; ++i) add_items(live.keyspace, "a", {"x" + std::to_string(i % 10)});
    const std::vector<std::uint64_t> at_cut = contents(live.keyspace.get("a")->value.filter());
    const store::KeyspaceView view = live.keyspace.view();
    ASSERT_EQ(view.size(), 1u);
    // Changes after the cut: the first one copies the filter for the view.
    for (int i = 0; i < 100; ++i) add_items(live.keyspace, "a", {"y" + std::to_string(i)});
    remove_items(live.keyspace, "a", {"x1", "x2", "x3"});
    ASSERT_NE(contents(live.keyspace.get("a")->value.filter()), at_cut);
    const store::KeyspaceView::AtCut state = view.at_cut(0);
    ASSERT_TRUE(state.copy);
    EXPECT_EQ(contents(*state.copy), at_cut);
    EXPECT_EQ(state.counts, std::vector<std::uint64_t>{40});
    // A filter nobody changed since the cut is copied when the view asks.
    const store::KeyspaceView later = live.keyspace.view();
    const store::KeyspaceView::AtCut unchanged = later.at_cut(0);
    ASSERT_TRUE(unchanged.copy);
    EXPECT_EQ(contents(*unchanged.copy), contents(live.keyspace.get("a")->value.filter()));
}

TEST(CountingJournal, SnapshotsTakenWhileCountersChangeRestartExactly) {
    // Each snapshot writes the counting filters as they were at its cut
    // (their copy, taken by the first change after it), so the snapshot
    // plus the journal after it give back the live counters, not counters
    // incremented twice.
    TempDir dir;
    const std::string dump = dir.str() + "/dump.bloomery";
    Journaled live(dir, FsyncPolicy::everysec);
    ASSERT_TRUE(live.keyspace.insert_new("a", ScalableFilter::create(counting_options(50))));
    ASSERT_TRUE(live.keyspace.insert_new("b", ScalableFilter::create(counting_options(50))));
    // A big plain filter: a snapshot takes a while to write it.
    ASSERT_TRUE(live.keyspace.insert_new("big", ScalableFilter::create(small_options(2000000))));
    const int rounds =
        snapshots_while(live, dump, [&] { race_adds_and_deletes(live.keyspace, 2, 6000); });
    live.close();
    Keyspace restarted(8);
    restart_from(dir, dump, restarted);
    expect_exact_replay(live.keyspace, restarted);
    std::printf("[ measured ] %d snapshots while two threads changed counters\n", rounds);
}

TEST(CountingJournal, MigratesDeleteKeepsAFilterThatADeleteAndAnAddChanged) {
    // A delete and an add leave the item count and the layers as they were:
    // the contents tell MIGRATE the copy it sent is out of date.
    Keyspace keyspace(8);
    ASSERT_TRUE(keyspace.insert_new("c", ScalableFilter::create(counting_options(100))));
    add_items(keyspace, "c", {"a", "b"});
    const bloom::FilterRef sent = keyspace.get("c")->value.filter_ref();
    const std::uint64_t items = sent->items();
    const std::uint64_t contents = sent->content_hash();
    remove_items(keyspace, "c", {"a"});
    add_items(keyspace, "c", {"z"});
    ASSERT_EQ(sent->items(), items);
    EXPECT_EQ(keyspace.erase_if_unchanged("c", sent.get(), items, 1, contents),
              Keyspace::EraseIf::changed);
    EXPECT_EQ(keyspace.erase_if_unchanged("c", sent.get(), items, 1, sent->content_hash()),
              Keyspace::EraseIf::erased);
}

}  // namespace
}  // namespace bloomery::persist
