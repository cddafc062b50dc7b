#pragma once
// What the journal tests share (journal_test.cpp, journal_write_test.cpp,
// journal_transactions_test.cpp): a temporary directory, a keyspace with a
// journal attached as the server runs it, adds through the keyspace's write
// path, replays, and the comparisons that say a replay is exact.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "bloomery/bloom/age_header.hpp"
#include "bloomery/bloom/dump.hpp"
#include "bloomery/persist/dump_payload.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/journal_reader.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/keyspace.hpp"
#include "temp_dir.hpp"

namespace bloomery::persist::journal_testing {

namespace fs = std::filesystem;
using bloom::AddResult;
using bloom::FilterOptions;
using bloom::ScalableFilter;
using store::Keyspace;

class TempDir : public bloomery::testing::ScratchDir {
public:
    TempDir() : ScratchDir("journal_test") {}
    std::vector<std::string> segments() const {
        std::vector<std::string> out;
        for (const auto& entry : fs::directory_iterator(path())) {
            const std::string name = entry.path().filename().string();
            if (name.rfind("journal.", 0) == 0 && name.find(".stale") == std::string::npos) {
                out.push_back(entry.path().string());
            }
        }
        std::sort(out.begin(), out.end());
        return out;
    }
};

inline FilterOptions small_options(std::uint64_t capacity = 50) {
    FilterOptions options;
    options.error_rate = 0.01;
    options.capacity = capacity;
    options.expansion = 2;
    options.layout = bloom::Layout::classic;
    return options;
}

// BF.MADD as the server runs it: the keyspace's write path, creating the key.
inline std::vector<AddResult> add_items(Keyspace& keyspace, const std::string& key,
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
inline AddResult add_recorded(Journal& journal, ScalableFilter& filter, const std::string& item) {
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
// The bytes of a Cuckoo filter (its DUMP payload: header, counts, every
// slot) and the number of its last change.
inline std::pair<std::string, std::uint64_t> cuckoo_state(const store::ValueRef& value) {
    const cuckoo::CuckooObject::Copy copy = value.cuckoo().copy();
    return {cuckoo_dump_payload(copy.filter), copy.changes};
}

// Two expiring filters alike: header (geometry, generation, last shift),
// every word, and the count of every live generation.
inline void expect_same_age_filter(const bloom::AgeFilter& a, const bloom::AgeFilter& b) {
    EXPECT_EQ(bloom::encode_age_header(a), bloom::encode_age_header(b));
    ASSERT_EQ(a.num_words(), b.num_words());
    std::uint64_t differ = 0;
    for (std::uint64_t w = 0; w < a.num_words(); ++w) differ += a.load_word(w) != b.load_word(w);
    EXPECT_EQ(differ, 0u) << "words differ";
    for (std::uint64_t back = 0; back < a.slices() && back <= a.generation(); ++back) {
        const std::uint64_t generation = a.generation() - back;
        EXPECT_EQ(a.generation_count(generation), b.generation_count(generation))
            << "generation " << generation;
    }
}

inline void expect_same_keyspace(const Keyspace& a, const Keyspace& b) {
    for_each_key_in_both(a, b, [](const auto& ea, const auto& eb) {
        EXPECT_EQ(eb.expire_at_ms, ea.expire_at_ms);
        ASSERT_EQ(ea.value.kind(), eb.value.kind());
        if (ea.value.kind() == store::ValueKind::cuckoo) {
            EXPECT_TRUE(cuckoo_state(ea.value) == cuckoo_state(eb.value)) << "Cuckoo filter";
            return;
        }
        if (ea.value.kind() == store::ValueKind::age) {
            expect_same_age_filter(ea.value.age(), eb.value.age());
            return;
        }
        EXPECT_EQ(bloom::encode_header(ea.value.filter()), bloom::encode_header(eb.value.filter()));
        EXPECT_EQ(ea.value.filter().items(), eb.value.filter().items());
        for_each_chunk_pair(ea.value.filter(), eb.value.filter(),
                            [](std::int64_t iter, const auto& ca, const auto& cb) {
                                ASSERT_TRUE(ca.data == cb.data) << "chunk " << iter;
                            });
    });
}

// Exactness (proto/journal.md): a replay gives back the same filters, by
// id, with the same layers, counts and bits.
inline void expect_exact_replay(const Keyspace& live, const Keyspace& replayed) {
    for_each_key_in_both(live, replayed, [&](const auto& ea, const auto& eb) {
        EXPECT_EQ(ea.value.id(), eb.value.id());
    });
    expect_same_keyspace(live, replayed);
}

// Replays `dir` into a fresh keyspace expecting a refusal; returns why.
inline std::string refused_replay(const TempDir& dir) {
    Keyspace refused(8);
    const core::Result<ReplayStats> replayed =
        replay_journal(dir.str(), "journal", std::nullopt, refused);
    EXPECT_FALSE(replayed.ok());
    return replayed.ok() ? std::string() : replayed.error();
}

// A closed journal in `dir` of `count` adds to "k" (items "0", "1", ...);
// returns its one segment's path.
inline std::string journal_of_adds(const TempDir& dir, FsyncPolicy policy, int count) {
    {
        Journaled live(dir, policy);
        for (int i = 0; i < count; ++i) live.add("k", std::to_string(i));
    }
    return dir.segments().front();
}

// Replays `dir` into `keyspace`, loaded from a snapshot covering `snapshot`
// (none: nothing loaded), expecting it to succeed.
inline ReplayStats replay_into(const TempDir& dir, Keyspace& keyspace,
                               const std::optional<JournalCoverage>& snapshot = std::nullopt) {
    const core::Result<ReplayStats> replayed =
        replay_journal(dir.str(), "journal", snapshot, keyspace);
    EXPECT_TRUE(replayed.ok()) << replayed.error();
    return replayed.ok() ? *replayed : ReplayStats{};
}

// Closes `live`'s journal, replays it into a fresh keyspace and expects
// exactly `live`'s keys and filters back.
inline void expect_journal_gives_back(const TempDir& dir, Journaled& live) {
    Keyspace replayed(8);
    live.close();
    replay_into(dir, replayed);
    expect_exact_replay(live.keyspace, replayed);
}

// A snapshot of `live` into `dump` as the server takes one: a new journal
// segment first, the segments it covers dropped after.
inline void snapshot_and_drop_covered(Journaled& live, const std::string& dump) {
    live.journal.rotate();
    const core::Result<SaveStats> saved = save_snapshot(live.keyspace, dump);
    ASSERT_TRUE(saved.ok()) << saved.error();
    live.journal.drop_covered(saved->journal_offset);
}

// Runs `change` on a thread while snapshots of `live` are taken into `dump`
// one after another (at least one); returns how many.
template <class Change>
int snapshots_while(Journaled& live, const std::string& dump, Change&& change) {
    std::atomic<bool> done{false};
    std::thread changer([&] {
        change();
        done = true;
    });
    int rounds = 0;
    while (!done.load() || rounds == 0) {
        snapshot_and_drop_covered(live, dump);
        ++rounds;
    }
    changer.join();
    return rounds;
}

// Loads `dump` and replays the journal of `dir` after it into `restarted`:
// a restart.
inline void restart_from(const TempDir& dir, const std::string& dump, Keyspace& restarted) {
    const core::Result<LoadStats> loaded = load_snapshot(dump, restarted);
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    replay_into(dir, restarted, JournalCoverage{loaded->journal_id, loaded->journal_offset});
}

}  // namespace bloomery::persist::journal_testing
