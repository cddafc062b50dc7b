// The Cuckoo filter against RedisBloom 2.4.23: fixtures under
// tests/fixtures/redisbloom/cuckoo (make_cuckoo_fixtures.py) hold the
// operations RedisBloom ran, its replies, CF.INFO, CF.COUNT and its
// CF.SCANDUMP chunks.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bloomery/cuckoo/cuckoo_filter.hpp"

namespace bloomery::cuckoo {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kFixtures = {"default",   "default_full", "bucket4_expansion2",
                                            "grown3",    "deletions",    "grown_deletions",
                                            "nonscaling"};

json fixture(const std::string& name) {
    const std::string path =
        std::string(BLOOMERY_FIXTURES_DIR) + "/redisbloom/cuckoo/" + name + ".json";
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << path;
    return json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
}

std::string unhex(const std::string& hex) {
    std::string out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return out;
}

CuckooParams reserve_params(const json& args) {
    CuckooParams p;
    p.capacity = std::stoull(args[0].get<std::string>());
    for (std::size_t i = 1; i + 1 < args.size(); i += 2) {
        const auto name = args[i].get<std::string>();
        const auto value = static_cast<std::uint16_t>(std::stoul(args[i + 1].get<std::string>()));
        if (name == "BUCKETSIZE") p.bucket_size = value;
        if (name == "MAXITERATIONS") p.max_iterations = value;
        if (name == "EXPANSION") p.expansion = value;
    }
    return p;
}

struct Recorded {
    std::vector<InsertRecord> inserts;
    std::vector<DeleteRecord> deletes;
    std::vector<char> kinds;  // 'i' or 'd', in order
};

// Runs a fixture's operations, checking each reply against RedisBloom's.
CuckooFilter run_fixture(const json& f, Recorded* recorded = nullptr) {
    auto made = CuckooFilter::create(reserve_params(f["reserve"]));
    EXPECT_TRUE(made.ok());
    CuckooFilter filter = std::move(made).value();
    for (std::size_t i = 0; i < f["ops"].size(); ++i) {
        const auto op = f["ops"][i][0].get<std::string>();
        const std::uint64_t hash = cuckoo_hash(f["ops"][i][1].get<std::string>());
        const json& reply = f["replies"][i];
        if (op == "del") {
            const DeleteRecord r = filter.remove(hash);
            EXPECT_EQ(reply.get<int>(), r.deleted ? 1 : 0) << i;
            if (recorded != nullptr) {
                recorded->deletes.push_back(r);
                recorded->kinds.push_back('d');
            }
            continue;
        }
        const InsertRecord r = op == "addnx" ? filter.insert_unique(hash) : filter.insert(hash);
        if (reply.is_string()) {
            EXPECT_EQ(reply.get<std::string>(), "Filter is full");
            EXPECT_EQ(r.status, InsertStatus::no_space);
        } else {
            EXPECT_EQ(reply.get<int>(), r.status == InsertStatus::inserted ? 1 : 0) << i;
        }
        if (recorded != nullptr) {
            recorded->inserts.push_back(r);
            recorded->kinds.push_back('i');
        }
    }
    return filter;
}

std::vector<std::pair<std::int64_t, std::string>> dump(const CuckooFilter& filter,
                                                       std::size_t limit = kMaxChunkBytes) {
    std::vector<std::pair<std::int64_t, std::string>> chunks;
    for (DumpChunk c = filter.scandump(0, limit); c.next != 0; c = filter.scandump(c.next, limit)) {
        chunks.emplace_back(c.next, c.data);
    }
    return chunks;
}

std::vector<std::pair<std::int64_t, std::string>> fixture_chunks(const json& f) {
    std::vector<std::pair<std::int64_t, std::string>> chunks;
    for (const json& c : f["chunks"]) {
        chunks.emplace_back(c[0].get<std::int64_t>(), unhex(c[1].get<std::string>()));
    }
    return chunks;
}

void expect_info(const CuckooFilter& filter, const json& info) {
    EXPECT_EQ(filter.info_size(), info["Size"].get<std::uint64_t>());
    EXPECT_EQ(filter.num_buckets(), info["Number of buckets"].get<std::uint64_t>());
    EXPECT_EQ(filter.num_filters(), info["Number of filters"].get<std::uint64_t>());
    EXPECT_EQ(filter.num_items(), info["Number of items inserted"].get<std::uint64_t>());
    EXPECT_EQ(filter.num_deletes(), info["Number of items deleted"].get<std::uint64_t>());
    EXPECT_EQ(filter.bucket_size(), info["Bucket size"].get<std::uint64_t>());
    EXPECT_EQ(filter.expansion(), info["Expansion rate"].get<std::uint64_t>());
    EXPECT_EQ(filter.max_iterations(), info["Max iterations"].get<std::uint64_t>());
}

void expect_answers(const CuckooFilter& filter, const json& f) {
    for (std::size_t i = 0; i < f["items"].size(); ++i) {
        const std::uint64_t hash = cuckoo_hash(f["items"][i].get<std::string>());
        EXPECT_EQ(filter.exists(hash) ? 1 : 0, f["exists"][i].get<int>()) << i;
        EXPECT_EQ(filter.count(hash), f["counts"][i].get<std::uint64_t>()) << i;
    }
}

CuckooFilter load(const std::vector<std::pair<std::int64_t, std::string>>& chunks,
                  std::uint64_t limit = kNoLimit) {
    auto loaded = CuckooFilter::load_header(chunks.at(0).second, limit);
    EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.error());
    CuckooFilter filter = std::move(loaded).value();
    for (std::size_t i = 1; i < chunks.size(); ++i) {
        EXPECT_TRUE(filter.load_chunk(chunks[i].first, chunks[i].second)) << i;
    }
    return filter;
}

