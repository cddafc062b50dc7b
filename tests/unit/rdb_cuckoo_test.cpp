// `bloomery --import-rdb`'s Cuckoo filters against Redis 7.0's own SAVE of
// RedisBloom 2.4's (tests/fixtures/redisbloom/cuckoo.rdb and
// cuckoo_rdb.json, make_cuckoo_rdb.py): every slot and count as RedisBloom
// dumped them, their TTLs, RedisBloom's older encodings, and malformed
// values refused naming the offset.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "bloomery/cuckoo/cuckoo_filter.hpp"
#include "bloomery/persist/rdb_import.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/keyspace.hpp"
#include "rdb_test_support.hpp"

namespace bloomery::persist {
namespace {

using namespace rdb_testing;  // NOLINT(google-build-using-namespace)

std::string hex_decode(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
        out.push_back(static_cast<char>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
    }
    return out;
}

Chunks hex_chunks(const json& list) {
    Chunks out;
    for (const auto& entry : list) {
        out.emplace_back(entry[0].get<std::int64_t>(), hex_decode(entry[1].get<std::string>()));
    }
    return out;
}

Chunks cf_dump_all(const cuckoo::CuckooFilter& filter) {
    Chunks out;
    for (std::int64_t pos = 0;;) {
        cuckoo::DumpChunk chunk = filter.scandump(pos);
        if (chunk.next == 0) return out;
        out.emplace_back(chunk.next, std::move(chunk.data));
        pos = chunk.next;
    }
}

// CF.INFO as RedisBloom answers it.
json cf_info(const cuckoo::CuckooFilter& f) {
    return json{{"Size", f.info_size()},
                {"Number of buckets", f.num_buckets()},
                {"Number of filters", f.num_filters()},
                {"Number of items inserted", f.num_items()},
                {"Number of items deleted", f.num_deletes()},
                {"Bucket size", f.bucket_size()},
                {"Expansion rate", f.expansion()},
                {"Max iterations", f.max_iterations()}};
}

void expect_same_filter(const cuckoo::CuckooFilter& got, const json& want) {
    EXPECT_EQ(cf_info(got), want["info"]);
    const Chunks want_chunks = hex_chunks(want["chunks"]);
    const Chunks got_chunks = cf_dump_all(got);
    ASSERT_EQ(got_chunks.size(), want_chunks.size());
    for (std::size_t i = 0; i < got_chunks.size(); ++i) {
        EXPECT_EQ(got_chunks[i].first, want_chunks[i].first) << "chunk " << i;
        EXPECT_TRUE(got_chunks[i].second == want_chunks[i].second) << "chunk " << i;
    }
}

const json& fixtures() {
    static const json all = json::parse(read_file(fixture_path("cuckoo_rdb.json")));
    return all;
}

TEST(RdbCuckoo, ReadsRedisSaveOfEveryCuckooFilterSlotForSlotWithTtls) {
    const ReadResult r = read(read_file(fixture_path("cuckoo.rdb")));
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_TRUE(r.stats.checksum_verified);
    const json& all = fixtures();
    ASSERT_EQ(r.cuckoo.size(), all["filters"].size());
    EXPECT_EQ(r.stats.cuckoo_filters, all["filters"].size());
    EXPECT_EQ(r.stats.cuckoo_with_deadline, 1u);
    for (const json& f : all["filters"]) {
        const std::string key = f["key"];
        SCOPED_TRACE(key);
        const auto it = r.cuckoo.find(key);
        ASSERT_NE(it, r.cuckoo.end());
        const cuckoo::CuckooObject::Locked locked = it->second.filter->lock();
        expect_same_filter(locked.filter(), f);
        const std::int64_t pexpiretime = f["pexpiretime"];
        EXPECT_EQ(it->second.deadline, pexpiretime < 0 ? 0 : pexpiretime);
        // CF.EXISTS answers as RedisBloom did for every item added.
        const std::string& exists = f["exists"].get_ref<const std::string&>();
        const std::string prefix = f["items"]["prefix"];
        for (std::size_t i = 0; i < exists.size(); ++i) {
            const bool held =
                locked.filter().exists(cuckoo::cuckoo_hash(prefix + ":" + std::to_string(i)));
            EXPECT_EQ(held, exists[i] == '1') << i;
        }
    }
    // The Bloom filter beside them, and what stays behind.
    ASSERT_EQ(r.filters.size(), 1u);
    EXPECT_EQ(dump_all(*r.filters.at("bf:one").filter), hex_chunks(all["bloom"][0]["chunks"]));
    EXPECT_EQ(r.stats.expired_skipped, all["expired"].size());
    EXPECT_EQ(r.stats.other_databases, all["other_database"].size());
    EXPECT_TRUE(r.stats.skipped.empty());
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("Cuckoo filter 'cf:db1' is in database 1"), std::string::npos)
        << r.warnings[0];
}

TEST(RdbCuckoo, ReadsRedisBloomsOlderCuckooEncodings) {
    // cuckoo_legacy.rdb holds encodings 2 and 3 as written by hand, which
    // RedisBloom loaded; what it then dumped must be what the reader builds.
    const ReadResult r = read(read_file(fixture_path("cuckoo_legacy.rdb")));
    ASSERT_TRUE(r.ok) << r.error;
    const json& legacy = fixtures()["legacy"];
    ASSERT_EQ(r.cuckoo.size(), legacy.size());
    for (const json& f : legacy) {
        SCOPED_TRACE(f["key"].get<std::string>());
        const auto it = r.cuckoo.find(f["key"].get<std::string>());
        ASSERT_NE(it, r.cuckoo.end());
        expect_same_filter(it->second.filter->lock().filter(), f);
    }
}

// CFRdbSave's fields, in encoding 4 unless `encoding` is older.
struct CuckooValue {
    std::vector<std::uint64_t> head;  // numFilters, numBuckets, numItems[, 4 more]
    std::vector<std::pair<std::uint64_t, std::string>> subs;  // numBuckets, slots
    unsigned encoding = 4;

