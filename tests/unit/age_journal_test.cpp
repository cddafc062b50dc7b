// Expiring filters in the journal (proto/journal.md, "Expiring filters"):
// each add is recorded with the generation it read, each shift with the
// generation it made current, and replay redoes them, in whatever order
// threads' records reached the journal, to the same bits and counts.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/bloom/age_header.hpp"
#include "journal_test_support.hpp"

namespace bloomery::persist {
namespace {

using namespace bloomery::persist::journal_testing;  // the journal tests' helpers
using bloom::AgeFilter;
using store::Keyspace;

bloom::AgeGeometry window(std::uint64_t items) {
    const std::optional<bloom::AgeGeometry> geometry = bloom::age_geometry(0.01, items, 0);
    EXPECT_TRUE(geometry);
    return *geometry;
}

// BF.RESERVE ... WINDOW as the keyspace links it: a new id, a CREATE record.
AgeFilter& reserve(Keyspace& keyspace, const std::string& key, std::uint64_t items) {
    bloom::AgeFilterRef filter = AgeFilter::create(window(items));
    filter->set_id(bloom::ScalableFilter::next_id());
    AgeFilter& held = *filter;
    EXPECT_TRUE(keyspace.insert_new(key, std::move(filter)));
    return held;
}

// BF.MADD on an expiring filter; whether a generation had no room left.
bool add(Keyspace& keyspace, const std::string& key, const std::vector<std::string>& items) {
    const std::vector<std::string_view> views(items.begin(), items.end());
    std::vector<Keyspace::AgeAdded> results;
    bool full = false;
    EXPECT_TRUE(keyspace.add_age_items(key, views, results, full));
    EXPECT_EQ(results.size(), items.size());
    return full;
}

// The server's shifter: waits out adds that read an older generation.
void shift(Keyspace& keyspace, AgeFilter& filter, std::uint64_t now_ms) {
    const std::uint64_t from = filter.generation();
    Keyspace::wait_for_readers();
    keyspace.shift_age(filter, now_ms, from);
}

TEST(AgeJournal, AddsAndShiftsReplayExactly) {
    TempDir dir;
    {
        Journaled live(dir, FsyncPolicy::no);
        AgeFilter& filter = reserve(live.keyspace, "w", 2'000);
        std::uint64_t next = 0;
        for (int round = 0; round < 300; ++round) {
            std::vector<std::string> items;
            for (int i = 0; i < 10; ++i) items.push_back("i" + std::to_string(next++));
            add(live.keyspace, "w", items);
            if (filter.shift_wanted()) shift(live.keyspace, filter, 1000 + round);
        }
        ASSERT_GT(filter.generation(), filter.slices()) << "the ring went round";
        Keyspace replayed(8);
        live.journal.close();
        replay_into(dir, replayed);
        expect_exact_replay(live.keyspace, replayed);
        EXPECT_TRUE(replayed.get("w")->value.age().contains(bloom::hash_item("i2999")));
    }
}

// Threads add while another shifts; records reach the journal from each
// thread's buffer in its own order. The replay holds every bit and count.
TEST(AgeJournal, ConcurrentAddsAndShiftsReplayExactly) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::no);
    AgeFilter& filter = reserve(live.keyspace, "w", 3'000);
    constexpr int kThreads = 3;
    std::atomic<int> running{kThreads};
    std::thread shifter([&] {
        for (std::uint64_t now = 1; running.load() > 0; ++now) {
            if (filter.shift_wanted()) {
                shift(live.keyspace, filter, now);
            } else {
                std::this_thread::yield();
            }
        }
    });
    std::vector<std::thread> adders;
    for (int t = 0; t < kThreads; ++t) {
        adders.emplace_back([&, t] {
            // Until the ring has gone round twice (bounded), however the
            // shifter is scheduled.
            for (int batch = 0; batch < 100'000 && filter.generation() <= 2 * filter.slices();
                 ++batch) {
                std::vector<std::string> items;
                for (int i = 0; i < 25; ++i) {
                    items.push_back(std::to_string(t) + ":" + std::to_string(batch * 25 + i));
                }
                const std::uint64_t generation = filter.generation();
                // Gives the shifter a chance (two cores here).
                const bool full = add(live.keyspace, "w", items);
                for (int spin = 0; full && spin < 1000 && filter.generation() == generation;
                     ++spin) {
                    std::this_thread::yield();
                }
            }
            running.fetch_sub(1);
        });
    }
    for (std::thread& a : adders) a.join();
    shifter.join();
    ASSERT_GT(filter.generation(), 2 * filter.slices());
    expect_journal_gives_back(dir, live);
}

// Records naming a filter that was deleted are skipped; the key's new
// filter, with a new id, takes only its own.
TEST(AgeJournal, ADeletedFiltersRecordsDoNotReachItsSuccessor) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::no);
    AgeFilter& first = reserve(live.keyspace, "w", 1'000);
    add(live.keyspace, "w", {"a", "b"});
    shift(live.keyspace, first, 5);
    ASSERT_TRUE(live.keyspace.erase("w"));
    reserve(live.keyspace, "w", 1'000);
    add(live.keyspace, "w", {"c"});
    Keyspace replayed(8);
    live.close();
    replay_into(dir, replayed);
    expect_exact_replay(live.keyspace, replayed);
    const AgeFilter& second = replayed.get("w")->value.age();
    EXPECT_EQ(second.generation(), 0u);
    EXPECT_EQ(second.items(), 1u);
}

// A snapshot holds an expiring filter's generation, last shift, counts
// and words; loaded, it is the same filter.
TEST(AgeJournal, ASnapshotHoldsTheRingAndItsCounts) {
    TempDir dir;
    const std::string dump = dir.str() + "/dump.bdb";
    Journaled live(dir, FsyncPolicy::no);
    AgeFilter& filter = reserve(live.keyspace, "w", 2'000);
    for (int round = 0; round < 150; ++round) {
        add(live.keyspace, "w", {"a" + std::to_string(round), "b" + std::to_string(round)});
        if (filter.shift_wanted()) shift(live.keyspace, filter, 7000 + round);
    }
    shift(live.keyspace, filter, 9999);
    ASSERT_GT(filter.generation(), 3u);
    snapshot_and_drop_covered(live, dump);
    Keyspace loaded(8);
    const core::Result<LoadStats> stats = load_snapshot(dump, loaded);
    ASSERT_TRUE(stats.ok()) << stats.error();
    expect_exact_replay(live.keyspace, loaded);
    EXPECT_EQ(loaded.get("w")->value.age().shifted_ms(), 9999u);
}

// Snapshots taken one after another while threads add and another shifts:
// each snapshot holds the filter as at its cut (generation and counts) with
// its words copied later, and the journal after the cut brings a restart
// to exactly the live filter.
TEST(AgeJournal, SnapshotsDuringAddsAndShiftsRestartExactly) {
    TempDir dir;
    const std::string dump = dir.str() + "/dump.bdb";
    Journaled live(dir, FsyncPolicy::no);
    AgeFilter& filter = reserve(live.keyspace, "w", 3'000);
    const int rounds = snapshots_while(live, dump, [&] {
        std::atomic<bool> adding{true};
        std::thread shifter([&] {
            for (std::uint64_t now = 1; adding.load(); ++now) {
                if (filter.shift_wanted()) {
                    shift(live.keyspace, filter, now);
                } else {
                    std::this_thread::yield();
                }
            }
        });
        for (int batch = 0; batch < 100'000 && filter.generation() <= filter.slices(); ++batch) {
            std::vector<std::string> items;
            for (int i = 0; i < 20; ++i) items.push_back(std::to_string(batch * 20 + i));
            const std::uint64_t generation = filter.generation();
            const bool full = add(live.keyspace, "w", items);
            for (int spin = 0; full && spin < 1000 && filter.generation() == generation; ++spin) {
                std::this_thread::yield();
            }
        }
        adding = false;
        shifter.join();
    });
    EXPECT_GE(rounds, 1);
    ASSERT_GT(filter.generation(), filter.slices());
    Keyspace restarted(8);
    live.close();
    restart_from(dir, dump, restarted);
    expect_exact_replay(live.keyspace, restarted);
}

TEST(AgeJournal, AHeaderWithAnyByteChangedIsRefused) {
    const bloom::AgeFilterRef filter = AgeFilter::create(window(1'000), 7, 99);
    const std::string header = bloom::encode_age_header(*filter);
    ASSERT_EQ(header.size(), bloom::kAgeHeaderBytes);
    const core::Result<bloom::AgeHeader> decoded = bloom::decode_age_header(header);
    ASSERT_TRUE(decoded) << decoded.error();
    EXPECT_EQ(decoded->generation, 7u);
    EXPECT_EQ(decoded->shifted_ms, 99u);
    EXPECT_EQ(decoded->geometry.slice_bits, filter->geometry().slice_bits);
    for (std::size_t i = 0; i < header.size(); ++i) {
        std::string bad = header;
        bad[i] = static_cast<char>(bad[i] ^ 0x10);
        EXPECT_FALSE(bloom::decode_age_header(bad)) << "byte " << i;
    }
    EXPECT_FALSE(bloom::decode_age_header(header.substr(1)));
}

}  // namespace
}  // namespace bloomery::persist
