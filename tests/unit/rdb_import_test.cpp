// `bloomery --import-rdb`'s reader against Redis 7.0's own SAVE of RedisBloom
// 2.4 filters (tests/fixtures/redisbloom, make_fixtures.py), RedisBloom's
// older value encodings, hand-built values of the types newer Redis versions
// write, and corrupt files.

#include "bloomery/persist/rdb_import.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/keyspace.hpp"
#include "rdb_test_support.hpp"

namespace bloomery::persist {
namespace {

using namespace rdb_testing;  // NOLINT(google-build-using-namespace)

bloom::FilterRef sample_filter(int items) {
    bloom::FilterOptions options;
    options.scheme = bloom::HashScheme::redisbloom;
    options.redisbloom_options = bloom::kRedisBloomDefaultOptions;
    options.capacity = 50;
    options.error_rate = 0.01;
    bloom::FilterRef filter = bloom::ScalableFilter::create(options);
    for (int i = 0; i < items; ++i) filter->add("sample" + std::to_string(i), {});
    return filter;
}

TEST(RdbImport, ReadsRedisSaveOfEveryFixtureFilterBitForBitWithTtls) {
    const json all = json::parse(read_file(fixture_path("filters.json")));
    const ReadResult r = read(read_file(fixture_path("dump.rdb")));
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.stats.rdb_version, 10u);
    EXPECT_EQ(r.stats.redis_version, "7.0.15");
    EXPECT_TRUE(r.stats.checksum_verified);
    ASSERT_EQ(r.filters.size(), all["filters"].size());
    std::uint64_t with_ttl = 0;
    for (const json& f : all["filters"]) {
        const std::string key = f["key"];
        SCOPED_TRACE(key);
        const auto it = r.filters.find(key);
        ASSERT_NE(it, r.filters.end());
        const Chunks want = chunks_of(f["chunks"]);
        const Chunks got = dump_all(*it->second.filter);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            EXPECT_EQ(got[i].first, want[i].first);
            EXPECT_TRUE(got[i].second == want[i].second) << "chunk " << i;
        }
        const std::int64_t pexpiretime = f["pexpiretime"];
        EXPECT_EQ(it->second.deadline, pexpiretime < 0 ? 0 : pexpiretime);
        with_ttl += pexpiretime > 0 ? 1 : 0;
    }
    EXPECT_EQ(r.stats.with_deadline, with_ttl);
    const json& other = all["other_keys"];
    std::map<std::string, std::uint64_t> skipped;
    for (const auto& [type, n] : other["skipped_types"].items()) skipped[type] = n;
    // Its Cuckoo filter is imported (rdb_cuckoo_test.cpp compares them).
    skipped.erase("MBbloomCF");
    EXPECT_EQ(r.stats.skipped, skipped);
    EXPECT_EQ(r.stats.cuckoo_filters, 1u);
    EXPECT_EQ(r.cuckoo.count("cf:one"), 1u);
    EXPECT_EQ(r.stats.expired_skipped, other["expired_filters"].size());
    EXPECT_EQ(r.stats.other_databases, other["other_database"].size());
    // The filter of database 1 is named.
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("database 1"), std::string::npos);
}

TEST(RdbImport, ReadsRedisBloomsOlderEncodings) {
    // legacy.rdb holds encodings 0 to 3 as written by hand, which RedisBloom
    // loaded; what it then dumped must be what the reader builds.
    const json all = json::parse(read_file(fixture_path("legacy.json")));
    const ReadResult r = read(read_file(fixture_path("legacy.rdb")));
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.filters.size(), all["filters"].size());
    for (const json& f : all["filters"]) {
        SCOPED_TRACE(f["key"].get<std::string>());
        const auto it = r.filters.find(f["key"].get<std::string>());
        ASSERT_NE(it, r.filters.end());
        const Chunks want = chunks_of(f["loaded_chunks"]);
        const Chunks got = dump_all(*it->second.filter);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            EXPECT_EQ(got[i].first, want[i].first);
            EXPECT_TRUE(got[i].second == want[i].second) << "chunk " << i;
        }
    }
}