    static CuckooValue of(const cuckoo::CuckooFilter& f) {
        CuckooValue v;
        v.head = {f.num_filters(), f.num_buckets(),    f.num_items(), f.num_deletes(),
                  f.bucket_size(), f.max_iterations(), f.expansion()};
        for (std::uint16_t i = 0; i < f.num_filters(); ++i) {
            v.subs.emplace_back(f.filter_buckets(i), std::string(f.filter_data(i)));
        }
        return v;
    }
    void write(Builder& b) const {
        b.module_id("MBbloomCF", encoding);
        for (const std::uint64_t field : head) b.uint_field(field);
        for (const auto& [buckets, slots] : subs) {
            if (encoding >= 4) b.uint_field(buckets);
            b.string_field(slots);
        }
        b.len(0);
    }
};

std::string file_with(const std::function<void(Builder&)>& values) {
    Builder b;
    b.out = "REDIS0010";
    b.byte(254).len(0);
    values(b);
    b.byte(255);
    return seal(b.out);
}

cuckoo::CuckooFilter grown_filter() {
    cuckoo::CuckooParams params;
    params.capacity = 16;
    params.bucket_size = 4;
    params.expansion = 2;
    core::Result<cuckoo::CuckooFilter> f = cuckoo::CuckooFilter::create(params);
    for (int i = 0; i < 60; ++i) f->insert(cuckoo::cuckoo_hash("grown:" + std::to_string(i)));
    f->remove(cuckoo::cuckoo_hash("grown:3"));
    return std::move(*f);
}

TEST(RdbCuckoo, HandBuiltValuesOfEveryEncodingLoadAsWritten) {
    const cuckoo::CuckooFilter filter = grown_filter();
    ASSERT_GE(filter.num_filters(), 3);
    const ReadResult r = read(file_with([&](Builder& b) {
        b.byte(252).le(4102444800000, 8).byte(7).str("cf:grown");
        CuckooValue::of(filter).write(b);
    }));
    ASSERT_TRUE(r.ok) << r.error;
    const ImportedCuckoo& got = r.cuckoo.at("cf:grown");
    EXPECT_EQ(got.deadline, 4102444800000);
    EXPECT_EQ(cf_dump_all(got.filter->lock().filter()), cf_dump_all(filter));
    // Encodings 0 to 3: the head's three fields, sub-filters of one size.
    for (unsigned encoding = 0; encoding < 4; ++encoding) {
        SCOPED_TRACE(encoding);
        CuckooValue old;
        old.encoding = encoding;
        old.head = {2, 8, 3};
        old.subs = {{8, std::string(16, '\0')}, {8, std::string(16, '\0')}};
        old.subs[0].second[0] = 7;
        old.subs[1].second[5] = 9;
        old.subs[1].second[6] = 10;
        const ReadResult loaded = read(file_with([&](Builder& b) {
            b.byte(7).str("cf:old");
            old.write(b);
        }));
        ASSERT_TRUE(loaded.ok) << loaded.error;
        const cuckoo::CuckooObject::Locked locked = loaded.cuckoo.at("cf:old").filter->lock();
        const cuckoo::CuckooFilter& f = locked.filter();
        EXPECT_EQ(f.num_items(), 3u);
        EXPECT_EQ(f.num_deletes(), 0u);
        EXPECT_EQ(f.bucket_size(), 2);
        EXPECT_EQ(f.max_iterations(), 20);
        EXPECT_EQ(f.expansion(), 1);
        ASSERT_EQ(f.num_filters(), 2);
        EXPECT_EQ(f.filter_data(0), old.subs[0].second);
        EXPECT_EQ(f.filter_data(1), old.subs[1].second);
    }
}

std::string one_value(const CuckooValue& value) {
    return file_with([&](Builder& b) {
        b.byte(7).str("k");
        value.write(b);
    });
}

TEST(RdbCuckoo, RefusesMalformedCuckooValuesNamingTheOffset) {
    const CuckooValue good = CuckooValue::of(grown_filter());
    ASSERT_TRUE(read(one_value(good)).ok);
    auto changed = [&](const std::function<void(CuckooValue&)>& change) {
        CuckooValue v = good;
        change(v);
        return one_value(v);
    };
    const std::string checks = "fails RedisBloom's own checks";
    expect_refused(changed([](CuckooValue& v) { v.encoding = 5; }),
                   "Cuckoo filter encoding 5 is newer than this reader knows (4)");
    expect_refused(changed([](CuckooValue& v) { v.head[0] = 0; }), checks);
    expect_refused(changed([](CuckooValue& v) { v.head[0] = 70000; }), checks);
    expect_refused(changed([](CuckooValue& v) { v.head[1] = 6; }), checks);  // not 2^n
    expect_refused(changed([](CuckooValue& v) { v.head[1] = 0; }), checks);
    expect_refused(changed([](CuckooValue& v) { v.head[2] = 1000000; }), checks);  // > slots
    expect_refused(changed([](CuckooValue& v) { v.head[4] = 0; }), checks);        // bucket size
    expect_refused(changed([](CuckooValue& v) { v.head[4] = 70000; }), "out of range");
    expect_refused(changed([](CuckooValue& v) { v.head[5] = 0; }), checks);  // iterations
    expect_refused(changed([](CuckooValue& v) { v.head[6] = 3; }), checks);  // expansion
    expect_refused(changed([](CuckooValue& v) { v.head[6] = 0; }), checks);  // 0 with 3 subs
    // Sizes the file cannot hold are refused before anything is allocated.
    expect_refused(changed([](CuckooValue& v) { v.head[1] = std::uint64_t{1} << 40; }),
                   "larger than the file can hold");
    expect_refused(changed([](CuckooValue& v) { v.subs[1].first *= 2; }),
                   "sub-filter 1 has 16 buckets where its place holds 8");
    expect_refused(changed([](CuckooValue& v) { v.subs[2].second.pop_back(); }),
                   "sub-filter 2 holds 63 bytes of slots where it has 64");
    expect_refused(changed([](CuckooValue& v) { v.subs.pop_back(); }), "module opcode 0 where");
    expect_refused(changed([](CuckooValue& v) { v.subs.emplace_back(32, std::string(128, 0)); }),
                   "the Cuckoo filter value does not end where it should");
    expect_refused(file_with([&](Builder& b) {
                       b.byte(7).str("k").module_id("MBbloomCF", 4).uint_field(1).double_field(2);
                   }),
                   "module opcode 4 where the bucket count");
    // Two filters under one key.
    expect_refused(file_with([&](Builder& b) {
                       b.byte(7).str("k");
                       good.write(b);
                       b.byte(7).str("k");
                       good.write(b);
                   }),
                   "duplicate key");
    // Truncated anywhere: refused, never a crash or a filter.
    const std::string saved = read_file(fixture_path("cuckoo.rdb"));
    for (std::size_t n = 0; n < saved.size(); ++n) {
        const ReadResult r = read(std::string_view(saved).substr(0, n));
        EXPECT_FALSE(r.ok) << n;
        EXPECT_FALSE(r.error.empty()) << n;
    }
}

TEST(RdbCuckoo, ImportWritesTheCuckooFiltersIntoTheSnapshot) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/rdb_cuckoo_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    core::Config config;
    config.dir = pattern + "/data";
    const RdbImportReport imported = import_rdb(fixture_path("cuckoo.rdb"), config);
    ASSERT_TRUE(imported.status.ok()) << imported.status.error();
    const json& all = fixtures();
    EXPECT_NE(imported.report.find("Cuckoo filters imported: " +
                                   std::to_string(all["filters"].size()) + " (1 with a TTL)"),
              std::string::npos)
        << imported.report;
    EXPECT_NE(imported.report.find("Bloom filters imported: 1 (0 with a TTL)"), std::string::npos)
        << imported.report;
    EXPECT_NE(imported.report.find("1 expired, 1 outside database 0"), std::string::npos)
        << imported.report;
    store::Keyspace keyspace(8);
    const core::Result<LoadStats> stats = load_snapshot(config.snapshot_path(), keyspace);
    ASSERT_TRUE(stats.ok()) << stats.error();
    EXPECT_EQ(stats->keys, all["filters"].size() + 1);
    for (const json& f : all["filters"]) {
        SCOPED_TRACE(f["key"].get<std::string>());
        const auto entry = keyspace.get(f["key"].get<std::string>());
        ASSERT_TRUE(entry.has_value());
        expect_same_filter(entry->value.cuckoo().lock().filter(), f);
        const std::int64_t pexpiretime = f["pexpiretime"];
        EXPECT_EQ(entry->expire_at_ms, pexpiretime < 0 ? 0 : pexpiretime);
    }
    std::filesystem::remove_all(pattern);
}

}  // namespace
}  // namespace bloomery::persist
