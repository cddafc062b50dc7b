// Snapshots (proto/snapshot.md) through the library: the stream a replica
// receives, round trips of every kind of filter and key, keys whose deadline
// passed, and saves that fail or run beside concurrent adds. Refusal of bad
// files is in snapshot_reader_test.cpp.

#include "bloomery/persist/snapshot.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "snapshot_test_support.hpp"

namespace bloomery::persist {
namespace {

using namespace bloomery::persist::snapshot_testing;  // the snapshot tests' helpers
using bloom::FilterOptions;
using bloom::ScalableFilter;
using store::FilterRef;
using store::Keyspace;

TEST(SnapshotStream, SendsWhatASaveWritesAndStopsWhenTheReceiverGoes) {
    TempDir dir;
    Keyspace keyspace(8);
    keyspace.put("crawler", make_filter({0.01, 100, 2, false}, "url-", 2000));
    keyspace.put("small", make_filter({0.001, 50, 2, false}, "s-", 10));
    std::string streamed;
    std::uint64_t position_calls = 0;
    const core::Result<SaveStats> sent = stream_snapshot(
        keyspace,
        [&](const unsigned char* data, std::size_t size) {
            EXPECT_EQ(position_calls, 1u);  // the position comes before any byte
            streamed.append(reinterpret_cast<const char*>(data), size);
            return true;
        },
        [&](std::uint64_t) { ++position_calls; }, "test");
    ASSERT_TRUE(sent.ok()) << sent.error();
    EXPECT_EQ(position_calls, 1u);
    EXPECT_EQ(sent->keys, 2u);
    EXPECT_EQ(sent->bytes, streamed.size());
    ASSERT_TRUE(save(keyspace, dir.file("saved")));
    // The same file but for the creation time in the header.
    const std::string saved = read_bytes(dir.file("saved"));
    ASSERT_EQ(saved.size(), streamed.size());
    EXPECT_EQ(saved.substr(20, saved.size() - 28), streamed.substr(20, streamed.size() - 28));
    write_bytes(dir.file("streamed"), streamed);
    Keyspace loaded(8);
    const core::Result<LoadStats> read = load_snapshot(dir.file("streamed"), loaded);
    ASSERT_TRUE(read.ok()) << read.error();
    expect_same_filter(keyspace.get("crawler")->value.filter(),
                       loaded.get("crawler")->value.filter(), "url-", 2000);

    std::size_t accepted = 0;
    const core::Result<SaveStats> cut = stream_snapshot(
        keyspace, [&](const unsigned char*, std::size_t) { return accepted++ == 0; }, nullptr,
        "replica x");
    ASSERT_FALSE(cut.ok());
    EXPECT_NE(cut.error().find("replica x"), std::string::npos) << cut.error();
}

TEST(SnapshotRoundTrip, ScalableFilterWithSeveralLayersKeepsWordsAndAnswers) {
    TempDir dir;
    Keyspace keyspace(8);
    auto filter = make_filter({0.01, 100, 2, false}, "url-", 2000);
    ASSERT_GE(filter->num_layers(), 4u);
    keyspace.put("crawler", filter);
    auto loaded = round_trip(keyspace, dir);
    auto entry = loaded->get("crawler");
    ASSERT_TRUE(entry);
    EXPECT_EQ(entry->expire_at_ms, 0);
    expect_same_filter(*filter, entry->value.filter(), "url-", 2000);
}

TEST(SnapshotRoundTrip, NonscalingFilterStaysNonscaling) {
    TempDir dir;
    Keyspace keyspace(8);
    auto filter = make_filter({0.001, 500, 2, true}, "n-", 500);
    keyspace.put("fixed", filter);
    auto loaded = round_trip(keyspace, dir);
    auto entry = loaded->get("fixed");
    ASSERT_TRUE(entry);
    expect_same_filter(*filter, entry->value.filter(), "n-", 500);
    EXPECT_EQ(entry->value.filter().add("one-more", bloom::GrowthLimits{}), bloom::AddResult::full);
}

TEST(SnapshotRoundTrip, MultiLineBlockLayersKeepTheirLayoutAndPolicy) {
    TempDir dir;
    Keyspace keyspace(8);
    FilterOptions options{0.01, 30000, 2, false};
    options.layout = bloom::Layout::automatic_blocks;
    auto filter = make_filter(options, "b-", 40000);
    ASSERT_EQ(filter->num_layers(), 2u);
    ASSERT_EQ(filter->layer(0).layout(), bloom::Layout::blocked_4096);
    keyspace.put("blocks", filter);
    auto loaded = round_trip(keyspace, dir);
    auto entry = loaded->get("blocks");
    ASSERT_TRUE(entry);
    const ScalableFilter& copy = entry->value.filter();
    expect_same_filter(*filter, copy, "b-", 40000);
    EXPECT_EQ(copy.options().layout, bloom::Layout::automatic_blocks);
    for (std::size_t i = 0; i < copy.num_layers(); ++i) {
        EXPECT_EQ(copy.layer(i).layout(), filter->layer(i).layout()) << i;
    }
}

TEST(SnapshotRoundTrip, ExpiringKeyKeepsItsDeadline) {
    TempDir dir;
    Keyspace keyspace(8);
    const std::int64_t deadline = store::now_ms() + 3600'000;
    auto filter = make_filter({0.01, 50, 4, false}, "e-", 40);
    keyspace.put("session", filter, deadline);
    auto loaded = round_trip(keyspace, dir);
    auto entry = loaded->get("session");
    ASSERT_TRUE(entry);
    EXPECT_EQ(entry->expire_at_ms, deadline);
    expect_same_filter(*filter, entry->value.filter(), "e-", 40);
}

TEST(SnapshotRoundTrip, EmptyFilterAndEmptyKeyspace) {
    TempDir dir;
    Keyspace empty(8);
    auto nothing = round_trip(empty, dir);
    EXPECT_EQ(nothing->size(), 0u);
    EXPECT_EQ(fs::file_size(dir.file("dump.bloomery")), 53u);

    Keyspace keyspace(8);
    auto filter = make_filter({0.01, 1000, 2, false}, "", 0);
    keyspace.put("reserved", filter);
    auto loaded = round_trip(keyspace, dir);
    auto entry = loaded->get("reserved");
    ASSERT_TRUE(entry);
    expect_same_filter(*filter, entry->value.filter(), "", 0);
    EXPECT_EQ(entry->value.filter().items(), 0u);
}

TEST(SnapshotRoundTrip, ManyKeysAcrossShards) {
    TempDir dir;
    Keyspace keyspace(64);
    constexpr int kKeys = 300;
    std::vector<FilterRef> filters;
    for (int k = 0; k < kKeys; ++k) {
        filters.push_back(
            make_filter({0.01, 30, 2, k % 3 == 0}, "k" + std::to_string(k) + "-", k % 25));
        keyspace.put("key:" + std::to_string(k), filters.back());
    }
    auto loaded = round_trip(keyspace, dir);
    ASSERT_EQ(loaded->size(), static_cast<std::size_t>(kKeys));
    for (int k = 0; k < kKeys; ++k) {
        auto entry = loaded->get("key:" + std::to_string(k));
        ASSERT_TRUE(entry) << k;
        for (std::size_t i = 0; i < filters[k]->num_layers(); ++i) {
            ASSERT_EQ(words_of(filters[k]->layer(i)), words_of(entry->value.filter().layer(i)));
        }
        for (int i = 0; i < k % 25; ++i) {
            ASSERT_TRUE(
                entry->value.filter().contains("k" + std::to_string(k) + "-" + std::to_string(i)));
        }
    }
}

TEST(SnapshotRoundTrip, BinaryKeyNamesSurviveExactly) {
    TempDir dir;
    Keyspace keyspace(8);
    const std::vector<std::string> keys = {
        std::string("\0", 1),           std::string("a\0b", 3), "\r\n*1\r\n$4\r\nPING\r\n",
        std::string("\xff\xfe\x80", 3), std::string(300, 'x'),  ""};
    for (std::size_t i = 0; i < keys.size(); ++i) {
        keyspace.put(keys[i], make_filter({0.01, 10, 2, false}, keys[i], 3));
    }
    auto loaded = round_trip(keyspace, dir);
    EXPECT_EQ(loaded->size(), keys.size());
    for (const std::string& key : keys) {
        auto entry = loaded->get(key);
        ASSERT_TRUE(entry) << key.size();
        EXPECT_TRUE(entry->value.filter().contains(key + "0"));
    }
}

TEST(SnapshotLoad, KeepsKeysWhoseDeadlinePassedUntilTheServerDecidesAndCountsThem) {
    TempDir dir;
    store::ManualClock clock;
    Keyspace keyspace(8);
    keyspace.put("long", make_filter({0.01, 10, 2, false}, "l", 3), clock.now() + 3600'000);
    keyspace.put("forever", make_filter({0.01, 10, 2, false}, "f", 3));
    const std::string path = dir.file("dump.bloomery");
    // "short" is live when it is saved and past its deadline when loaded.
    keyspace.put("short", make_filter({0.01, 10, 2, false}, "s", 3), clock.now() + 200);
    ASSERT_TRUE(save(keyspace, path));
    clock.advance(std::chrono::milliseconds(201));

    // Loaded as the server loads (following deadlines): "short" stays, for
    // the journal after the snapshot may remove its deadline, and is hidden.
    Keyspace loaded(8);
    loaded.set_deadlines(store::Deadlines::follow);
    const core::Result<LoadStats> stats = load_snapshot(path, loaded);
    ASSERT_TRUE(stats.ok()) << stats.error();
    EXPECT_EQ(stats->keys, 3u);
    EXPECT_EQ(stats->past_deadline, 1u);
    EXPECT_TRUE(loaded.linked("short").has_value());
    EXPECT_FALSE(loaded.contains("short"));
    EXPECT_TRUE(loaded.contains("long"));
    EXPECT_TRUE(loaded.contains("forever"));
    // Once the server decides deadlines, it goes.
    loaded.set_deadlines(store::Deadlines::enforce);
    EXPECT_EQ(loaded.expire_past_deadlines(), 1u);
    EXPECT_FALSE(loaded.linked("short").has_value());
    EXPECT_EQ(loaded.size(), 2u);
}

TEST(SnapshotSave, FailsIntoMissingDirectoryWithoutLeavingFiles) {
    TempDir dir;
    Keyspace keyspace(4);
    keyspace.put("k", make_filter({0.01, 10, 2, false}, "x", 3));
    std::string error;
    EXPECT_FALSE(save(keyspace, dir.file("missing/dump.bloomery"), &error));
    EXPECT_NE(error.find(dir.file("missing/dump.bloomery")), std::string::npos) << error;
    EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
    EXPECT_TRUE(dir.names().empty());
}

TEST(SnapshotSave, FailsWhenParentIsARegularFile) {
    TempDir dir;
    write_bytes(dir.file("plain"), "not a directory");
    Keyspace keyspace(4);
    std::string error;
    EXPECT_FALSE(save(keyspace, dir.file("plain/dump.bloomery"), &error));
    EXPECT_NE(error.find("Not a directory"), std::string::npos) << error;
    EXPECT_EQ(dir.names(), std::vector<std::string>{"plain"});
}

TEST(SnapshotSave, FailedRenameRemovesTemporaryFile) {
    TempDir dir;
    fs::create_directory(dir.file("dump.bloomery"));
    fs::create_directory(dir.file("dump.bloomery/occupied"));  // rename over it fails
    Keyspace keyspace(4);
    keyspace.put("k", make_filter({0.01, 10, 2, false}, "x", 3));
    std::string error;
    EXPECT_FALSE(save(keyspace, dir.file("dump.bloomery"), &error));
    EXPECT_NE(error.find("cannot rename"), std::string::npos) << error;
    EXPECT_EQ(dir.names(), std::vector<std::string>{"dump.bloomery"});
}

// RLIMIT_FSIZE makes write() fail with EFBIG half way through (tests run as
// root, so permissions cannot); in a child so the limit does not leak.
TEST(SnapshotSave, FileSizeLimitKeepsOldSnapshotByteIdentical) {
    TempDir dir;
    const std::string path = dir.file("dump.bloomery");
    Keyspace small(4);
    small.put("old", make_filter({0.01, 10, 2, false}, "o", 3));
    ASSERT_TRUE(save(small, path));
    const std::string old_bytes = read_bytes(path);

    Keyspace big(4);
    big.put("big", make_filter({0.01, 20000, 2, false}, "b", 1000));  // ~24 KiB of words
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::signal(SIGXFSZ, SIG_IGN);
        const rlimit limit{4096, 4096};
        if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(10);
        const core::Result<SaveStats> saved = save_snapshot(big, path);
        if (saved) ::_exit(11);
        if (saved.error().find("File too large") == std::string::npos) ::_exit(12);
        if (saved.error().find(path + ".tmp-") == std::string::npos) ::_exit(13);
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "child died, status " << status;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "10 setrlimit, 11 saved, 12 wrong errno, 13 no name";
    EXPECT_EQ(read_bytes(path), old_bytes);
    EXPECT_EQ(dir.names(), std::vector<std::string>{"dump.bloomery"});
}

TEST(SnapshotSave, ConcurrentAddsKeepEveryItemAcknowledgedBeforeTheSave) {
    TempDir dir;
    Keyspace keyspace(8);
    // Big enough (~3.6 MB, several 1 MiB chunks) that the adds overlap the save.
    auto before = make_filter({0.01, 3'000'000, 2, false}, "before-", 5000);
    keyspace.put("before", before);
    // A small first layer: the writers make it grow new layers during the save.
    FilterRef busy = ScalableFilter::create(FilterOptions{0.01, 200, 2, false});
    keyspace.put("busy", busy);

    constexpr int kThreads = 2;
    constexpr int kMaxAdds = 150000;
    std::atomic<bool> stop{false};
    std::atomic<int> acknowledged[kThreads];
    for (auto& a : acknowledged) a.store(0);
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
        writers.emplace_back([&, t] {
            const std::string prefix = "t" + std::to_string(t) + "-";
            for (int i = 0; i < kMaxAdds && !stop.load(); ++i) {
                busy->add(prefix + std::to_string(i), bloom::GrowthLimits{});
                before->add(prefix + std::to_string(i), bloom::GrowthLimits{});
                acknowledged[t].store(i + 1, std::memory_order_release);
            }
        });
    }
    while (acknowledged[0].load() < 2000 || acknowledged[1].load() < 2000) {
        std::this_thread::yield();
    }
    int acknowledged_at_start[kThreads];
    for (int t = 0; t < kThreads; ++t) acknowledged_at_start[t] = acknowledged[t].load();
    const std::string path = dir.file("dump.bloomery");
    const bool saved = save(keyspace, path);
    stop.store(true);
    for (auto& w : writers) w.join();
    ASSERT_TRUE(saved);

    Keyspace loaded(8);
    const core::Result<LoadStats> stats = load_snapshot(path, loaded);
    ASSERT_TRUE(stats.ok()) << stats.error();
    auto loaded_busy = loaded.get("busy");
    auto loaded_before = loaded.get("before");
    ASSERT_TRUE(loaded_busy && loaded_before);
    for (int i = 0; i < 5000; ++i) {
        ASSERT_TRUE(loaded_before->value.filter().contains("before-" + std::to_string(i))) << i;
    }
    for (int t = 0; t < kThreads; ++t) {
        for (int i = 0; i < acknowledged_at_start[t]; ++i) {
            const std::string item = "t" + std::to_string(t) + "-" + std::to_string(i);
            ASSERT_TRUE(loaded_busy->value.filter().contains(item)) << item;
            ASSERT_TRUE(loaded_before->value.filter().contains(item)) << item;
        }
    }
    EXPECT_LE(loaded_busy->value.filter().items(), busy->items());
    EXPECT_GT(busy->num_layers(), 1u);
}

}  // namespace
}  // namespace bloomery::persist
