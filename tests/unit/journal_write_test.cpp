// When the journal's records reach the file and the disk: each fsync policy,
// the worker threads' buffers and their turns to write through, the position
// a snapshot takes, and replays staying exact while adders race deletes,
// renames, flushes, snapshots and failing allocations.

#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/journal_reader.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bloomery/persist/snapshot.hpp"
#include "failing_log.hpp"
#include "journal_test_support.hpp"

namespace bloomery::persist {
namespace {

using namespace bloomery::persist::journal_testing;  // the journal tests' helpers
using bloom::AddResult;
using bloom::ScalableFilter;
using store::Keyspace;

TEST(Journal, AlwaysMakesEveryAppendDurableAndRunsWaiters) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::always);
    std::atomic<int> called{0};
    for (int i = 0; i < 50; ++i) {
        live.add("k", std::to_string(i));
        live.journal.when_durable(live.journal.log_id(), live.journal.position(),
                                  [&] { called.fetch_add(1); });
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (called.load() < 50 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(called.load(), 50);
    EXPECT_EQ(live.journal.durable(), live.journal.position());
    const persist::JournalInfo info = live.journal.info();
    EXPECT_TRUE(info.last_write_ok);
    EXPECT_GT(info.fsyncs, 0u);
    EXPECT_LE(info.fsyncs, 51u);
}

TEST(Journal, BufferedAddsReplayAndReachTheStreamWhenIdle) {
    // everysec: adds wait in the adding thread's buffer, keyspace records
    // go straight to the stream; replay matches, and a lone add reaches the
    // stream soon even when nothing else wakes the writer.
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    live.add("k", "before-delete");
    ASSERT_TRUE(live.keyspace.erase("k"));
    live.add("k", "after-delete");
    const std::uint64_t before = live.journal.appended();
    std::thread([&] { live.add("lone", "x"); }).join();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (live.journal.appended() == before && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_GT(live.journal.appended(), before) << "the lone add stayed in its thread's buffer";
    live.close();

    Keyspace replayed(8);
    replay_into(dir, replayed);
    expect_same_keyspace(live.keyspace, replayed);
    EXPECT_EQ(replayed.get("k")->value.filter().items(), 1u);
    EXPECT_TRUE(replayed.get("lone")->value.filter().contains(std::string("x")));
}

TEST(Journal, PositionCoversAddsStillInThreadBuffers) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::no);
    // Each add creates its key (straight to the stream) and adds (this
    // thread's buffer). The writer also drains idle buffers by itself, so
    // an add may already be in the stream when appended() is read: try
    // until one is seen still buffered, and check every try.
    int seen_buffered = 0;
    for (int i = 0; i < 200 && seen_buffered < 3; ++i) {
        live.add("k" + std::to_string(i), "first");
        const std::uint64_t created = live.journal.appended();
        const std::uint64_t position = live.journal.position();
        EXPECT_GE(position, created);
        EXPECT_EQ(live.journal.appended(), position);
        if (position > created) ++seen_buffered;
    }
    EXPECT_EQ(seen_buffered, 3) << "no add was ever still in its thread's buffer";
}

TEST(Journal, PositionWaitsForAnOpenScopeAndCoversItsRecords) {
    // An add records its entry, then sets its bits, inside a scope; a reader
    // that saw the bits asks for the position (a reply under appendfsync
    // always, WAIT). The position must cover the entry even while the scope
    // is still open and has not counted its bytes yet.
    TempDir dir;
    Journaled live(dir, FsyncPolicy::always);
    live.add("k", "first");
    bloom::FilterRef filter = live.keyspace.get("k")->value.filter_ref();
    const std::uint64_t before = live.journal.position();
    bloom::AddRecorder& scope = live.journal.begin_adds(*filter, 1);
    ASSERT_TRUE(scope.record(0, bloom::hash_item("second")));
    std::atomic<bool> returned{false};
    std::atomic<std::uint64_t> seen{0};
    std::thread reader([&] {
        seen = live.journal.position();
        returned = true;
    });
    // Bounded: the reader never returns while the scope is open.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (std::chrono::steady_clock::now() < until) {
        ASSERT_FALSE(returned.load()) << "position() passed an open scope";
        std::this_thread::yield();
    }
    live.journal.end_data();
    reader.join();
    EXPECT_GT(seen.load(), before);
    EXPECT_EQ(seen.load(), live.journal.position());
}

