#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/journal_reader.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "failing_log.hpp"

namespace bloomery::persist {
namespace {

namespace fs = std::filesystem;
using bloom::AddResult;
using bloom::FilterOptions;
using bloom::ScalableFilter;
using store::Keyspace;

class TempDir {
public:
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string pattern = std::string(base ? base : "/tmp") + "/journal_test.XXXXXX";
        if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    std::string str() const { return path_.string(); }
    std::vector<std::string> segments() const {
        std::vector<std::string> out;
        for (const auto& entry : fs::directory_iterator(path_)) {
            const std::string name = entry.path().filename().string();
            if (name.rfind("journal.", 0) == 0 && name.find(".stale") == std::string::npos) {
                out.push_back(entry.path().string());
            }
        }
        std::sort(out.begin(), out.end());
        return out;
    }

private:
    fs::path path_;
};

FilterOptions small_options(std::uint64_t capacity = 50) {
    FilterOptions options;
    options.error_rate = 0.01;
    options.capacity = capacity;
    options.expansion = 2;
    options.layout = bloom::Layout::classic;
    return options;
}

// BF.MADD as the server runs it: the keyspace's write path, creating the key.
std::vector<AddResult> add_items(Keyspace& keyspace, const std::string& key,
                                 const std::vector<std::string>& items,
                                 const FilterOptions& options = small_options()) {
    const std::vector<std::string_view> views(items.begin(), items.end());
    const std::function<bloom::FilterRef()> make = [&] { return ScalableFilter::create(options); };
    std::vector<AddResult> results;
    EXPECT_TRUE(keyspace.add_items(key, views, {}, &make, results));
    return results;
}

// A keyspace with a journal attached, as the server runs it.
struct Journaled {
    Journaled(const TempDir& dir, FsyncPolicy policy, std::uint64_t id = 42,
              std::uint64_t offset = 0, const std::string& existing = "")
        : journal(dir.str(), "journal", policy, 64ull << 20) {
        const core::Status opened = journal.open(id, offset, existing);
        EXPECT_TRUE(opened.ok()) << opened.error();
        keyspace.set_mutation_log(&journal);
    }
    ~Journaled() { close(); }
    void close() {
        journal.close();
        keyspace.set_mutation_log(nullptr);
    }
    AddResult add(const std::string& key, const std::string& item) {
        return add_items(keyspace, key, {item}).front();
    }
    Keyspace keyspace{8};
    Journal journal;
};

// An add to a filter held by reference (the key may have moved meanwhile),
// recorded as the keyspace records it.
AddResult add_recorded(Journal& journal, ScalableFilter& filter, const std::string& item) {
    bloom::AddRecorder& recorder = journal.begin_adds(filter, 1);
    store::DataScope scope(&journal);
    return filter.add(item, {}, &recorder);
}

// Calls check(entry in a, entry in b) for every key of `a`, once `b` is
// known to have the same number of keys and this one.
template <class Check>
void for_each_key_in_both(const Keyspace& a, const Keyspace& b, Check&& check) {
    const store::KeyspaceView view = a.view();
    ASSERT_EQ(view.size(), b.size());
    for (std::size_t i = 0; i < view.size(); ++i) {
        const std::string key(view.key(i));
        SCOPED_TRACE("key " + key);
        const auto other = b.get(key);
        ASSERT_TRUE(other.has_value());
        check(view.entry(i), *other);
    }
}

// Calls check(iter, chunk of a, chunk of b) for the SCANDUMP chunks of two
// filters side by side, which must end together.
template <class Check>
void for_each_chunk_pair(const ScalableFilter& a, const ScalableFilter& b, Check&& check) {
    for (std::int64_t iter = 1;;) {
        const bloom::DumpChunk ca = bloom::dump_chunk(a, iter);
        const bloom::DumpChunk cb = bloom::dump_chunk(b, iter);
        ASSERT_EQ(ca.next_iter, cb.next_iter);
        check(iter, ca, cb);
        if (ca.next_iter == 0) break;
        iter = ca.next_iter;
    }
}

// Every key of `a` is in `b` with the same expiry, options, layers, counts
// and bits, and `b` has no other key.
void expect_same_keyspace(const Keyspace& a, const Keyspace& b) {
    for_each_key_in_both(a, b, [](const auto& ea, const auto& eb) {
        EXPECT_EQ(eb.expire_at_ms, ea.expire_at_ms);
        EXPECT_EQ(bloom::encode_header(*ea.filter), bloom::encode_header(*eb.filter));
        EXPECT_EQ(ea.filter->items(), eb.filter->items());
        for_each_chunk_pair(*ea.filter, *eb.filter,
                            [](std::int64_t iter, const auto& ca, const auto& cb) {
                                ASSERT_TRUE(ca.data == cb.data) << "chunk " << iter;
                            });
    });
}

// Exactness (proto/journal.md): a replay gives back the same filters, by
// id, with the same layers, counts and bits.
void expect_exact_replay(const Keyspace& live, const Keyspace& replayed) {
    for_each_key_in_both(live, replayed, [&](const auto& ea, const auto& eb) {
        EXPECT_EQ(ea.filter->id(), eb.filter->id());
    });
    expect_same_keyspace(live, replayed);
}

// Replays `dir` into a fresh keyspace expecting a refusal; returns why.
std::string refused_replay(const TempDir& dir) {
    Keyspace refused(8);
    const core::Result<ReplayStats> replayed =
        replay_journal(dir.str(), "journal", std::nullopt, refused);
    EXPECT_FALSE(replayed.ok());
    return replayed.ok() ? std::string() : replayed.error();
}

// A closed journal in `dir` of `count` adds to "k" (items "0", "1", ...);
// returns its one segment's path.
std::string journal_of_adds(const TempDir& dir, FsyncPolicy policy, int count) {
    {
        Journaled live(dir, policy);
        for (int i = 0; i < count; ++i) live.add("k", std::to_string(i));
    }
    return dir.segments().front();
}

// Replays `dir` into `keyspace`, loaded from a snapshot covering `snapshot`
// (none: nothing loaded), expecting it to succeed.
ReplayStats replay_into(const TempDir& dir, Keyspace& keyspace,
                        const std::optional<JournalCoverage>& snapshot = std::nullopt) {
    const core::Result<ReplayStats> replayed =
        replay_journal(dir.str(), "journal", snapshot, keyspace);
    EXPECT_TRUE(replayed.ok()) << replayed.error();
    return replayed.ok() ? *replayed : ReplayStats{};
}

TEST(Journal, ReplayRebuildsEveryKindOfChange) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    for (int i = 0; i < 300; ++i) live.add("grows", "item-" + std::to_string(i));  // 3 layers
    for (int i = 0; i < 20; ++i) live.add("gone", "x" + std::to_string(i));
    live.add("renamed-from", "r");
    live.add("victim", "v");
    live.add("expiring", "e");
    live.add("persisted", "p");
    live.add("cleared-before", "c");
    const std::int64_t later = store::now_ms() + 3600 * 1000;
    ASSERT_TRUE(live.keyspace.erase("gone"));
    ASSERT_TRUE(live.keyspace.rename("renamed-from", "victim"));  // replaces victim
    ASSERT_TRUE(live.keyspace.set_expiry("expiring", later));
    ASSERT_TRUE(live.keyspace.set_expiry("persisted", later));
    ASSERT_TRUE(live.keyspace.set_expiry("persisted", 0));
    ASSERT_TRUE(live.keyspace.set_expiry("cleared-before", store::now_ms() - 1));  // deletes
    // A LOADCHUNK restore of "grows" under another name.
    bloom::FilterRef grows = live.keyspace.get("grows")->filter;
    const core::Result<bloom::FilterRef> copy =
        bloom::decode_header(bloom::encode_header(*grows), 0);
    ASSERT_TRUE(copy) << copy.error();
    ASSERT_TRUE(live.keyspace.insert_new("restored", *copy));
    for (std::int64_t iter = 1;;) {
        const bloom::DumpChunk chunk = bloom::dump_chunk(*grows, iter);
        if (chunk.next_iter == 0) break;
        std::string error;
        EXPECT_EQ(live.keyspace.load_chunk("restored", chunk.next_iter, chunk.data, error),
                  Keyspace::ChunkStatus::loaded)
            << error;
        iter = chunk.next_iter;
    }
    live.close();

