#include "bloomery/persist/snapshot.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace bloomery::persist {
namespace {

namespace fs = std::filesystem;
using bloom::FilterOptions;
using bloom::ScalableFilter;
using store::FilterRef;
using store::Keyspace;

// Offsets of the single-key file built by SmallFile() (key "k", one layer),
// from proto/snapshot.md: record at 20, key length at +1, layer at +38+L.
constexpr std::size_t kRecordOffset = 36;  // after the version 3 (and 4) header
constexpr std::size_t kKeyLengthOffset = kRecordOffset + 1;
constexpr std::size_t kErrorRateOffset = kRecordOffset + 21 + 1;  // after the filter id
constexpr std::size_t kExpansionOffset = kRecordOffset + 37 + 1;
constexpr std::size_t kLayerCountOffset = kRecordOffset + 44 + 1;  // after the scheme byte
constexpr std::size_t kLayerOffset = kRecordOffset + 48 + 1;
constexpr std::size_t kLayerBitsOffset = kLayerOffset + 16;
constexpr std::size_t kLayerHashesOffset = kLayerOffset + 24;

class TempDir {
public:
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string pattern = std::string(base ? base : "/tmp") + "/snapshot_test.XXXXXX";
        if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    std::string file(const std::string& name) const { return (path_ / name).string(); }
    const fs::path& path() const { return path_; }
    std::vector<std::string> names() const {
        std::vector<std::string> result;
        for (const auto& entry : fs::directory_iterator(path_)) {
            result.push_back(entry.path().filename().string());
        }
        return result;
    }

private:
    fs::path path_;
};

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
    // Unlink first: truncating a file and rewriting it makes ext4
    // (auto_da_alloc) flush it to disk, 10x slower over thousands of files.
    std::error_code ignored;
    fs::remove(path, ignored);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::uint64_t get_u64(const std::string& bytes, std::size_t offset) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
        v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
    }
    return v;
}

void put_u64(std::string& bytes, std::size_t offset, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes[offset + i] = static_cast<char>(v >> (8 * i));
}

void put_u32(std::string& bytes, std::size_t offset, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes[offset + i] = static_cast<char>(v >> (8 * i));
}

FilterRef make_filter(const FilterOptions& options, const std::string& prefix, int items) {
    FilterRef filter = ScalableFilter::create(options);
    for (int i = 0; i < items; ++i) filter->add(prefix + std::to_string(i), bloom::GrowthLimits{});
    return filter;
}

std::vector<std::uint64_t> words_of(const bloom::BloomLayer& layer) {
    std::vector<std::uint64_t> words(layer.num_words());
    layer.copy_words(0, words.size(), words.data());
    return words;
}

void expect_same_filter(const ScalableFilter& expected, const ScalableFilter& actual,
                        const std::string& prefix, int items) {
    EXPECT_EQ(expected.options().error_rate, actual.options().error_rate);
    EXPECT_EQ(expected.options().capacity, actual.options().capacity);
    EXPECT_EQ(expected.options().expansion, actual.options().expansion);
    EXPECT_EQ(expected.options().nonscaling, actual.options().nonscaling);
    ASSERT_EQ(expected.num_layers(), actual.num_layers());
    for (std::size_t i = 0; i < expected.num_layers(); ++i) {
        const bloom::BloomLayer& a = expected.layer(i);
        const bloom::BloomLayer& b = actual.layer(i);
        EXPECT_EQ(a.capacity(), b.capacity());
        EXPECT_EQ(a.error_rate(), b.error_rate());
        EXPECT_EQ(a.bits(), b.bits());
        EXPECT_EQ(a.hashes(), b.hashes());
        EXPECT_EQ(a.items(), b.items());
        EXPECT_EQ(words_of(a), words_of(b)) << "layer " << i;
    }
    // Added items and items never added (some of which are false positives)
    // must get the same answers.
    for (int i = 0; i < items; ++i) {
        ASSERT_TRUE(actual.contains(prefix + std::to_string(i)));
    }
    for (int i = 0; i < 2000; ++i) {
        const std::string probe = "absent-" + std::to_string(i);
        ASSERT_EQ(expected.contains(probe), actual.contains(probe)) << probe;
    }
}

bool save(const Keyspace& keyspace, const std::string& path, std::string* error_out = nullptr) {
    const core::Result<SaveStats> saved = save_snapshot(keyspace, path);
    if (error_out) *error_out = saved.ok() ? std::string() : saved.error();
    EXPECT_TRUE(saved.ok() || !saved.error().empty());
    return saved.ok();
}

