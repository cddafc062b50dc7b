// What the snapshot reader refuses (proto/snapshot.md), with the file, key
// and offset named: every truncation and bit flip, trailing garbage, foreign
// files, unsupported versions, absurd sizes with valid checksums; and
// --check-snapshot's description of a good file and verdict on a bad one.

#include "bloomery/persist/snapshot.hpp"

#include <gtest/gtest.h>

#include <xxhash.h>

#include <string>
#include <vector>

#include "snapshot_test_support.hpp"

namespace bloomery::persist {
namespace {

using namespace bloomery::persist::snapshot_testing;  // the snapshot tests' helpers
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
    // The layer header is 37 bytes, then its first run's zeros and count.
    const std::size_t word_offset = kLayerOffset + 37 + 16;
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
    put_u32(bytes, 8, 6);
    std::string error = load_error(dir, bytes);
    EXPECT_NE(error.find("unsupported snapshot format version 6"), std::string::npos) << error;
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
        // Runs leave zero words out: a layer's size is bounded by memory.
        {"terabyte layer", kLayerBitsOffset, std::uint64_t{1} << 43, 8,
         "bytes of memory this process may use"},
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
    EXPECT_NE(report.find("format version: 5"), std::string::npos) << report;
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

}  // namespace
}  // namespace bloomery::persist