    Keyspace replayed(8);
    const ReplayStats stats = replay_into(dir, replayed);
    EXPECT_EQ(stats.id, 42u);
    EXPECT_EQ(stats.truncated_bytes, 0u);
    EXPECT_GT(stats.records, 300u);
    expect_same_keyspace(live.keyspace, replayed);
    EXPECT_FALSE(replayed.contains("gone"));
    EXPECT_FALSE(replayed.contains("renamed-from"));
    EXPECT_EQ(replayed.expiry("expiring"), later);
    EXPECT_EQ(replayed.expiry("persisted"), 0);
    EXPECT_EQ(replayed.get("grows")->filter->num_layers(), 3u);

    // FLUSHALL, then more: only what followed survives.
    Journaled again(dir, FsyncPolicy::always, 42, stats.end, stats.last_segment);
    // (The replayed keyspace is what a restarted server holds.)
    again.keyspace.clear();
    again.add("after-flush", "a");
    again.close();
    Keyspace third(8);
    replay_into(dir, third);
    EXPECT_EQ(third.size(), 1u);
    EXPECT_TRUE(third.contains("after-flush"));
}

TEST(Journal, AddsFollowTheFilterThroughARename) {
    // An add that found the filter under its old name logs after the
    // rename: journaled by filter id, it still lands in the renamed filter.
    TempDir dir;
    Journaled live(dir, FsyncPolicy::no);
    live.add("old", "first");
    bloom::FilterRef held = live.keyspace.get("old")->filter;
    ASSERT_TRUE(live.keyspace.rename("old", "new"));
    EXPECT_EQ(add_recorded(live.journal, *held, "late"), AddResult::added);
    live.close();
    Keyspace replayed(8);
    replay_into(dir, replayed);
    ASSERT_TRUE(replayed.contains("new"));
    EXPECT_TRUE(replayed.get("new")->filter->contains(std::string("late")));
    EXPECT_EQ(replayed.get("new")->filter->items(), 2u);
}

TEST(Journal, SnapshotPositionSkipsCoveredRecordsAndDropsCoveredSegments) {
    TempDir dir;
    const std::string dump = dir.str() + "/dump.bloomery";
    Journaled live(dir, FsyncPolicy::everysec);
    for (int i = 0; i < 100; ++i) live.add("k" + std::to_string(i % 7), std::to_string(i));
    live.journal.rotate();
    const core::Result<SaveStats> save = save_snapshot(live.keyspace, dump);
    ASSERT_TRUE(save.ok()) << save.error();
    const SaveStats& saved = *save;
    EXPECT_EQ(saved.journal_id, 42u);
    EXPECT_EQ(saved.journal_offset, live.journal.appended());
    const std::size_t before = dir.segments().size();
    live.journal.drop_covered(saved.journal_offset);
    EXPECT_EQ(dir.segments().size(), 1u) << "had " << before;
    for (int i = 100; i < 200; ++i) live.add("k" + std::to_string(i % 9), std::to_string(i));
    ASSERT_TRUE(live.keyspace.erase("k1"));
    live.close();

    Keyspace restarted(8);
    const core::Result<LoadStats> load = load_snapshot(dump, restarted);
    ASSERT_TRUE(load.ok()) << load.error();
    const LoadStats& loaded = *load;
    EXPECT_EQ(loaded.journal_id, 42u);
    EXPECT_EQ(loaded.journal_offset, saved.journal_offset);
    const ReplayStats stats =
        replay_into(dir, restarted, JournalCoverage{loaded.journal_id, loaded.journal_offset});
    EXPECT_GT(stats.records, 0u);
    expect_same_keyspace(live.keyspace, restarted);
}

TEST(Journal, TornTailIsCutAndACorruptMiddleRefusesWithTheOffset) {
    TempDir dir;
    const std::string path = journal_of_adds(dir, FsyncPolicy::always, 10);
    const auto good_size = fs::file_size(path);
    {
        std::ofstream out(path, std::ios::binary | std::ios::app);
        out.write("\x40\x00\x00\x00\x02partial", 12);  // a record cut short by a crash
    }
    {
        // --check-journal tells it apart from corruption (exit code 2).
        const JournalCheckReport checked = check_journal(path, JournalRepair::none);
        EXPECT_EQ(checked.verdict, JournalCheck::torn_tail);
        EXPECT_NE(checked.problem.find("torn"), std::string::npos) << checked.problem;
        EXPECT_EQ(fs::file_size(path), good_size + 12);
    }
    Keyspace replayed(8);
    const ReplayStats stats = replay_into(dir, replayed);
    EXPECT_EQ(stats.truncated_bytes, 12u);
    EXPECT_EQ(fs::file_size(path), good_size);
    for (int i = 0; i < 10; ++i) {
        EXPECT_TRUE(replayed.get("k")->filter->contains(std::to_string(i)));
    }

    // Zeros at the end are no record a crash leaves (a write lands whole or
    // as a prefix): refused, and the file is left as it is.
    {
        std::ofstream out(path, std::ios::binary | std::ios::app);
        out << std::string(4096, '\0');
    }
    {
        std::string error = refused_replay(dir);
        EXPECT_NE(error.find("checksum"), std::string::npos) << error;
        EXPECT_EQ(fs::file_size(path), good_size + 4096);
        const JournalCheckReport fixed = check_journal(path, JournalRepair::cut_bad_tail);
        EXPECT_EQ(fixed.verdict, JournalCheck::valid) << fixed.problem;
        EXPECT_EQ(fs::file_size(path), good_size);
    }

    // A flipped byte in a record that is not the last: refused, with where.
    {
        std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
        f.seekp(60);
        f.put('\x7f');
    }
    std::string error = refused_replay(dir);
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find("offset"), std::string::npos) << error;
    EXPECT_NE(error.find("checksum"), std::string::npos) << error;

