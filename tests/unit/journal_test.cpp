// The journal's replay (proto/journal.md): what it rebuilds (every kind of
// change, through renames, from a snapshot's position, from a stream in any
// pieces) and what it cuts, sets aside or refuses (a torn tail, a corrupt
// middle, another journal's segments, records beyond a filter). When records
// reach the file is in journal_write_test.cpp, transactions in
// journal_transactions_test.cpp.

#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/journal_reader.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unordered_map>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "journal_test_support.hpp"

namespace bloomery::persist {
namespace {

using namespace bloomery::persist::journal_testing;  // the journal tests' helpers
using bloom::AddResult;
using bloom::FilterOptions;
using bloom::ScalableFilter;
using store::Keyspace;

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
    bloom::FilterRef grows = live.keyspace.get("grows")->value.filter_ref();
    const core::Result<bloom::FilterRef> copy =
        bloom::decode_header(bloom::encode_header(*grows), 0);
    ASSERT_TRUE(copy) << copy.error();
    ASSERT_TRUE(live.keyspace.insert_new("restored", *copy));
    for (std::int64_t iter = 1;;) {
        const bloom::DumpChunk chunk = bloom::dump_chunk(*grows, iter);
        if (chunk.next_iter == 0) break;
        const auto loaded = live.keyspace.load_chunk("restored", chunk.next_iter, chunk.data);
        ASSERT_TRUE(loaded) << loaded.error();
        EXPECT_EQ(*loaded, Keyspace::ChunkStatus::loaded);
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
    EXPECT_EQ(replayed.get("grows")->value.filter().num_layers(), 3u);

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
    bloom::FilterRef held = live.keyspace.get("old")->value.filter_ref();
    ASSERT_TRUE(live.keyspace.rename("old", "new"));
    EXPECT_EQ(add_recorded(live.journal, *held, "late"), AddResult::added);
    live.close();
    Keyspace replayed(8);
    replay_into(dir, replayed);
    ASSERT_TRUE(replayed.contains("new"));
    EXPECT_TRUE(replayed.get("new")->value.filter().contains(std::string("late")));
    EXPECT_EQ(replayed.get("new")->value.filter().items(), 2u);
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
        EXPECT_TRUE(replayed.get("k")->value.filter().contains(std::to_string(i)));
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
    const bloom::FilterRef filter = replayed.get("f")->value.filter_ref();
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
    EXPECT_TRUE(replayed.get("k")->value.filter().contains(std::string("0")));
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
