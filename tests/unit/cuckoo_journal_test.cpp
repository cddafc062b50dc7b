// Cuckoo filters in the journal and snapshots (proto/journal.md, "Cuckoo
// filters"): each change is recorded with its number under the filter's
// lock, replay redoes exactly the placements that were made, and a snapshot
// that copied a filter after its cut is completed by the changes it lacks,
// never by those it holds.

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "journal_test_support.hpp"

namespace bloomery::persist {
namespace {

using namespace bloomery::persist::journal_testing;  // the journal tests' helpers
using cuckoo::CuckooFilter;
using cuckoo::CuckooObject;
using store::CuckooChange;
using store::Keyspace;

cuckoo::CuckooParams small_params() {
    cuckoo::CuckooParams params;
    params.capacity = 32;
    params.expansion = 2;
    params.max_iterations = 50;
    return params;
}

void reserve(Keyspace& keyspace, const std::string& key) {
    ASSERT_TRUE(
        keyspace.insert_new(key, CuckooObject::make(*CuckooFilter::create(small_params()))));
}

// CF.ADD as the server runs it; whether it was inserted.
bool cf_add(Keyspace& keyspace, const std::string& key, const std::string& item) {
    cuckoo::InsertRecord record;
    const std::uint64_t hash = cuckoo::cuckoo_hash(item);
    EXPECT_TRUE(keyspace.change_cuckoo(key, nullptr, 0,
                                       [&](CuckooFilter& f) -> std::optional<CuckooChange> {
                                           record = f.insert(hash);
                                           if (record.status != cuckoo::InsertStatus::inserted) {
                                               return std::nullopt;
                                           }
                                           return CuckooChange::inserted(record);
                                       }));
    return record.status == cuckoo::InsertStatus::inserted;
}

bool cf_del(Keyspace& keyspace, const std::string& key, const std::string& item) {
    cuckoo::DeleteRecord record;
    const std::uint64_t hash = cuckoo::cuckoo_hash(item);
    EXPECT_TRUE(keyspace.change_cuckoo(key, nullptr, 0,
                                       [&](CuckooFilter& f) -> std::optional<CuckooChange> {
                                           record = f.remove(hash);
                                           if (!record.deleted) return std::nullopt;
                                           return CuckooChange::removed(record);
                                       }));
    return record.deleted;
}

void cf_compact(Keyspace& keyspace, const std::string& key) {
    EXPECT_TRUE(
        keyspace.change_cuckoo(key, nullptr, 0, [](CuckooFilter& f) -> std::optional<CuckooChange> {
            f.compact(true);
            return CuckooChange::compacted();
        }));
}

std::uint64_t changes_of(const Keyspace& keyspace, const std::string& key) {
    return keyspace.get(key)->value.cuckoo().changes();
}

TEST(CuckooJournal, InsertsRelocationsGrowthDeletesAndCompactionsReplayExactly) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::always);
    reserve(live.keyspace, "c");
    for (int i = 0; i < 600; ++i) cf_add(live.keyspace, "c", "item" + std::to_string(i));
    for (int i = 0; i < 600; i += 3)
        EXPECT_TRUE(cf_del(live.keyspace, "c", "item" + std::to_string(i)));
    cf_compact(live.keyspace, "c");
    for (int i = 600; i < 700; ++i) cf_add(live.keyspace, "c", "item" + std::to_string(i));
    EXPECT_GT(live.keyspace.get("c")->value.cuckoo().lock().filter().num_filters(), 3);
    // COPY's path: a filled filter linked with its slots as fill records.
    ASSERT_TRUE(live.keyspace.restore(
        "copy", CuckooObject::make(live.keyspace.get("c")->value.cuckoo().lock().filter())));
    cf_add(live.keyspace, "copy", "after the copy");
    live.close();
    Keyspace replayed(8);
    replay_into(dir, replayed);
    expect_exact_replay(live.keyspace, replayed);
}

// Threads adding and deleting items of a small pool on one filter: every
// relocation depends on the order of the changes before it.
void race(Keyspace& keyspace, int threads, int rounds) {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            unsigned state = 2654435761u * static_cast<unsigned>(t + 1);
            for (int i = 0; i < rounds; ++i) {
                state = state * 1103515245u + 12345u;
                const std::string item = "i" + std::to_string((state >> 8) % 5000);
                if ((state >> 20) % 3 != 0) {
                    cf_add(keyspace, "r", item);
                } else {
                    cf_del(keyspace, "r", item);
                }
            }
        });
    }
    for (auto& worker : workers) worker.join();
}

TEST(CuckooJournal, ChangesRacingOnThreadsReplayExactly) {
    TempDir dir;
    Journaled live(dir, FsyncPolicy::everysec);
    reserve(live.keyspace, "r");
    race(live.keyspace, 4, 2000);
    live.close();
    Keyspace replayed(8);
    replay_into(dir, replayed);
    expect_exact_replay(live.keyspace, replayed);
}

