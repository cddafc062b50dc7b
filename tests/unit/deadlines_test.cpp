// Deadlines redone, never re-decided: the keyspace following deadlines
// (replay, replicas) keeps a key past its deadline until a DEL record, and
// replay gives back keys whose deadline was moved or removed after it had
// passed on the replaying clock.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/journal_reader.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/keyspace.hpp"
#include "temp_dir.hpp"

namespace bloomery::store {
namespace {

namespace fs = std::filesystem;
using bloom::AddResult;
using bloom::ScalableFilter;

FilterRef make_filter() {
    bloom::FilterOptions options;
    options.capacity = 1000;
    return ScalableFilter::create(options);
}

void add(Keyspace& keyspace, const std::string& key, const std::vector<std::string>& items) {
    const std::vector<std::string_view> views(items.begin(), items.end());
    const std::function<FilterRef()> make = [] { return make_filter(); };
    std::vector<AddResult> results;
    ASSERT_TRUE(keyspace.add_items(key, views, {}, &make, results));
}

// Active expiry goes by the deadline a key has now: one moved sooner is
// erased once it passes, one moved later or removed is kept.
TEST(Deadlines, ActiveExpiryGoesByTheDeadlineAsLastSet) {
    Keyspace keyspace(4);
    const std::int64_t soon = now_ms() + 20;
    keyspace.put("sooner", make_filter(), now_ms() + 3600'000);
    keyspace.put("later", make_filter(), soon);
    keyspace.put("persisted", make_filter(), soon);
    ASSERT_TRUE(keyspace.set_expiry("sooner", soon));
    ASSERT_TRUE(keyspace.set_expiry("later", now_ms() + 3600'000));
    ASSERT_TRUE(keyspace.set_expiry("persisted", 0));
    // Polled: the clock must pass the deadline.
    for (int i = 0; i < 10000 && now_ms() <= soon; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GT(now_ms(), soon);
    std::size_t erased = 0;
    for (int round = 0; round < 100 && erased == 0; ++round) {
        erased += keyspace.active_expire_cycle(std::chrono::seconds(10));
    }
    EXPECT_EQ(erased, 1u);
    EXPECT_EQ(keyspace.active_expire_cycle(std::chrono::seconds(10)), 0u);
    EXPECT_EQ(keyspace.size(), 2u);
    EXPECT_TRUE(keyspace.contains("later"));
    EXPECT_TRUE(keyspace.contains("persisted"));
    EXPECT_EQ(keyspace.expire_past_deadlines(), 0u);
    EXPECT_EQ(keyspace.counts().with_expiry, 1u);
}

TEST(Deadlines, FollowingHidesAKeyPastItsDeadlineButKeepsItForLaterRecords) {
    Keyspace keyspace(4);
    keyspace.set_deadlines(Deadlines::follow);
    keyspace.put("k", make_filter(), now_ms() - 1);
    // Hidden from reads, on the lock-free path and the locked one...
    EXPECT_FALSE(keyspace.with_filter("k", [](ScalableFilter&) {}));
    EXPECT_FALSE(keyspace.contains("k"));
    EXPECT_FALSE(keyspace.expiry("k").has_value());
    EXPECT_EQ(keyspace.active_expire_cycle(), 0u);
    EXPECT_EQ(keyspace.expired_keys(), 0u);
    // ...but still there for the records that name it, and counted.
    EXPECT_EQ(keyspace.size(), 1u);
    ASSERT_TRUE(keyspace.linked("k").has_value());
    EXPECT_FALSE(keyspace.insert_new("k", make_filter()));  // the key exists
    // A PERSIST decided before the deadline brings it back whole.
    EXPECT_TRUE(keyspace.set_expiry("k", 0));
    EXPECT_TRUE(keyspace.contains("k"));
    EXPECT_EQ(*keyspace.expiry("k"), 0);
}

TEST(Deadlines, FollowingRedoesExpireRenameAndCreateAsRecorded) {
    Keyspace keyspace(16);
    keyspace.set_deadlines(Deadlines::follow);
    const std::int64_t past = now_ms() - 1000;
    keyspace.put("src", make_filter());
    // An EXPIRE whose deadline has passed on this clock sets it, no more.
    EXPECT_TRUE(keyspace.set_expiry("src", past));
    ASSERT_TRUE(keyspace.linked("src").has_value());
    EXPECT_EQ(keyspace.linked("src")->expire_at_ms, past);
    // RENAME moves it as it is, deadline and all.
    EXPECT_TRUE(keyspace.rename("src", "dst"));
    EXPECT_FALSE(keyspace.linked("src").has_value());
    EXPECT_EQ(keyspace.linked("dst")->expire_at_ms, past);
    // RENAMENX onto it finds it there.
    keyspace.put("other", make_filter());
    EXPECT_EQ(keyspace.rename_if_absent("other", "dst"), false);
    EXPECT_TRUE(keyspace.set_expiry("dst", 0));
    EXPECT_TRUE(keyspace.contains("dst"));
    // Only a DEL removes it; a DEL of a key past its deadline counts it
    // deleted, not expired (the primary counted that).
    EXPECT_TRUE(keyspace.set_expiry("other", past));
    EXPECT_TRUE(keyspace.erase("other"));
    EXPECT_EQ(keyspace.expired_keys(), 0u);
}

TEST(Deadlines, EnforcingAgainErasesWhatIsPastItsDeadlineWithADelEach) {
    Keyspace keyspace(8);
    keyspace.set_deadlines(Deadlines::follow);
    for (int i = 0; i < 100; ++i) {
        keyspace.put("past" + std::to_string(i), make_filter(), now_ms() - 1);
        keyspace.put("future" + std::to_string(i), make_filter(), now_ms() + 3600000);
    }
    keyspace.put("none", make_filter());
    EXPECT_EQ(keyspace.expire_past_deadlines(), 0u);  // following: nothing
    EXPECT_EQ(keyspace.size(), 201u);
    keyspace.set_deadlines(Deadlines::enforce);
    EXPECT_EQ(keyspace.expire_past_deadlines(), 100u);
    EXPECT_EQ(keyspace.size(), 101u);
    EXPECT_EQ(keyspace.expired_keys(), 100u);
    EXPECT_EQ(keyspace.counts().with_expiry, 100u);
    // Enforcing, an EXPIRE in the past deletes, as Redis's does.
    EXPECT_TRUE(keyspace.set_expiry("none", now_ms() - 1));
    EXPECT_FALSE(keyspace.linked("none").has_value());
}

class TempDir : public bloomery::testing::ScratchDir {
public:
    TempDir() : ScratchDir("deadlines_test") {}
};

// Replays `dir` (and the snapshot in it, if `snapshot`) into `keyspace`, as
// a server starts.
void restart(const TempDir& dir, Keyspace& keyspace, bool snapshot) {
    persist::LoadStats loaded{};
    if (snapshot) {
        const core::Result<persist::LoadStats> read =
            persist::load_snapshot(dir.str() + "/dump", keyspace);
        ASSERT_TRUE(read.ok()) << read.error();
        loaded = *read;
    }
    std::optional<persist::JournalCoverage> covered;
    if (snapshot) covered = persist::JournalCoverage{loaded.journal_id, loaded.journal_offset};
    const core::Result<persist::ReplayStats> replayed =
        persist::replay_journal(dir.str(), "journal", covered, keyspace);
    ASSERT_TRUE(replayed.ok()) << replayed.error();
}

TEST(Deadlines, ReplayAfterTheOldDeadlinesPassedGivesBackMovedAndRemovedOnes) {
    TempDir dir;
    const std::vector<std::string> items = {"a", "b", "c", "d"};
    ManualClock clock;
    const std::int64_t soon = clock.now() + 50;
    {
        persist::Journal journal(dir.str(), "journal", persist::FsyncPolicy::always, 64ull << 20);
        const core::Status opened = journal.open(7, 0, "");
        ASSERT_TRUE(opened.ok()) << opened.error();
        std::string error;
        Keyspace live(8);
        live.set_mutation_log(&journal);
        // EXPIRE, adds, PERSIST.
        add(live, "eap", {"a"});
        ASSERT_TRUE(live.set_expiry("eap", soon));
        add(live, "eap", {"b", "c", "d"});
        ASSERT_TRUE(live.set_expiry("eap", 0));
        // A sliding deadline: the later EXPIRE far ahead.
        add(live, "slide", items);
        ASSERT_TRUE(live.set_expiry("slide", soon));
        ASSERT_TRUE(live.set_expiry("slide", now_ms() + 3600000));
        // EXPIRE, RENAME, PERSIST.
        add(live, "src", items);
        ASSERT_TRUE(live.set_expiry("src", soon));
        ASSERT_TRUE(live.rename("src", "dst"));
        ASSERT_TRUE(live.set_expiry("dst", 0));
        // A snapshot in the middle, holding a deadline a later record removes.
        add(live, "saved", items);
        ASSERT_TRUE(live.set_expiry("saved", soon));
        const core::Result<persist::SaveStats> saved =
            persist::save_snapshot(live, dir.str() + "/dump");
        ASSERT_TRUE(saved.ok()) << saved.error();
        ASSERT_TRUE(live.set_expiry("saved", 0));
        // And one that does expire: it stays past its deadline, unreaped.
        add(live, "gone", items);
        ASSERT_TRUE(live.set_expiry("gone", soon));
        journal.close();
        live.set_mutation_log(nullptr);
    }
    clock.advance(std::chrono::milliseconds(51));

    for (const bool snapshot : {false, true}) {
        SCOPED_TRACE(snapshot ? "snapshot and journal" : "journal alone");
        Keyspace replayed(8);
        restart(dir, replayed, snapshot);
        EXPECT_EQ(replayed.deadlines(), Deadlines::follow);
        for (const char* key : {"eap", "slide", "dst", "saved"}) {
            SCOPED_TRACE(key);
            ASSERT_TRUE(replayed.contains(key));
            for (const std::string& item : items) {
                EXPECT_TRUE(replayed.get(key)->value.filter().contains(item));
            }
        }
        EXPECT_EQ(*replayed.expiry("eap"), 0);
        EXPECT_GT(*replayed.expiry("slide"), now_ms() + 3000000);
        EXPECT_FALSE(replayed.contains("gone"));  // hidden...
        EXPECT_EQ(replayed.size(), 5u);           // ...until the server decides
        replayed.set_deadlines(Deadlines::enforce);
        EXPECT_EQ(replayed.expire_past_deadlines(), 1u);
        EXPECT_EQ(replayed.size(), 4u);
    }
}

}  // namespace
}  // namespace bloomery::store