    const JournalCheckReport corrupt = check_journal(path, JournalRepair::none);
    EXPECT_EQ(corrupt.verdict, JournalCheck::corrupt);
    EXPECT_NE(corrupt.problem.find("--fix"), std::string::npos) << corrupt.problem;
    const JournalCheckReport fixed = check_journal(path, JournalRepair::cut_bad_tail);
    EXPECT_EQ(fixed.verdict, JournalCheck::valid) << fixed.problem;
    EXPECT_NE(fixed.report.find("fixed"), std::string::npos) << fixed.report;
    const JournalCheckReport valid = check_journal(path, JournalRepair::none);
    EXPECT_EQ(valid.verdict, JournalCheck::valid) << valid.problem;
    EXPECT_NE(valid.report.find("OK"), std::string::npos) << valid.report;
}

TEST(Journal, SegmentsOfAnotherJournalAreSetAsideNotReplayed) {
    TempDir dir;
    {
        Journaled other(dir, FsyncPolicy::no, 7);
        other.add("stale", "x");
    }
    Keyspace keyspace(8);
    // A snapshot of journal 9 (or of none) must not take journal 7's records.
    const ReplayStats stats = replay_into(dir, keyspace, JournalCoverage{9, 0});
    EXPECT_EQ(stats.records, 0u);
    EXPECT_FALSE(keyspace.contains("stale"));
    EXPECT_TRUE(dir.segments().empty());
    EXPECT_TRUE(fs::exists(dir.str() + "/journal.00000000000000000000.stale"));
}

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
    EXPECT_EQ(replayed.get("k")->filter->items(), 1u);
    EXPECT_TRUE(replayed.get("lone")->filter->contains(std::string("x")));
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
    bloom::FilterRef filter = live.keyspace.get("k")->filter;
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
        EXPECT_TRUE(replayed.get("k" + std::to_string(t % 5))->filter->contains(std::to_string(t)));
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