// Saves `keyspace`, loads it into a fresh keyspace and returns that.
std::unique_ptr<Keyspace> round_trip(const Keyspace& keyspace, const TempDir& dir) {
    const std::string path = dir.file("dump.bloomery");
    const core::Result<SaveStats> saved = save_snapshot(keyspace, path);
    EXPECT_TRUE(saved.ok()) << saved.error();
    const SaveStats save_stats = saved.ok() ? *saved : SaveStats{};
    EXPECT_EQ(save_stats.keys, keyspace.size());
    EXPECT_EQ(save_stats.bytes, fs::file_size(path));
    auto loaded = std::make_unique<Keyspace>(16);
    const core::Result<LoadStats> read = load_snapshot(path, *loaded);
    EXPECT_TRUE(read.ok()) << read.error();
    const LoadStats load_stats = read.ok() ? *read : LoadStats{};
    EXPECT_EQ(load_stats.keys, keyspace.size());
    EXPECT_EQ(load_stats.bytes, save_stats.bytes);
    EXPECT_EQ(load_stats.past_deadline, 0u);
    return loaded;
}

// A small, complete file: one scaling key "k" with one 128-bit layer.
std::string small_file(const TempDir& dir) {
    Keyspace keyspace(4);
    keyspace.put("k", make_filter({0.01, 10, 2, false}, "item-", 5));
    const std::string path = dir.file("small.bloomery");
    EXPECT_TRUE(save(keyspace, path));
    return read_bytes(path);
}

// A small file with several kinds of record: scaling with two layers,
// nonscaling, expiring, empty.
std::string varied_small_file(const TempDir& dir) {
    Keyspace keyspace(4);
    keyspace.put("grown", make_filter({0.1, 4, 2, false}, "g-", 8));
    keyspace.put("fixed", make_filter({0.05, 8, 2, true}, "f-", 3));
    keyspace.put("later", make_filter({0.2, 4, 2, false}, "l-", 2), store::now_ms() + 3600'000);
    keyspace.put(std::string("\0empty", 6), make_filter({0.3, 2, 2, false}, "", 0));
    const std::string path = dir.file("varied.bloomery");
    EXPECT_TRUE(save(keyspace, path));
    return read_bytes(path);
}

// Loads `bytes` from a file; returns the error (empty if it loaded) and checks
// that a failed load left the keyspace empty.
std::string load_error(const TempDir& dir, const std::string& bytes) {
    const std::string path = dir.file("candidate.bloomery");
    write_bytes(path, bytes);
    Keyspace keyspace(4);
    const core::Result<LoadStats> loaded = load_snapshot(path, keyspace);
    if (loaded) return "";
    const std::string& error = loaded.error();
    EXPECT_EQ(keyspace.size(), 0u) << "a failed load inserted keys";
    EXPECT_FALSE(error.empty());
    EXPECT_NE(error.find(path), std::string::npos) << error;
    return error;
}

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
    expect_same_filter(*keyspace.get("crawler")->filter, *loaded.get("crawler")->filter, "url-",
                       2000);

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
    expect_same_filter(*filter, *entry->filter, "url-", 2000);
}

TEST(SnapshotRoundTrip, NonscalingFilterStaysNonscaling) {
    TempDir dir;
    Keyspace keyspace(8);
    auto filter = make_filter({0.001, 500, 2, true}, "n-", 500);
    keyspace.put("fixed", filter);
    auto loaded = round_trip(keyspace, dir);
    auto entry = loaded->get("fixed");
    ASSERT_TRUE(entry);
    expect_same_filter(*filter, *entry->filter, "n-", 500);
    EXPECT_EQ(entry->filter->add("one-more", bloom::GrowthLimits{}), bloom::AddResult::full);
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
    expect_same_filter(*filter, *entry->filter, "e-", 40);
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
    expect_same_filter(*filter, *entry->filter, "", 0);
    EXPECT_EQ(entry->filter->items(), 0u);
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
            ASSERT_EQ(words_of(filters[k]->layer(i)), words_of(entry->filter->layer(i)));
        }
        for (int i = 0; i < k % 25; ++i) {
            ASSERT_TRUE(entry->filter->contains("k" + std::to_string(k) + "-" + std::to_string(i)));
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
        EXPECT_TRUE(entry->filter->contains(key + "0"));
    }
}

