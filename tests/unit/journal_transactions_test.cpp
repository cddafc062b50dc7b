// MULTI/EXEC in the journal: a transaction replays as one unit, or not at
// all when a crash cut it short; a corrupt record inside one refuses the
// start; a replica applies a unit only once all of it arrived.

#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/journal_reader.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unordered_map>
#include <vector>

#include "bloomery/persist/snapshot.hpp"
#include "journal_test_support.hpp"

namespace bloomery::persist {
namespace {

using namespace bloomery::persist::journal_testing;  // the journal tests' helpers
using bloom::AddResult;
using store::Keyspace;

// A transaction of the kinds of change a MULTI/EXEC makes: a filter created
// and added to, one renamed with a deadline, one deleted.
void transaction_of_changes(Journaled& live, int round) {
    const std::string n = std::to_string(round);
    std::vector<std::string_view> keys{"t" + n, "u" + n};
    (void)keys;
    const std::string t = "t" + n, u = "u" + n, v = "v" + n;
    const std::vector<std::string_view> held{t, u, v};
    Keyspace::Transaction transaction = live.keyspace.begin_transaction(held);
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
        Keyspace::Transaction transaction = live.keyspace.begin_transaction(held);
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