TEST(CuckooFilter, SizesAsRedisBloom) {
    auto f = CuckooFilter::create(CuckooParams{1000, 2, 20, 1});
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->num_buckets(), 512U);
    EXPECT_EQ(f->capacity(), 1024U);
    EXPECT_EQ(f->info_size(), 1080U);
    auto odd = CuckooFilter::create(CuckooParams{100, 3, 20, 3});
    ASSERT_TRUE(odd.ok());
    EXPECT_EQ(odd->num_buckets(), 64U);  // 100 / 3 = 33, rounded up
    EXPECT_EQ(odd->expansion(), 4U);     // rounded up to a power of two
    EXPECT_FALSE(CuckooFilter::create(CuckooParams{3, 2, 20, 1}).ok());
    EXPECT_EQ(CuckooFilter::create(CuckooParams{1U << 20, 2, 20, 1}, 1000).error(),
              "ERR Insufficient memory to create filter");
}

TEST(CuckooFilter, NoFalseNegativesCountAndDelete) {
    auto made = CuckooFilter::create(CuckooParams{100, 2, 20, 2});
    ASSERT_TRUE(made.ok());
    CuckooFilter& f = *made;
    for (int i = 0; i < 2000; ++i) {
        ASSERT_EQ(f.insert(cuckoo_hash("k" + std::to_string(i))).status, InsertStatus::inserted);
    }
    EXPECT_EQ(f.num_items(), 2000U);
    EXPECT_GT(f.num_filters(), 1U);
    for (int i = 0; i < 2000; ++i) EXPECT_TRUE(f.exists(cuckoo_hash("k" + std::to_string(i))));
    const std::uint64_t h = cuckoo_hash("twice");
    const std::uint64_t before = f.count(h);
    f.insert(h);
    f.insert(h);
    EXPECT_EQ(f.count(h), before + 2);
    EXPECT_EQ(f.insert_unique(h).status, InsertStatus::exists);
    EXPECT_TRUE(f.remove(h).deleted);
    EXPECT_EQ(f.count(h), before + 1);
    EXPECT_TRUE(f.remove(h).deleted);
    EXPECT_EQ(f.count(h), before);
}

TEST(CuckooFilter, GrowthSizes) {
    auto made = CuckooFilter::create(CuckooParams{64, 2, 20, 2});
    ASSERT_TRUE(made.ok());
    for (int i = 0; made->num_filters() < 4; ++i) made->insert(cuckoo_hash(std::to_string(i)));
    EXPECT_EQ(made->filter_buckets(0), 32U);
    EXPECT_EQ(made->filter_buckets(1), 64U);
    EXPECT_EQ(made->filter_buckets(2), 128U);
    EXPECT_EQ(made->filter_buckets(3), 256U);
    EXPECT_EQ(made->capacity(), 2U * (32 + 64 + 128 + 256));
}