TEST(RdbImport, SkipsTheValueTypesOfNewerRedisVersions) {
    const bloom::FilterRef filter = sample_filter(80);
    Builder b;
    b.out = "REDIS0012";
    b.byte(250).str("redis-ver").str("7.4.1");
    b.byte(247).module_id("SomeAux-x", 1).len(2).len(1).len(2).len(7).len(5).str("aux").len(0);
    b.byte(245).str("#!lua name=lib\nredis.register_function('f', function() return 1 end)");
    b.byte(254).len(0).byte(251).len(9).len(2);
    b.byte(244).len(100).len(3).len(1);  // SLOT_INFO
    b.byte(20).str("set:lp").str(std::string(30, 'l'));
    b.byte(25).str("hash:lpex").le(1700000000000, 8).str(std::string(40, 'h'));
    b.byte(24).str("hash:meta").le(1700000000000, 8).len(2);
    b.len(0).str("field").str("value").len(5).str("field2").str("value2");
    b.byte(22).str("hash:meta-rc").len(1).len(1700000000000).str("f").str("v");
    b.byte(23).str("hash:lpex-rc").str("listpack");
    // A stream in the version 3 encoding: one listpack, one group with one
    // pending entry and one consumer.
    b.byte(21).str("stream:v3").len(1).str(std::string(16, '\0')).str("listpack bytes");
    b.len(1).len(1700000000000).len(0).len(1700000000000).len(0).len(0).len(0).len(1);
    b.len(1).str("group").len(1700000000000).len(0).len(1);
    b.len(1).out += std::string(16, '\1');
    b.le(1700000000000, 8).len(1);
    b.len(1).str("consumer").le(1700000000000, 8).le(1700000000000, 8).len(1);
    b.out += std::string(16, '\1');
    b.byte(249).byte(5).byte(248).len(1000);  // FREQ, IDLE before a key
    b.byte(0).str("str:int").byte(0xc2).le(123456, 4);
    b.byte(0).lzf_str("abcdef", 500).lzf_str("xyz", 50);  // an LZF key and value
    b.byte(253).le(2000000000u, 4);                       // EXPIRETIME in seconds (2033)
    b.byte(7).str("bf:sample").bloom(*filter);
    b.byte(7).str("module:other").module_id("other-typ", 3);
    b.len(1).len(7).len(3).out += std::string("\0\0\0\0", 4);
    b.len(4).le(0, 8).len(5).str("s").len(0);
    b.byte(255);
    const ReadResult r = read(seal(b.out));
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.stats.rdb_version, 12u);
    EXPECT_EQ(r.stats.redis_version, "7.4.1");
    ASSERT_EQ(r.filters.size(), 1u);
    const Imported& got = r.filters.at("bf:sample");
    EXPECT_EQ(got.deadline, 2000000000000);
    EXPECT_EQ(bloom::encode_header(*got.filter), bloom::encode_header(*filter));
    for (int i = 0; i < 80; ++i) EXPECT_TRUE(got.filter->contains("sample" + std::to_string(i)));
    const std::map<std::string, std::uint64_t> want{
        {"set", 1}, {"hash", 4}, {"stream", 1}, {"string", 2}, {"other-typ", 1}};
    EXPECT_EQ(r.stats.skipped, want);
}

TEST(RdbImport, DecompressesLzfKeysAndIntegerKeys) {
    const bloom::FilterRef filter = sample_filter(10);
    Builder b;
    b.out = "REDIS0010";
    b.byte(254).len(0);
    b.byte(7).lzf_str("key-", 300).bloom(*filter);
    b.byte(7).byte(0xc0).byte(0xfe).bloom(*filter);  // the key "-2"
    b.byte(255);
    const ReadResult r = read(seal(b.out));
    ASSERT_TRUE(r.ok) << r.error;
    std::string long_key = "key-";
    while (long_key.size() < 304) long_key += long_key[long_key.size() - 4];
    EXPECT_EQ(r.filters.count(long_key), 1u);
    EXPECT_EQ(r.filters.count("-2"), 1u);
}