TEST(SnapshotLoad, KeepsKeysWhoseDeadlinePassedUntilTheServerDecidesAndCountsThem) {
    TempDir dir;
    Keyspace keyspace(8);
    keyspace.put("long", make_filter({0.01, 10, 2, false}, "l", 3), store::now_ms() + 3600'000);
    keyspace.put("forever", make_filter({0.01, 10, 2, false}, "f", 3));
    const std::string path = dir.file("dump.bloomery");
    // "short" must still be live when it is saved and past its deadline when
    // loaded: a save that outlasts the deadline (a sanitizer on a busy
    // machine) is taken again with a later one.
    std::int64_t short_deadline = 0;
    for (std::int64_t margin_ms = 200;; margin_ms *= 4) {
        ASSERT_LT(margin_ms, 600'000) << "every save outlasted its key's deadline";
        short_deadline = store::now_ms() + margin_ms;
        keyspace.put("short", make_filter({0.01, 10, 2, false}, "s", 3), short_deadline);
        ASSERT_TRUE(save(keyspace, path));
        if (store::now_ms() < short_deadline) break;
    }
    while (store::now_ms() <= short_deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }

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

TEST(SnapshotReader, RejectsTruncationAtEveryOffset) {
    TempDir dir;
    const std::string bytes = varied_small_file(dir);
    ASSERT_LT(bytes.size(), 2000u);
    for (std::size_t length = 0; length < bytes.size(); ++length) {
        const std::string error = load_error(dir, bytes.substr(0, length));
        ASSERT_FALSE(error.empty()) << "truncated to " << length << " bytes loaded";
        if (length >= 20) {
            EXPECT_NE(error.find("truncated"), std::string::npos) << error;
        }
    }
    EXPECT_EQ(load_error(dir, bytes), "");
}

TEST(SnapshotReader, RejectsEverySingleBitFlip) {
    TempDir dir;
    const std::string bytes = varied_small_file(dir);
    for (std::size_t offset = 0; offset < bytes.size(); ++offset) {
        for (int bit = 0; bit < 8; ++bit) {
            std::string flipped = bytes;
            flipped[offset] = static_cast<char>(flipped[offset] ^ (1 << bit));
            ASSERT_FALSE(load_error(dir, flipped).empty())
                << "flip of bit " << bit << " at offset " << offset << " loaded";
        }
    }
}

TEST(SnapshotReader, NamesRecordKeyAndOffsetOfACorruptRecord) {
    TempDir dir;
    std::string bytes = small_file(dir);
    const std::size_t word_offset = kLayerOffset + 37;  // the layer header is 37 bytes
    bytes[word_offset] = static_cast<char>(bytes[word_offset] ^ 0x10);
    const std::string error = load_error(dir, bytes);
    EXPECT_NE(error.find("record 1 (key 'k') at offset "), std::string::npos) << error;
    EXPECT_NE(error.find("record checksum mismatch"), std::string::npos) << error;
}

TEST(SnapshotReader, RejectsTrailingGarbage) {
    TempDir dir;
    const std::string error = load_error(dir, small_file(dir) + std::string(1, '\0'));
    EXPECT_NE(error.find("trailing garbage"), std::string::npos) << error;
}

TEST(SnapshotReader, RejectsForeignFileWithClearMessage) {
    TempDir dir;
    std::string error = load_error(dir,
                                   "REDIS0011\xfa\x09redis-ver\x05"
                                   "7.0.0");
    EXPECT_NE(error.find("not a bloomery snapshot"), std::string::npos) << error;
    error = load_error(dir, "");
    EXPECT_NE(error.find("not a bloomery snapshot"), std::string::npos) << error;
}

TEST(SnapshotReader, RejectsUnsupportedVersionWithClearMessage) {
    TempDir dir;
    std::string bytes = small_file(dir);
    put_u32(bytes, 8, 5);
    std::string error = load_error(dir, bytes);
    EXPECT_NE(error.find("unsupported snapshot format version 5"), std::string::npos) << error;
    put_u32(bytes, 8, 0);
    error = load_error(dir, bytes);
    EXPECT_NE(error.find("unsupported snapshot format version 0"), std::string::npos) << error;
}

// Corrupts one field and recomputes both checksums, so only the range checks
// stand between the file and the loader.
std::string with_valid_checksums(std::string bytes) {
    const std::size_t record_end = bytes.size() - 17 - 8;
    put_u64(bytes, record_end, XXH64(bytes.data() + kRecordOffset, record_end - kRecordOffset, 0));
    put_u64(bytes, bytes.size() - 8, XXH64(bytes.data(), bytes.size() - 8, 0));
    return bytes;
}

TEST(SnapshotReader, RejectsAbsurdSizesBeforeAllocating) {
    TempDir dir;
    const std::string good = small_file(dir);
    ASSERT_EQ(get_u64(good, kLayerBitsOffset), 128u) << "layout assumed by this test changed";
    ASSERT_EQ(load_error(dir, with_valid_checksums(good)), "");

    struct Case {
        const char* what;
        std::size_t offset;
        std::uint64_t value;
        int width;
        const char* expected;
    };
    const Case cases[] = {
        {"key length past end", kKeyLengthOffset, 0xffffffffu, 4, "key length"},
        {"terabyte layer", kLayerBitsOffset, std::uint64_t{1} << 43, 8, "bytes left in the file"},
        {"bits not multiple of 64", kLayerBitsOffset, 100, 8, "not a positive multiple of 64"},
        {"zero bits", kLayerBitsOffset, 0, 8, "not a positive multiple of 64"},
        {"zero hashes", kLayerHashesOffset, 0, 4, "hash count not in [1, 128]"},
        {"129 hashes", kLayerHashesOffset, 129, 4, "hash count not in [1, 128]"},
        {"zero layers", kLayerCountOffset, 0, 4, "layer count 0"},
        {"65 layers", kLayerCountOffset, 65, 4, "layer count 65"},
        {"error rate 1", kErrorRateOffset, 0x3ff0000000000000u, 8, "not in (0, 1)"},
        {"expansion 32769", kExpansionOffset, 32769, 4, "expansion not in [1, 32768]"},
        {"expansion 0", kExpansionOffset, 0, 4, "expansion not in [1, 32768]"},
        {"error rate 0", kErrorRateOffset, 0, 8, "not in (0, 1)"},
        {"error rate NaN", kErrorRateOffset, 0x7ff8000000000000u, 8, "not in (0, 1)"},
    };
    for (const Case& c : cases) {
        std::string bytes = good;
        if (c.width == 4) {
            put_u32(bytes, c.offset, static_cast<std::uint32_t>(c.value));
        } else {
            put_u64(bytes, c.offset, c.value);
        }
        const std::string error = load_error(dir, with_valid_checksums(bytes));
        EXPECT_NE(error.find(c.expected), std::string::npos) << c.what << ": " << error;
    }
}

TEST(SnapshotReader, InsertsNothingWhenOnlyTheFileChecksumIsWrong) {
    TempDir dir;
    std::string bytes = varied_small_file(dir);
    bytes.back() = static_cast<char>(bytes.back() ^ 1);
    const std::string error = load_error(dir, bytes);
    EXPECT_NE(error.find("file checksum mismatch"), std::string::npos) << error;
}

TEST(SnapshotReader, ReportsMissingFile) {
    TempDir dir;
    Keyspace keyspace(4);
    const core::Result<LoadStats> loaded = load_snapshot(dir.file("absent.bloomery"), keyspace);
    ASSERT_FALSE(loaded.ok());
    const std::string& error = loaded.error();
    EXPECT_NE(error.find("absent.bloomery"), std::string::npos) << error;
    EXPECT_NE(error.find("No such file or directory"), std::string::npos) << error;
}

TEST(SnapshotCheck, DescribesEveryKeyAndRejectsCorruption) {
    TempDir dir;
    const std::string bytes = varied_small_file(dir);
    const std::string path = dir.file("varied.bloomery");
    const SnapshotCheck checked = check_snapshot(path);
    ASSERT_TRUE(checked.verdict.ok()) << checked.verdict.error();
    const std::string& report = checked.report;
    EXPECT_NE(report.find("format version: 4"), std::string::npos) << report;
    EXPECT_NE(report.find("key 'grown': layers 2"), std::string::npos) << report;
    EXPECT_NE(report.find("key 'fixed': layers 1"), std::string::npos) << report;
    EXPECT_NE(report.find("nonscaling"), std::string::npos) << report;
    EXPECT_NE(report.find("key '\\x00empty'"), std::string::npos) << report;
    EXPECT_NE(report.find("keys: 4"), std::string::npos) << report;
    EXPECT_NE(report.find("checksums: ok"), std::string::npos) << report;

    std::string corrupt = bytes;
    corrupt[corrupt.size() / 2] = static_cast<char>(corrupt[corrupt.size() / 2] ^ 4);
    write_bytes(path, corrupt);
    const SnapshotCheck corrupted = check_snapshot(path);
    ASSERT_FALSE(corrupted.verdict.ok());
    EXPECT_NE(corrupted.verdict.error().find(path), std::string::npos) << corrupted.verdict.error();
    EXPECT_NE(corrupted.report.find("error: "), std::string::npos) << corrupted.report;
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
        ASSERT_TRUE(loaded_before->filter->contains("before-" + std::to_string(i))) << i;
    }
    for (int t = 0; t < kThreads; ++t) {
        for (int i = 0; i < acknowledged_at_start[t]; ++i) {
            const std::string item = "t" + std::to_string(t) + "-" + std::to_string(i);
            ASSERT_TRUE(loaded_busy->filter->contains(item)) << item;
            ASSERT_TRUE(loaded_before->filter->contains(item)) << item;
        }
    }
    EXPECT_LE(loaded_busy->filter->items(), busy->items());
    EXPECT_GT(busy->num_layers(), 1u);
}

}  // namespace
}  // namespace bloomery::persist
