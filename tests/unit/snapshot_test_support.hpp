#pragma once
// What the snapshot tests share (snapshot_test.cpp, snapshot_reader_test.cpp):
// a temporary directory, raw file bytes and little-endian fields in them, the
// offsets of the fields of a one-key file, filters to save, save and load
// round trips, and the comparison that says a loaded filter is the saved one.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/keyspace.hpp"
#include "temp_dir.hpp"

namespace bloomery::persist::snapshot_testing {

namespace fs = std::filesystem;
using bloom::FilterOptions;
using bloom::ScalableFilter;
using store::FilterRef;
using store::Keyspace;

class TempDir : public bloomery::testing::ScratchDir {
public:
    TempDir() : ScratchDir("snapshot_test") {}
    std::string file(const std::string& name) const { return (path() / name).string(); }
    std::vector<std::string> names() const {
        std::vector<std::string> result;
        for (const auto& entry : fs::directory_iterator(path())) {
            result.push_back(entry.path().filename().string());
        }
        return result;
    }
};

inline std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
    // Unlink first: truncating a file and rewriting it makes ext4
    // (auto_da_alloc) flush it to disk, 10x slower over thousands of files.
    std::error_code ignored;
    fs::remove(path, ignored);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::uint64_t get_u64(const std::string& bytes, std::size_t offset) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
        v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
    }
    return v;
}

inline void put_u64(std::string& bytes, std::size_t offset, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes[offset + i] = static_cast<char>(v >> (8 * i));
}

inline void put_u32(std::string& bytes, std::size_t offset, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes[offset + i] = static_cast<char>(v >> (8 * i));
}

inline FilterRef make_filter(const FilterOptions& options, const std::string& prefix, int items) {
    FilterRef filter = ScalableFilter::create(options);
    for (int i = 0; i < items; ++i) filter->add(prefix + std::to_string(i), bloom::GrowthLimits{});
    return filter;
}

inline std::vector<std::uint64_t> words_of(const bloom::BloomLayer& layer) {
    std::vector<std::uint64_t> words(layer.num_words());
    layer.copy_words(0, words.size(), words.data());
    return words;
}

inline void expect_same_filter(const ScalableFilter& expected, const ScalableFilter& actual,
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

inline bool save(const Keyspace& keyspace, const std::string& path,
                 std::string* error_out = nullptr) {
    const core::Result<SaveStats> saved = save_snapshot(keyspace, path);
    if (error_out) *error_out = saved.ok() ? std::string() : saved.error();
    EXPECT_TRUE(saved.ok() || !saved.error().empty());
    return saved.ok();
}

// Saves `keyspace`, loads it into a fresh keyspace and returns that.
inline std::unique_ptr<Keyspace> round_trip(const Keyspace& keyspace, const TempDir& dir) {
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
inline std::string small_file(const TempDir& dir) {
    Keyspace keyspace(4);
    keyspace.put("k", make_filter({0.01, 10, 2, false}, "item-", 5));
    const std::string path = dir.file("small.bloomery");
    EXPECT_TRUE(save(keyspace, path));
    return read_bytes(path);
}

// A small file with several kinds of record: scaling with two layers,
// nonscaling, expiring, empty.
inline std::string varied_small_file(const TempDir& dir) {
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
inline std::string load_error(const TempDir& dir, const std::string& bytes) {
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

}  // namespace bloomery::persist::snapshot_testing