TEST(RdbImport, AcceptsAFileWithoutChecksum) {
    Builder b;
    b.out = "REDIS0010";
    b.byte(254).len(0).byte(0).str("k").str("v").byte(255).le(0, 8);
    const ReadResult r = read(b.out);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_FALSE(r.stats.checksum_verified);
}

TEST(RdbImport, RefusesCorruptFilesNamingOffsetAndReason) {
    const std::string good = read_file(fixture_path("dump.rdb"));
    expect_refused("", "truncated");
    expect_refused("RDB0010xx", "not an RDB file");
    expect_refused("REDIS00x0", "bad version digits");
    expect_refused(seal("REDIS0013\xff"), "RDB version 13 is not supported");
    expect_refused(seal("REDIS0007\xff"), "RDB version 7 is not supported");
    std::string flipped = good;
    flipped[flipped.size() / 2] ^= 0x20;
    expect_refused(flipped, "");
    std::string bad_crc = good;
    bad_crc.back() ^= 1;
    expect_refused(bad_crc, "checksum mismatch");
    expect_refused(good + "x", "bytes after the end");
    // Truncated anywhere: refused, never a crash or a filter.
    for (std::size_t n = 0; n < good.size(); n += (n < 4096 ? 1 : 997)) {
        const ReadResult r = read(std::string_view(good).substr(0, n));
        EXPECT_FALSE(r.ok) << n;
        EXPECT_FALSE(r.error.empty()) << n;
    }
    // Hand-built values that break the format, checksums intact.
    const bloom::FilterRef filter = sample_filter(10);
    auto with = [](const std::function<void(Builder&)>& value) {
        Builder b;
        b.out = "REDIS0010";
        b.byte(254).len(0);
        value(b);
        b.byte(255);
        return seal(b.out);
    };
    expect_refused(with([](Builder& b) { b.byte(8).str("k").str("v"); }), "unknown value type 8");
    expect_refused(with([](Builder& b) { b.byte(6).str("k"); }), "pre-release module");
    expect_refused(with([](Builder& b) { b.byte(246); }), "pre-release function");
    expect_refused(
        with([](Builder& b) { b.byte(0).str("k").byte(0xc3).len(3).len(1000000).str("abc"); }),
        "LZF string of 3 bytes cannot hold 1000000");
    // (A key: values of other types are skipped without decompressing.)
    expect_refused(
        with([](Builder& b) { b.byte(0).byte(0xc3).len(2).len(10).byte(0x20).byte(5).str("v"); }),
        "corrupt LZF");
    expect_refused(with([](Builder& b) { b.byte(0).str("k").byte(0xc7); }),
                   "unknown string encoding");
    expect_refused(with([](Builder& b) { b.byte(1).str("k").len(1000000).str("a"); }),
                   "exceeds the bytes left");
    expect_refused(with([&](Builder& b) { b.byte(7).str("k").module_id("MBbloom--", 5); }),
                   "encoding 5 is newer");
    expect_refused(with([&](Builder& b) { b.byte(7).str("k").module_id("MBbloomCF", 5); }),
                   "Cuckoo filter encoding 5 is newer");
    expect_refused(with([](Builder& b) {
                       b.byte(7).str("k").module_id("MBbloom--", 4).uint_field(0).uint_field(0);
                   }),
                   "without sub-filters");
    expect_refused(with([](Builder& b) {
                       b.byte(7).str("k").module_id("MBbloom--", 4).uint_field(0).uint_field(65);
                   }),
                   "65 sub-filters");
    expect_refused(with([](Builder& b) {
                       b.byte(7).str("k").module_id("MBbloom--", 4).uint_field(0).double_field(1);
                   }),
                   "module opcode 4 where the sub-filter count");
    expect_refused(with([](Builder& b) { b.byte(7).str("k").module_id("other-typ", 1).len(9); }),
                   "unknown module opcode 9");
    // A sub-filter whose hash count does not follow from its bpe.
    expect_refused(with([&](Builder& b) {
                       b.byte(7).str("k");
                       // hashes is the third field of the first link: rebuild by hand.
                       const bloom::LayerGeometry g = filter->layer(0).geometry();
                       b.module_id("MBbloom--", 4).uint_field(10).uint_field(1);
                       b.uint_field(bloom::kRedisBloomDefaultOptions).uint_field(2);
                       b.uint_field(g.capacity).double_field(g.error_rate).uint_field(g.hashes + 1);
                       b.double_field(g.redisbloom_bpe).uint_field(g.bits).uint_field(0);
                       b.string_field(std::string(g.bits / 8, '\0')).uint_field(10).len(0);
                   }),
                   "fails RedisBloom's own checks");
    // A duplicate key.
    expect_refused(with([&](Builder& b) {
                       b.byte(7).str("dup").bloom(*filter);
                       b.byte(7).str("dup").bloom(*filter);
                   }),
                   "duplicate key");
}