TEST(CuckooFilter, NonScalingIsFull) {
    auto made = CuckooFilter::create(CuckooParams{8, 2, 5, 0});
    ASSERT_TRUE(made.ok());
    int full = 0;
    for (int i = 0; i < 40; ++i) {
        full += made->insert(cuckoo_hash(std::to_string(i))).status == InsertStatus::no_space;
    }
    EXPECT_GT(full, 0);
    EXPECT_EQ(made->num_filters(), 1U);
    EXPECT_EQ(made->num_items(), 40U - static_cast<unsigned>(full));
}

TEST(CuckooFilter, GrowthRespectsTheByteLimit) {
    auto made = CuckooFilter::create(CuckooParams{64, 2, 20, 1});
    ASSERT_TRUE(made.ok());
    const std::uint64_t limit = made->bytes() + 16;  // room for no second sub-filter
    int refused = 0;
    for (int i = 0; i < 200; ++i) {
        const InsertRecord r = made->insert(cuckoo_hash(std::to_string(i)), limit);
        refused += r.status == InsertStatus::grow_failed ? 1 : 0;
    }
    EXPECT_GT(refused, 0);
    EXPECT_EQ(made->num_filters(), 1U);
    EXPECT_LE(made->bytes(), limit);
}

TEST(CuckooFilter, SameBytesAsRedisBloom) {
    for (const std::string& name : kFixtures) {
        SCOPED_TRACE(name);
        const json f = fixture(name);
        const CuckooFilter filter = run_fixture(f);
        expect_info(filter, f["info"]);
        expect_answers(filter, f);
        EXPECT_EQ(dump(filter), fixture_chunks(f));
    }
}

TEST(CuckooFilter, LoadsRedisBloomDumps) {
    for (const std::string& name : kFixtures) {
        SCOPED_TRACE(name);
        const json f = fixture(name);
        const CuckooFilter filter = load(fixture_chunks(f));
        expect_info(filter, f["info"]);
        expect_answers(filter, f);
        EXPECT_EQ(dump(filter), fixture_chunks(f));
    }
}

TEST(CuckooFilter, SmallChunksRoundTrip) {
    const json f = fixture("grown3");
    const CuckooFilter filter = load(fixture_chunks(f));
    const auto chunks = dump(filter, 48);
    EXPECT_GT(chunks.size(), fixture_chunks(f).size());
    for (std::size_t i = 1; i < chunks.size(); ++i) EXPECT_LE(chunks[i].second.size(), 48U);
    EXPECT_EQ(dump(load(chunks)), fixture_chunks(f));
}

TEST(CuckooFilter, RecordsReplayToSameBytes) {
    for (const char* name : {"default_full", "grown3", "grown_deletions", "deletions"}) {
        SCOPED_TRACE(name);
        const json f = fixture(name);
        Recorded rec;
        const CuckooFilter original = run_fixture(f, &rec);
        auto copy = CuckooFilter::create(reserve_params(f["reserve"]));
        ASSERT_TRUE(copy.ok());
        std::size_t ins = 0;
        std::size_t del = 0;
        bool relocated = false;
        for (const char kind : rec.kinds) {
            if (kind == 'i') {
                relocated = relocated || !rec.inserts[ins].relocations.empty();
                ASSERT_TRUE(copy->apply(rec.inserts[ins++]));
            } else {
                ASSERT_TRUE(copy->apply(rec.deletes[del++]));
            }
        }
        EXPECT_EQ(dump(*copy), dump(original));
        if (std::string(name) == "default_full") {
            EXPECT_TRUE(relocated);
        }
    }
}

TEST(CuckooFilter, ApplyRefusesRecordsThatDoNotFit) {
    auto made = CuckooFilter::create(CuckooParams{64, 2, 20, 1});
    ASSERT_TRUE(made.ok());
    InsertRecord r;
    r.status = InsertStatus::inserted;
    r.filters = 1;
    r.fingerprint = 7;
    r.placed = SlotRef{0, 1000};
    EXPECT_FALSE(made->apply(r));
    r.placed = SlotRef{3, 0};
    EXPECT_FALSE(made->apply(r));
    r.filters = 5;
    EXPECT_FALSE(made->apply(r));
    r.filters = 2;  // a growth whose slot is out of range changes nothing
    r.placed = SlotRef{1, 1U << 20};
    EXPECT_FALSE(made->apply(r));
    EXPECT_EQ(made->num_filters(), 1U);
    EXPECT_EQ(made->num_items(), 0U);
    EXPECT_FALSE(made->apply(DeleteRecord{true, SlotRef{0, 0}, false}));  // slot empty
}