// The files of `from` copied into `to` as they are now: what a kill -9
// leaves (the kernel keeps what was written, synced or not).
void copy_files(const TempDir& from, const TempDir& to) {
    for (const auto& entry : fs::directory_iterator(from.str())) {
        fs::copy_file(entry.path(), fs::path(to.str()) / entry.path().filename());
    }
}

// What a kill -9 now would leave in `dir` replays to exactly `live`.
void expect_a_kill_now_replays_exactly(const TempDir& dir, const Keyspace& live) {
    TempDir crashed;
    copy_files(dir, crashed);
    Keyspace replayed(8);
    replay_into(crashed, replayed);
    expect_exact_replay(live, replayed);
}

// Waits (bounded) until `done` holds.
bool eventually(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

TEST(Journal, WriteThroughLeavesEveryThreadsRecordsInTheFileBeforeItReturns) {
    for (const FsyncPolicy policy : {FsyncPolicy::everysec, FsyncPolicy::no}) {
        SCOPED_TRACE(fsync_policy_name(policy));
        TempDir dir;
        Journaled live(dir, policy);
        live.add("k", "main");
        // Another thread's adds wait in that thread's buffer.
        std::thread([&] {
            live.add("k", "other");
            live.add("t", "x");
        }).join();
        live.journal.write_through();
        EXPECT_FALSE(live.journal.holds_unwritten());
        EXPECT_EQ(live.journal.written(), live.journal.appended());
        expect_a_kill_now_replays_exactly(dir, live.keyspace);
    }
}

// A worker's turn that counts the write-throughs it was asked for.
class CountingTurn final : public JournalTurn {
public:
    void schedule_write_through() override { ++scheduled; }
    int scheduled = 0;
};

TEST(Journal, AThreadWithATurnSchedulesItsWriteAndTheWriterSyncsIt) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    std::uint64_t written = 0;
    std::thread([&] {
        CountingTurn turn;
        Journal::set_thread_turn(&turn);
        EXPECT_FALSE(turn.appended());
        live.add("k", "a");  // a CREATE (to the stream) and an ADD (to the buffer)
        live.add("k", "b");
        EXPECT_GE(turn.scheduled, 3);
        EXPECT_TRUE(turn.appended());
        // What the turn's end does.
        live.journal.write_through();
        EXPECT_FALSE(live.journal.holds_unwritten());
        written = live.journal.written();
        Journal::set_thread_turn(nullptr);
    }).join();
    EXPECT_EQ(written, live.journal.appended());
    expect_a_kill_now_replays_exactly(dir, live.keyspace);
    // Nobody woke the writer for the records; it learns of the bytes to
    // fdatasync from the write and syncs them by itself.
    EXPECT_TRUE(eventually([&] { return live.journal.durable() >= written; }))
        << "durable " << live.journal.durable() << ", written " << written;
}

TEST(Journal, UnderAlwaysATurnIsNotScheduledAndTheWriterGroupCommits) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::always);
    CountingTurn turn;
    std::thread([&] {
        Journal::set_thread_turn(&turn);
        live.add("k", "a");
        Journal::set_thread_turn(nullptr);
    }).join();
    EXPECT_EQ(turn.scheduled, 0);
    // The batch is still known to have written (its reply waits for durability).
    EXPECT_TRUE(turn.appended());
    const std::uint64_t position = live.journal.position();
    EXPECT_TRUE(eventually([&] { return live.journal.durable() >= position; }));
}