TEST(Journal, ReplayRedoesWhatWasDoneAtAHighErrorRate) {
    // At 0.9 most adds answer 0 and which layer an item lands in depends on
    // every add before it: a replay that decided again (skip what already
    // answers 1, grow when its own counts say) lost items. Redone, it gives
    // back every item and the live filter exactly.
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    FilterOptions options = small_options(100);
    options.error_rate = 0.9;
    std::vector<std::string> all;
    int next = 0;
    for (int round = 0; round < 60; ++round) {
        std::vector<std::string> batch;
        for (int j = 0; j < 128; ++j) batch.push_back("i" + std::to_string(next++));
        add_items(live.keyspace, "f", batch, options);
        all.insert(all.end(), batch.begin(), batch.end());
        for (int j = 0; j < 64; ++j) {
            const std::string item = "i" + std::to_string(next++);
            add_items(live.keyspace, "f", {item}, options);
            all.push_back(item);
        }
    }
    live.close();
    Keyspace replayed(8);
    replay_into(dir, replayed);
    expect_exact_replay(live.keyspace, replayed);
    const bloom::FilterRef filter = replayed.get("f")->filter;
    int missing = 0;
    for (const std::string& item : all) missing += filter->contains(item) ? 0 : 1;
    EXPECT_EQ(missing, 0);
    EXPECT_GT(filter->num_layers(), 3u);
}