TEST(RdbImport, WritesASnapshotTheServerLoadsAndRefusesToReplaceData) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/rdb_import_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    const std::string dir = pattern;
    core::Config config;
    config.dir = dir + "/data";
    const RdbImportReport imported = import_rdb(fixture_path("dump.rdb"), config);
    ASSERT_TRUE(imported.status.ok()) << imported.status.error();
    const std::string& report = imported.report;
    EXPECT_NE(report.find("Bloom filters imported: 13 (2 with a TTL)"), std::string::npos)
        << report;
    EXPECT_NE(report.find("1 expired, 1 outside database 0"), std::string::npos) << report;
    EXPECT_NE(report.find("Cuckoo filters imported: 1 (0 with a TTL)"), std::string::npos)
        << report;
    EXPECT_NE(report.find("warning: skipped 16 values that are neither Bloom nor Cuckoo filters "
                          "(by type: TopK-TYPE 1, hash 2, list 2, set 3, stream 1, string 5, "
                          "zset 2)"),
              std::string::npos)
        << report;
    store::Keyspace keyspace(8);
    const core::Result<LoadStats> stats = load_snapshot(config.snapshot_path(), keyspace);
    ASSERT_TRUE(stats.ok()) << stats.error();
    EXPECT_EQ(stats->keys, 14u);
    const json all = json::parse(read_file(fixture_path("filters.json")));
    for (const json& f : all["filters"]) {
        const auto entry = keyspace.get(f["key"].get<std::string>());
        ASSERT_TRUE(entry.has_value());
        EXPECT_EQ(bloom::encode_header(entry->value.filter()),
                  base64_decode(f["chunks"][0][1].get<std::string>()));
    }
    // The snapshot is there now: a second import refuses, changing nothing.
    const std::string before = read_file(config.snapshot_path());
    const RdbImportReport again = import_rdb(fixture_path("dump.rdb"), config);
    ASSERT_FALSE(again.status.ok());
    EXPECT_NE(again.status.error().find("exists"), std::string::npos) << again.status.error();
    EXPECT_EQ(read_file(config.snapshot_path()), before);
    // A journal in the directory: refused too.
    core::Config other = config;
    other.dbfilename = "other.bloomery";
    std::ofstream(config.dir + "/journal.00000000000000000000") << "x";
    const RdbImportReport beside_journal = import_rdb(fixture_path("dump.rdb"), other);
    ASSERT_FALSE(beside_journal.status.ok());
    EXPECT_NE(beside_journal.status.error().find("journal"), std::string::npos)
        << beside_journal.status.error();
    // A corrupt file names itself, and writes nothing.
    other.dir = dir + "/empty";
    const std::string corrupt = dir + "/corrupt.rdb";
    std::string bytes = read_file(fixture_path("dump.rdb"));
    bytes.resize(bytes.size() - 100);
    std::ofstream(corrupt, std::ios::binary) << bytes;
    const RdbImportReport refused = import_rdb(corrupt, other);
    ASSERT_FALSE(refused.status.ok());
    EXPECT_EQ(refused.status.error().rfind(corrupt + ": offset ", 0), 0u) << refused.status.error();
    EXPECT_FALSE(std::filesystem::exists(other.snapshot_path()));
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace bloomery::persist