TEST(Journal, ThreadsBeyondTheBuffersShareOneAndReplayExactly) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    constexpr int kThreads = static_cast<int>(Journal::kLocalBuffers) + 8;
    for (int t = 0; t < kThreads; ++t) {
        std::thread([&, t] { live.add("k" + std::to_string(t % 5), std::to_string(t)); }).join();
    }
    live.close();
    Keyspace replayed(8);
    replay_into(dir, replayed);
    expect_exact_replay(live.keyspace, replayed);
    for (int t = 0; t < kThreads; ++t) {
        EXPECT_TRUE(
            replayed.get("k" + std::to_string(t % 5))->value.filter().contains(std::to_string(t)));
    }
}

TEST(Journal, AddsRacingDeletesRenamesAndFlushesReplayExactly) {
    // Adds from four threads sit in their threads' buffers while another
    // thread deletes, renames and flushes: an add can reach the stream after
    // a later DEL or RENAME of its key. Named by filter id, each replays into
    // the filter it went to live (or is dropped with it), in the layer it
    // went to: the replayed keyspace is the live one, bit for bit and count
    // for count, and every added item answers 1.
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    constexpr int kThreads = 4;
    constexpr int kPerThread = 20000;
    constexpr int kChanges = 50;
    std::atomic<int> running{kThreads};
    std::atomic<int> changes{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            // At least kPerThread items, and on until the changes are done
            // (bounded): the two overlap however fast either runs.
            for (int i = 0; i < kPerThread || (changes.load() < kChanges && i < 100 * kPerThread);
                 i += 4) {
                std::vector<std::string> items;
                for (int j = i; j < i + 4; ++j) {
                    items.push_back(std::to_string(t) + ":" + std::to_string(j));
                }
                add_items(live.keyspace, "k" + std::to_string(i % 8), items);
            }
            running.fetch_sub(1);
        });
    }
    threads.emplace_back([&] {
        for (unsigned n = 0; running.load() > 0; ++n) {
            const std::string a = "k" + std::to_string(n % 8);
            const std::string b = "k" + std::to_string((n * 5 + 3) % 8);
            if (n % 3 == 0) {
                live.keyspace.erase(a);
            } else if (n % 97 == 0) {
                live.keyspace.clear();
            } else if (a != b) {
                live.keyspace.rename(a, b);
            }
            changes.fetch_add(1);
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
    });
    for (auto& thread : threads) thread.join();
    live.close();
    EXPECT_GE(changes.load(), kChanges);

    Keyspace replayed(8);
    replay_into(dir, replayed);
    expect_exact_replay(live.keyspace, replayed);
}

TEST(Journal, ConcurrentAddersAndSnapshotsRestartExactly) {
    // Adders on four threads while snapshots are taken: the last snapshot
    // plus the journal after it give back the live filter, bits and counts,
    // although the snapshot copied the filter while the adds went on (its
    // counts are those of its cut, store/snapshot_counts.hpp).
    TempDir dir;
    const std::string dump = dir.str() + "/dump.bloomery";
    Journaled live(dir, FsyncPolicy::everysec);
    ASSERT_TRUE(live.keyspace.insert_new("hot", ScalableFilter::create(small_options(20000))));
    ASSERT_TRUE(live.keyspace.insert_new("small", ScalableFilter::create(small_options(100))));
    constexpr int kThreads = 4;
    constexpr int kPerThread = 20000;
    std::atomic<bool> go{false};
    std::vector<std::thread> adders;
    for (int t = 0; t < kThreads; ++t) {
        adders.emplace_back([&, t] {
            while (!go.load()) std::this_thread::yield();
            for (int i = 0; i < kPerThread; ++i) {
                const std::string item = std::to_string(t) + ":" + std::to_string(i);
                add_items(live.keyspace, i % 5 == 0 ? "small" : "hot", {item});
            }
        });
    }
    go = true;
    for (int round = 0; round < 5; ++round) snapshot_and_drop_covered(live, dump);
    for (auto& thread : adders) thread.join();
    live.close();

    Keyspace restarted(8);
    restart_from(dir, dump, restarted);
    expect_exact_replay(live.keyspace, restarted);
    int missing = 0;
    for (int t = 0; t < kThreads; ++t) {
        for (int i = 0; i < kPerThread; ++i) {
            const std::string item = std::to_string(t) + ":" + std::to_string(i);
            missing +=
                restarted.get(i % 5 == 0 ? "small" : "hot")->value.filter().contains(item) ? 0 : 1;
        }
    }
    EXPECT_EQ(missing, 0);
}