TEST(Journal, RecordOfALayerBeyondTheFilterIsRefusedWithNothingChanged) {
    Keyspace keyspace(8);
    bloom::FilterRef filter = ScalableFilter::create(small_options());
    ASSERT_TRUE(keyspace.insert_new("k", filter));
    FilterOptions nonscaling = small_options();
    nonscaling.nonscaling = true;
    bloom::FilterRef fixed = ScalableFilter::create(nonscaling);
    ASSERT_TRUE(keyspace.insert_new("n", fixed));
    const Keyspace::RecordedAdd beyond[] = {{0, {1, 2}}, {bloom::kMaxLayers, {3, 4}}};
    EXPECT_FALSE(keyspace.redo_adds(*filter, beyond));
    EXPECT_EQ(filter->items(), 0u);
    EXPECT_EQ(filter->num_layers(), 1u);
    const Keyspace::RecordedAdd second_layer[] = {{1, {3, 4}}};
    EXPECT_FALSE(keyspace.redo_adds(*fixed, second_layer));
    EXPECT_EQ(fixed->num_layers(), 1u);
}

TEST(Journal, AStreamAppliedInAnyPiecesRebuildsTheKeyspace) {
    // A replica's view: the primary's records, cut anywhere by TCP, applied
    // in order, rebuild what the primary holds; a corrupt record stops it.
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    for (int i = 0; i < 300; ++i) live.add("grows", "item-" + std::to_string(i));
    live.add("a", "1");
    live.add("b", "2");
    ASSERT_TRUE(live.keyspace.rename("a", "c"));
    ASSERT_TRUE(live.keyspace.erase("b"));
    live.journal.ping();
    live.close();
    std::string stream;
    for (const std::string& path : dir.segments()) {
        std::ifstream in(path, std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)), {});
        stream += bytes.substr(kJournalSegmentHeaderBytes);
    }
    for (const std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{4096}}) {
        SCOPED_TRACE("pieces of " + std::to_string(piece));
        Keyspace replica(8);
        StreamApplier applier(replica);
        std::string pending;
        for (std::size_t at = 0; at < stream.size(); at += piece) {
            pending.append(stream, at, piece);
            const StreamApplier::Applied applied = applier.apply(pending);
            ASSERT_TRUE(applied.status.ok()) << applied.status.error();
            pending.erase(0, applied.consumed);
        }
        EXPECT_TRUE(pending.empty());
        expect_same_keyspace(live.keyspace, replica);
    }
    std::string corrupt = stream;
    corrupt[corrupt.size() / 2] ^= 0x40;
    Keyspace replica(8);
    StreamApplier applier(replica);
    const StreamApplier::Applied applied = applier.apply(corrupt);
    EXPECT_FALSE(applied.status.ok());
    EXPECT_LT(applied.consumed, corrupt.size());
    const std::string error = applied.status.ok() ? std::string() : applied.status.error();
    EXPECT_NE(error.find("replication stream"), std::string::npos) << error;
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
    for (int round = 0; round < 5; ++round) {
        live.journal.rotate();
        const core::Result<SaveStats> saved = save_snapshot(live.keyspace, dump);
        ASSERT_TRUE(saved.ok()) << saved.error();
        live.journal.drop_covered(saved->journal_offset);
    }
    for (auto& thread : adders) thread.join();
    live.close();

    Keyspace restarted(8);
    const core::Result<LoadStats> loaded = load_snapshot(dump, restarted);
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    replay_into(dir, restarted, JournalCoverage{loaded->journal_id, loaded->journal_offset});
    expect_exact_replay(live.keyspace, restarted);
    int missing = 0;
    for (int t = 0; t < kThreads; ++t) {
        for (int i = 0; i < kPerThread; ++i) {
            const std::string item = std::to_string(t) + ":" + std::to_string(i);
            missing += restarted.get(i % 5 == 0 ? "small" : "hot")->filter->contains(item) ? 0 : 1;
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
    const std::uint64_t a_at_first = live.keyspace.get("a")->filter->items();
    store::KeyspaceView first = live.keyspace.view();
    for (int i = 30; i < 60; ++i) live.add("a", "x" + std::to_string(i));
    const std::uint64_t a_at_second = live.keyspace.get("a")->filter->items();
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
    EXPECT_GT(live.keyspace.get("a")->filter->items(), a_at_second);
}

TEST(Journal, AnAllocationThatFailsChangesNothingAndTheRecordsStayExact) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::always);
    testing::FailingLog failing(live.journal);
    live.keyspace.set_mutation_log(&failing);
    live.add("k", "before");
    const std::uint64_t items = live.keyspace.get("k")->filter->items();

    // The batch's record cannot be reserved: no item of it is added.
    failing.fail_next = 1;
    std::vector<AddResult> results = add_items(live.keyspace, "k", {"a", "b", "c"});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0], AddResult::out_of_memory);
    EXPECT_EQ(live.keyspace.get("k")->filter->items(), items);
    EXPECT_FALSE(live.keyspace.get("k")->filter->contains(std::string("a")));

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