std::string header_with(std::uint64_t items, std::uint64_t buckets, std::uint64_t filters,
                        std::uint16_t bucket_size, std::uint16_t iterations,
                        std::uint16_t expansion) {
    std::string h;
    for (std::uint64_t v : {items, buckets, std::uint64_t{0}, filters}) {
        for (int i = 0; i < 8; ++i) h.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    }
    for (std::uint16_t v : {bucket_size, iterations, expansion}) {
        h.push_back(static_cast<char>(v & 0xFF));
        h.push_back(static_cast<char>(v >> 8));
    }
    return h;
}

TEST(CuckooFilter, RefusesHostileHeaders) {
    constexpr std::uint64_t kLimit = 1 << 20;
    EXPECT_TRUE(CuckooFilter::load_header(header_with(1, 64, 2, 2, 20, 2), kLimit).ok());
    EXPECT_EQ(CuckooFilter::load_header(header_with(1, 64, 2, 2, 20, 2).substr(1), kLimit).error(),
              "Invalid header");
    EXPECT_EQ(CuckooFilter::load_header(header_with(1, 64, 2, 2, 20, 2) + "x", kLimit).error(),
              "Invalid header");
    const std::vector<std::string> refused = {
        header_with(1, 64, 2, 0, 20, 2),               // bucket size 0
        header_with(1, 64, 2, 256, 20, 2),             // bucket size past 255
        header_with(1, 63, 1, 2, 20, 1),               // buckets not a power of two
        header_with(1, 0, 1, 2, 20, 1),                // no buckets
        header_with(1, 64, 0, 2, 20, 1),               // no sub-filters
        header_with(1, 64, 65537, 2, 20, 1),           // more sub-filters than 16 bits
        header_with(1, 64, 1, 2, 0, 1),                // no iterations
        header_with(1, 64, 2, 2, 20, 0),               // two sub-filters without expansion
        header_with(1, 64, 2, 2, 20, 3),               // expansion not a power of two
        header_with(1, 64, 2, 2, 20, 65535),           // expansion past 32768
        header_with(1000, 64, 1, 2, 20, 1),            // more items than slots
        header_with(1, 1ULL << 40, 1, 255, 20, 1),     // past the byte limit
        header_with(1, 1ULL << 50, 60, 2, 20, 32768),  // sizes that overflow
        header_with(1, 1ULL << 56, 1, 2, 20, 1),       // past 56 bits of buckets
        header_with(1, 1024, 65535, 2, 20, 1),         // absurd count within the types
    };
    for (std::size_t i = 0; i < refused.size(); ++i) {
        const auto r = CuckooFilter::load_header(refused[i], kLimit);
        ASSERT_FALSE(r.ok()) << i;
        EXPECT_EQ(r.error(), "Couldn't create filter!") << i;
    }
}

TEST(CuckooFilter, RefusesChunksThatDoNotFit) {
    auto loaded = CuckooFilter::load_header(header_with(1, 64, 2, 2, 20, 2), 1 << 20);
    ASSERT_TRUE(loaded.ok());
    CuckooFilter& f = *loaded;  // sub-filters of 128 and 256 bytes
    const std::string piece(16, '\x01');
    EXPECT_FALSE(f.load_chunk(1, piece));                   // the header's position
    EXPECT_FALSE(f.load_chunk(0, piece));                   // no position
    EXPECT_FALSE(f.load_chunk(-5, piece));                  // negative
    EXPECT_FALSE(f.load_chunk(10, piece));                  // starts before the data
    EXPECT_FALSE(f.load_chunk(17, ""));                     // empty
    EXPECT_FALSE(f.load_chunk(1 + 128 + 256 + 16, piece));  // past the end
    EXPECT_FALSE(f.load_chunk(1 + 120 + 16, piece));        // across a sub-filter's end
    EXPECT_FALSE(f.load_chunk(INT64_MAX, piece));
    EXPECT_TRUE(f.load_chunk(1 + 128 + 16, piece));  // the second sub-filter's start
    EXPECT_EQ(f.filter_data(1).substr(0, 16), piece);
}

}  // namespace
}  // namespace bloomery::cuckoo