TEST(Journal, OverlappingSnapshotsEachKeepTheCountsOfTheirOwnCut) {
    // Two views alive at once (a save and a replica's full copy): adds after
    // each cut leave each view's counts at its own position.
    TempDir dir;
    Journaled live(dir, FsyncPolicy::no);
    for (int i = 0; i < 30; ++i) live.add("a", "x" + std::to_string(i));
    live.add("b", "only");
    const std::uint64_t a_at_first = live.keyspace.get("a")->value.filter().items();
    store::KeyspaceView first = live.keyspace.view();
    for (int i = 30; i < 60; ++i) live.add("a", "x" + std::to_string(i));
    const std::uint64_t a_at_second = live.keyspace.get("a")->value.filter().items();
    store::KeyspaceView second = live.keyspace.view();
    for (int i = 60; i < 200; ++i) live.add("a", "x" + std::to_string(i));  // grows
    live.add("b", "more");
    const auto counts_of = [](const store::KeyspaceView& view, std::string_view key) {
        for (std::size_t i = 0; i < view.size(); ++i) {
            if (view.key(i) == key) {
                std::uint64_t total = 0;
                for (std::uint64_t c : view.item_counts(i)) total += c;
                return total;
            }
        }
        return ~std::uint64_t{0};
    };
    EXPECT_EQ(counts_of(second, "a"), a_at_second);
    EXPECT_EQ(counts_of(first, "a"), a_at_first);
    EXPECT_EQ(counts_of(first, "b"), 1u);
    EXPECT_EQ(counts_of(second, "b"), 1u);
    EXPECT_GT(live.keyspace.get("a")->value.filter().items(), a_at_second);
}

TEST(Journal, AnAllocationThatFailsChangesNothingAndTheRecordsStayExact) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::always);
    testing::FailingLog failing(live.journal);
    live.keyspace.set_mutation_log(&failing);
    live.add("k", "before");
    const std::uint64_t items = live.keyspace.get("k")->value.filter().items();

    // The batch's record cannot be reserved: no item of it is added.
    failing.fail_next = 1;
    std::vector<AddResult> results = add_items(live.keyspace, "k", {"a", "b", "c"});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0], AddResult::out_of_memory);
    EXPECT_EQ(live.keyspace.get("k")->value.filter().items(), items);
    EXPECT_FALSE(live.keyspace.get("k")->value.filter().contains(std::string("a")));

    // Keyspace records are encoded before the change: a failed one leaves
    // the key as it was.
    failing.fail_next = 1;
    EXPECT_THROW(live.keyspace.erase("k"), std::bad_alloc);
    EXPECT_TRUE(live.keyspace.contains("k"));
    failing.fail_next = 1;
    EXPECT_THROW(live.keyspace.rename("k", "other"), std::bad_alloc);
    EXPECT_TRUE(live.keyspace.contains("k"));
    failing.fail_next = 1;
    EXPECT_THROW(live.keyspace.insert_new("new", ScalableFilter::create(small_options())),
                 std::bad_alloc);
    EXPECT_FALSE(live.keyspace.contains("new"));

    // And afterwards everything is recorded as before.
    EXPECT_EQ(add_items(live.keyspace, "k", {"a", "b", "c"}),
              std::vector<AddResult>(3, AddResult::added));
    ASSERT_TRUE(live.keyspace.rename("k", "other"));
    live.keyspace.set_mutation_log(&live.journal);
    live.close();
    Keyspace replayed(8);
    replay_into(dir, replayed);
    expect_exact_replay(live.keyspace, replayed);
}

}  // namespace
}  // namespace bloomery::persist