TEST(Journal, CorruptLengthInTheMiddleRefusesAndChangesNothingOnDisk) {
    // A length field made huge in a record that is not the last one looks
    // like "the file ends inside a record", but valid records follow it: a
    // crash cannot leave that, so it is corruption, not a torn tail.
    TempDir dir;
    const std::string path = journal_of_adds(dir, FsyncPolicy::no, 2000);
    const auto size = fs::file_size(path);
    {
        std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
        // The first record (CREATE) starts right after the header; its
        // length's high byte.
        f.seekp(static_cast<std::streamoff>(kJournalSegmentHeaderBytes + 3));
        f.put('\x7f');
    }
    std::string error = refused_replay(dir);
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find("offset 0"), std::string::npos) << error;
    EXPECT_EQ(fs::file_size(path), size);
    const JournalCheckReport checked = check_journal(path, JournalRepair::none);
    EXPECT_EQ(checked.verdict, JournalCheck::corrupt);
    EXPECT_EQ(checked.problem.find("torn"), std::string::npos) << checked.problem;
    EXPECT_EQ(fs::file_size(path), size);
}

TEST(Journal, ASegmentNameBeyondSixtyFourBitsIsIgnored) {
    TempDir dir;
    journal_of_adds(dir, FsyncPolicy::no, 1);
    { std::ofstream(dir.str() + "/journal.99999999999999999999") << "stray"; }
    Keyspace replayed(8);
    replay_into(dir, replayed);
    EXPECT_TRUE(replayed.get("k")->filter->contains(std::string("0")));
    Journal journal(dir.str(), "journal", FsyncPolicy::no, 1 << 20);
    const core::Status opened = journal.open(42, 1 << 20, "");
    EXPECT_TRUE(opened.ok()) << opened.error();
    journal.close();
}