TEST(CuckooJournal, SnapshotsTakenWhileAFilterChangesRestartExactly) {
    // A snapshot copies each Cuckoo filter when it reaches it, after its cut,
    // with the number of its last change: replay skips what it holds.
    TempDir dir;
    const std::string dump = dir.str() + "/dump.bloomery";
    Journaled live(dir, FsyncPolicy::everysec);
    reserve(live.keyspace, "r");
    // A big Bloom filter first in no particular order: writing it takes a
    // while, so the Cuckoo filter changes between the cut and its copy.
    ASSERT_TRUE(live.keyspace.insert_new("big", ScalableFilter::create(small_options(2000000))));
    const int rounds = snapshots_while(live, dump, [&] { race(live.keyspace, 2, 20000); });
    live.close();
    Keyspace restarted(8);
    restart_from(dir, dump, restarted);
    expect_exact_replay(live.keyspace, restarted);
    std::printf("[ measured ] %d snapshots while two threads changed a Cuckoo filter\n", rounds);
}

TEST(CuckooJournal, RedoSkipsWhatTheFilterHoldsAndRefusesAGap) {
    Keyspace keyspace(8);
    reserve(keyspace, "c");
    CuckooObject& object = keyspace.get("c")->value.cuckoo();
    cuckoo::InsertRecord record = object.lock().filter().insert(cuckoo::cuckoo_hash("a"));
    // Redone as change 1, it is applied; again as change 1, skipped.
    ASSERT_TRUE(keyspace.redo_cuckoo(object, 1, CuckooChange::inserted(record)).ok());
    EXPECT_EQ(object.changes(), 1u);
    EXPECT_EQ(object.lock().filter().num_items(), 2u);  // the insert above and its redo
    ASSERT_TRUE(keyspace.redo_cuckoo(object, 1, CuckooChange::inserted(record)).ok());
    EXPECT_EQ(object.lock().filter().num_items(), 2u);
    // Change 3 without change 2: refused, nothing changed.
    const core::Status gap = keyspace.redo_cuckoo(object, 3, CuckooChange::compacted());
    ASSERT_FALSE(gap.ok());
    EXPECT_NE(gap.error().find("missing before change 3"), std::string::npos) << gap.error();
    EXPECT_EQ(object.changes(), 1u);
    // A placement that does not fit the filter is refused.
    cuckoo::InsertRecord wrong = record;
    wrong.placed.offset = 1u << 30;
    EXPECT_FALSE(keyspace.redo_cuckoo(object, 2, CuckooChange::inserted(wrong)).ok());
    EXPECT_EQ(object.changes(), 1u);
}

TEST(CuckooJournal, ARecordIsSealedInTheRoomReservedBeforeTheChange) {
    // Once the filter changed, its record cannot fail: sealing writes into
    // what reserve_cuckoo_change() allocated, for any change within it.
    TempDir dir;
    Journaled live(dir, FsyncPolicy::always);
    cuckoo::InsertRecord insert;
    insert.status = cuckoo::InsertStatus::inserted;
    insert.filters = 3;
    insert.fingerprint = 7;
    insert.placed = {1, 40};
    insert.relocations.assign(20, {9, {1, 40}, {2, 300}});
    const cuckoo::DeleteRecord remove{true, {2, 5}, true};
    for (const CuckooChange& change :
         {CuckooChange::inserted(insert), CuckooChange::removed(remove), CuckooChange::compacted(),
          CuckooChange::chunk(77, "slots")}) {
        store::EncodedRecord block = live.journal.reserve_cuckoo_change(20, 5);
        const std::size_t room = block->bytes.capacity();
        const char* where = block->bytes.data();
        live.journal.seal_cuckoo_change(*block, 12, 34, change);
        EXPECT_EQ(block->bytes.capacity(), room);
        EXPECT_EQ(block->bytes.data(), where) << "sealing allocated";
    }
    // Room for 65535 relocations (MAXITERATIONS' most) is not kept by a
    // change that took none.
    store::EncodedRecord wide = live.journal.reserve_cuckoo_change(65535, 0);
    EXPECT_GT(wide->bytes.capacity(), 1000000u);
    live.journal.seal_cuckoo_change(*wide, 12, 35, CuckooChange::compacted());
    EXPECT_LE(wide->bytes.capacity(), wide->bytes.size() + 4096);
}

TEST(CuckooJournal, MigratesDeleteKeepsAFilterThatChangedSinceItWasSent) {
    Keyspace keyspace(8);
    reserve(keyspace, "c");
    cf_add(keyspace, "c", "a");
    const cuckoo::CuckooObject* sent = &keyspace.get("c")->value.cuckoo();
    const std::uint64_t changes = changes_of(keyspace, "c");
    cf_del(keyspace, "c", "a");
    cf_add(keyspace, "c", "a");  // the same items, but two changes later
    EXPECT_EQ(keyspace.erase_if_unchanged("c", sent, changes), Keyspace::EraseIf::changed);
    EXPECT_EQ(keyspace.erase_if_unchanged("c", sent, changes_of(keyspace, "c")),
              Keyspace::EraseIf::erased);
    EXPECT_FALSE(keyspace.contains("c"));
}

}  // namespace
}  // namespace bloomery::persist