TEST(Journal, AReopenedJournalStartsANewHistoryInTheSameObject) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::always);
    live.add("k", "x");
    const std::uint64_t old_id = live.journal.log_id();
    const std::uint64_t old_end = live.journal.position();
    live.journal.close();
    const core::Status reopened = live.journal.open(old_id + 1, 0, "");
    ASSERT_TRUE(reopened.ok()) << reopened.error();
    // A reply waiting on the old history is not held by the new one.
    bool called = false;
    live.journal.when_durable(old_id, old_end + 1000, [&] { called = true; });
    EXPECT_TRUE(called);
    live.add("k", "y");
    EXPECT_GT(live.journal.position(), 0u);
}

}  // namespace
}  // namespace bloomery::persist

namespace bloomery::persist {
namespace {

// A transaction of the kinds of change a MULTI/EXEC makes: a filter created
// and added to, one renamed with a deadline, one deleted.
void transaction_of_changes(Journaled& live, int round) {
    const std::string n = std::to_string(round);
    std::vector<std::string_view> keys{"t" + n, "u" + n};
    (void)keys;
    const std::string t = "t" + n, u = "u" + n, v = "v" + n;
    const std::vector<std::string_view> held{t, u, v};
    Keyspace::Transaction transaction = live.keyspace.begin_transaction(held, false);
    add_items(live.keyspace, t, {"a" + n, "b" + n, "c" + n});
    add_items(live.keyspace, u, {"x" + n});
    ASSERT_TRUE(live.keyspace.rename(u, v));
    ASSERT_TRUE(live.keyspace.set_expiry(v, store::now_ms() + 3600000));
    add_items(live.keyspace, t, {"d" + n});
}

TEST(JournalTransactions, ATransactionReplaysAsTheLiveKeyspace) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    live.add("before", "x");
    for (int round = 0; round < 5; ++round) transaction_of_changes(live, round);
    live.add("after", "y");
    live.close();
    const JournalCheckReport checked = check_journal(dir.segments().front(), JournalRepair::none);
    ASSERT_EQ(checked.verdict, JournalCheck::valid) << checked.problem;
    EXPECT_NE(checked.report.find("MULTI records: 5"), std::string::npos) << checked.report;
    EXPECT_NE(checked.report.find("EXEC records: 5"), std::string::npos) << checked.report;
    Keyspace replayed(8);
    const ReplayStats stats = replay_into(dir, replayed);
    EXPECT_EQ(stats.truncated_bytes, 0u);
    expect_exact_replay(live.keyspace, replayed);
}

TEST(JournalTransactions, ATransactionThatChangedNothingWritesNothing) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::always);
    live.add("k", "x");
    const std::uint64_t before = live.journal.position();
    {
        const std::string key = "k";
        const std::vector<std::string_view> held{key};
        Keyspace::Transaction transaction = live.keyspace.begin_transaction(held, false);
        // An item already there: no record, so no unit either.
        EXPECT_EQ(add_items(live.keyspace, "k", {"x"}).front(), AddResult::exists);
    }
    EXPECT_EQ(live.journal.position(), before);
}

TEST(JournalTransactions, ACrashInsideATransactionDropsAllOfItAndNothingElse) {
    TempDir dir;
    std::string path;
    std::uintmax_t size_before_last = 0;
    {
        Journaled live(dir, FsyncPolicy::always);
        live.add("before", "x");
        transaction_of_changes(live, 0);
        live.journal.position();
        live.close();
        path = dir.segments().front();
        size_before_last = fs::file_size(path);
    }
    {
        Journaled live(dir, FsyncPolicy::always, 42, size_before_last - kJournalSegmentHeaderBytes,
                       dir.segments().front());
        transaction_of_changes(live, 1);
    }
    const auto full = fs::file_size(path);
    ASSERT_GT(full, size_before_last);
    // Every cut inside the last transaction, as a crash may leave it: the
    // whole transaction goes, everything before it stays.
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    for (std::uintmax_t cut = size_before_last + 1; cut < full;
         cut += std::max<std::uintmax_t>(1, (full - size_before_last) / 23)) {
        SCOPED_TRACE("cut at " + std::to_string(cut));
        {
            std::ofstream out(path, std::ios::binary | std::ios::trunc);
            out.write(bytes.data(), static_cast<std::streamsize>(cut));
        }
        Keyspace replayed(8);
        const ReplayStats stats = replay_into(dir, replayed);
        EXPECT_EQ(stats.truncated_bytes, cut - size_before_last);
        EXPECT_EQ(fs::file_size(path), size_before_last);
        EXPECT_TRUE(replayed.contains("before"));
        EXPECT_TRUE(replayed.contains("t0"));
        EXPECT_TRUE(replayed.contains("v0"));
        EXPECT_FALSE(replayed.contains("t1"));
        EXPECT_FALSE(replayed.contains("u1"));
        EXPECT_FALSE(replayed.contains("v1"));
    }
}

TEST(JournalTransactions, ACorruptRecordInsideATransactionRefusesTheStart) {
    TempDir dir;
    {
        Journaled live(dir, FsyncPolicy::always);
        transaction_of_changes(live, 0);
        live.add("after", "y");
    }
    const std::string path = dir.segments().front();
    {
        // The second record of the unit (its first CREATE's key).
        std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
        f.seekp(static_cast<std::streamoff>(kJournalSegmentHeaderBytes + 21 + 13 + 6));
        f.put('\x7f');
    }
    const std::string error = refused_replay(dir);
    EXPECT_NE(error.find("inside a transaction"), std::string::npos) << error;
    EXPECT_EQ(check_journal(path, JournalRepair::none).verdict, JournalCheck::corrupt);
}

TEST(JournalTransactions, AReplicaAppliesAUnitOnlyWhenAllOfItArrived) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    transaction_of_changes(live, 0);
    live.add("after", "y");
    live.close();
    std::ifstream in(dir.segments().front(), std::ios::binary);
    const std::string stream =
        std::string((std::istreambuf_iterator<char>(in)), {}).substr(kJournalSegmentHeaderBytes);
    Keyspace replica(8);
    StreamApplier applier(replica);
    std::string pending;
    bool saw_partial = false;
    for (std::size_t at = 0; at < stream.size(); at += 5) {
        pending.append(stream, at, 5);
        const StreamApplier::Applied applied = applier.apply(pending);
        ASSERT_TRUE(applied.status.ok()) << applied.status.error();
        pending.erase(0, applied.consumed);
        // Until the EXEC has arrived nothing of the unit is applied.
        if (!replica.contains("t0")) {
            EXPECT_FALSE(replica.contains("v0"));
            saw_partial = saw_partial || at > 100;
        } else {
            EXPECT_TRUE(replica.contains("v0"));
        }
    }
    EXPECT_TRUE(saw_partial);
    EXPECT_TRUE(pending.empty());
    expect_same_keyspace(live.keyspace, replica);
}

}  // namespace
}  // namespace bloomery::persist
