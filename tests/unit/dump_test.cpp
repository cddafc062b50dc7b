// DUMP / RESTORE payloads (persist/dump_payload.hpp) and the keyspace writes
// behind RESTORE, COPY, RENAMENX, MIGRATE and RANDOMKEY. The commands
// themselves are in key_commands_test.cpp.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/core/crc64.hpp"
#include "bloomery/persist/dump_payload.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/journal_reader.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "dump_test_support.hpp"
#include "temp_dir.hpp"

namespace bloomery {
namespace {

namespace fs = std::filesystem;
using bloom::FilterOptions;
using bloom::FilterRef;
using bloom::ScalableFilter;
using store::Keyspace;
using testing::refooted;
using testing::scandump;

class TempDir : public bloomery::testing::ScratchDir {
public:
    TempDir() : ScratchDir("dump_test") {}
    std::uint64_t journal_bytes() const {
        std::uint64_t total = 0;
        for (const auto& entry : fs::directory_iterator(path())) {
            if (entry.path().filename().string().rfind("journal.", 0) == 0)
                total += entry.file_size();
        }
        return total;
    }
};

FilterOptions options_of(double error_rate, std::uint64_t capacity, bloom::Layout layout,
                         bool nonscaling = false) {
    FilterOptions options;
    options.error_rate = error_rate;
    options.capacity = capacity;
    options.expansion = 2;
    options.nonscaling = nonscaling;
    options.layout = layout;
    return options;
}

FilterOptions redisbloom_options(std::uint64_t capacity) {
    FilterOptions options;
    options.error_rate = 0.01;
    options.capacity = capacity;
    options.expansion = 2;
    options.layout = bloom::Layout::classic;
    options.scheme = bloom::HashScheme::redisbloom;
    options.redisbloom_options = bloom::kRedisBloomDefaultOptions;
    return options;
}

FilterRef filter_with(const FilterOptions& options, int items, const std::string& prefix = "i") {
    FilterRef filter = ScalableFilter::create(options);
    for (int i = 0; i < items; ++i) {
        EXPECT_NE(filter->add(prefix + std::to_string(i), {}), bloom::AddResult::too_large);
    }
    return filter;
}

std::string payload_of(const ScalableFilter& filter) {
    std::string out;
    persist::append_dump_payload(filter, filter.num_layers(), out);
    return out;
}

std::string value_of(const std::string& payload) {
    return payload.substr(0, payload.size() - persist::kDumpFooterBytes);
}

bool parses(const std::string& payload) {
    return persist::verify_dump_payload(payload) && persist::parse_dump_value(payload).ok();
}

// ---- CRC64 ----

TEST(Crc64, IsRedissCrc64Jones) {
    // Redis's crc64.c test vector, and its longer one.
    EXPECT_EQ(core::crc64(0, "123456789"), 0xe9c6d914c4b8d9caull);
    const std::string lorem =
        "This is a test of the emergency broadcast system. This is only a test.";
    const std::uint64_t whole = core::crc64(0, lorem);
    // Continuing from a prefix's CRC gives the whole's, at every split.
    for (std::size_t split = 0; split <= lorem.size(); ++split) {
        EXPECT_EQ(core::crc64(core::crc64(0, lorem.substr(0, split)), lorem.substr(split)), whole);
    }
    EXPECT_EQ(core::crc64(0, ""), 0u);
}

// ---- Payloads ----

TEST(DumpPayload, RoundTripGivesBackEveryKindOfFilterBitForBit) {
    const std::vector<FilterRef> filters = {
        filter_with(options_of(0.01, 100, bloom::Layout::classic),
                    700),  // 3+ layers
        filter_with(options_of(0.001, 50000, bloom::Layout::blocked), 20000),
        filter_with(options_of(0.05, 300, bloom::Layout::classic, true), 250),
        filter_with(redisbloom_options(100), 500),
        ScalableFilter::create(options_of(0.01, 1000, bloom::Layout::blocked)),  // empty
    };
    for (const FilterRef& source : filters) {
        const std::string payload = payload_of(*source);
        ASSERT_TRUE(persist::verify_dump_payload(payload));
        const core::Result<persist::DumpValue> value = persist::parse_dump_value(payload);
        ASSERT_TRUE(value.ok()) << value.error();
        const FilterRef restored = persist::build_dump_filter(*value);
        ASSERT_TRUE(restored);
        EXPECT_NE(restored->id(), source->id());  // a new filter
        EXPECT_EQ(restored->items(), source->items());
        EXPECT_EQ(restored->num_layers(), source->num_layers());
        EXPECT_EQ(restored->scheme(), source->scheme());
        EXPECT_EQ(scandump(*restored), scandump(*source));
        EXPECT_EQ(restored->estimate_cardinality(), source->estimate_cardinality());
        // Dumping the restored filter gives the same payload.
        EXPECT_EQ(payload_of(*restored), payload);
    }
}

TEST(DumpPayload, HoldsTheFilterExactlyAsASnapshotRecordDoes) {
    TempDir dir;
    Keyspace keyspace(4);
    const std::string key = "the-key";
    keyspace.put(key, filter_with(options_of(0.01, 100, bloom::Layout::blocked), 400));
    keyspace.put("rb", filter_with(redisbloom_options(50), 120));
    for (const std::string& name : {key, std::string("rb")}) {
        Keyspace one(1);
        const FilterRef filter = keyspace.get(name)->value.filter_ref();
        one.put(name, filter);
        const std::string path = dir.str() + "/" + name + ".bloomery";
        const core::Result<persist::SaveStats> saved = persist::save_snapshot(one, path);
        ASSERT_TRUE(saved.ok()) << saved.error();
        std::ifstream in(path, std::ios::binary);
        const std::string file((std::istreambuf_iterator<char>(in)), {});
        // header (36), type, key length, key, deadline, id | fields | record
        // checksum (8), end record (17).
        const std::size_t fields_at = 36 + 1 + 4 + name.size() + 8 + 8;
        const std::string fields = file.substr(fields_at, file.size() - 17 - 8 - fields_at);
        const std::string payload = payload_of(*filter);
        EXPECT_EQ(static_cast<std::uint8_t>(payload[0]), persist::kDumpTypeBloom);
        EXPECT_TRUE(payload.substr(1, payload.size() - 1 - persist::kDumpFooterBytes) == fields)
            << name;
    }
}

TEST(DumpPayload, EndsWithRedissFooterShape) {
    const std::string payload =
        payload_of(*filter_with(options_of(0.01, 100, bloom::Layout::classic), 10));
    const std::size_t n = payload.size();
    EXPECT_EQ(static_cast<unsigned char>(payload[n - 10]), 0x02);  // layers as runs
    EXPECT_EQ(static_cast<unsigned char>(payload[n - 9]), 0xBF);
    std::uint64_t stored = 0;
    for (int i = 0; i < 8; ++i)
        stored |= static_cast<std::uint64_t>(static_cast<unsigned char>(payload[n - 8 + i]))
                  << (8 * i);
    EXPECT_EQ(stored, core::crc64(0, std::string_view(payload).substr(0, n - 8)));
}

TEST(DumpPayload, EveryFlippedBitIsRefused) {
    const std::string payload =
        payload_of(*filter_with(options_of(0.01, 20, bloom::Layout::classic), 15));
    ASSERT_LT(payload.size(), 400u);
    for (std::size_t i = 0; i < payload.size(); ++i) {
        for (int bit = 0; bit < 8; ++bit) {
            std::string bad = payload;
            bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
            EXPECT_FALSE(persist::verify_dump_payload(bad)) << "byte " << i << " bit " << bit;
        }
    }
    for (std::size_t length = 0; length < payload.size(); ++length) {
        EXPECT_FALSE(persist::verify_dump_payload(payload.substr(0, length))) << length;
    }
}

TEST(DumpPayload, OtherVersionsAndRedissOwnPayloadsAreRefused) {
    const std::string value =
        value_of(payload_of(*filter_with(options_of(0.01, 100, bloom::Layout::classic), 10)));
    for (const std::uint16_t version : {0xBF00, 0xBF03, 0x000A, 0x000B, 0x0001, 0xFFFF}) {
        std::string other = value;
        other.push_back(static_cast<char>(version & 0xff));
        other.push_back(static_cast<char>(version >> 8));
        const std::uint64_t crc = core::crc64(0, other);
        for (int i = 0; i < 8; ++i) other.push_back(static_cast<char>(crc >> (8 * i)));
        EXPECT_FALSE(persist::verify_dump_payload(other)) << version;
    }
    // Redis 7.0's own DUMPs (tests/fixtures/redis/make_dump_payloads.py):
    // a RedisBloom filter and a string. Their checksums are right; their
    // version is an RDB version.
    std::ifstream in(std::string(BLOOMERY_FIXTURES_DIR) + "/redis/dump_payloads.json");
    ASSERT_TRUE(in) << "fixture missing";
    const nlohmann::json fixture = nlohmann::json::parse(in);
    for (const auto& [name, entry] : fixture["payloads"].items()) {
        const std::string hex = entry["hex"].get<std::string>();
        std::string bytes;
        for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
            bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
        EXPECT_EQ(core::crc64(0, std::string_view(bytes).substr(0, bytes.size() - 8)),
                  [&] {
                      std::uint64_t v = 0;
                      for (int i = 0; i < 8; ++i)
                          v |= static_cast<std::uint64_t>(
                                   static_cast<unsigned char>(bytes[bytes.size() - 8 + i]))
                               << (8 * i);
                      return v;
                  }())
            << name << ": Redis's CRC64 is ours";
        EXPECT_EQ(entry["rdb_version"].get<int>(), 10) << name;
        EXPECT_FALSE(persist::verify_dump_payload(bytes)) << name;
    }
}

TEST(DumpPayload, MalformedValuesAreRefusedEvenWithAGoodFooter) {
    const FilterRef filter = filter_with(options_of(0.01, 100, bloom::Layout::classic), 300);
    ASSERT_GE(filter->num_layers(), 2u);
    const std::string value = value_of(payload_of(*filter));
    ASSERT_TRUE(parses(refooted(value)));
    // Offsets into the value: type 0, error_rate 1, capacity 9, expansion
    // 17, nonscaling 21, layout 22, scheme 23, layer count 24, first layer
    // at 28 (capacity, error rate, bits at +16, hashes at +24, layout at
    // +28, items at +29, words at +37).
    const auto with = [&](std::size_t at, std::string bytes) {
        std::string bad = value;
        bad.replace(at, bytes.size(), bytes);
        return refooted(bad);
    };
    const auto u32 = [](std::uint32_t v) {
        std::string b(4, '\0');
        for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
        return b;
    };
    const auto u64 = [](std::uint64_t v) {
        std::string b(8, '\0');
        for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
        return b;
    };
    EXPECT_FALSE(parses(with(0, std::string(1, '\x02'))));  // unknown type
    EXPECT_FALSE(parses(with(1, u64(std::bit_cast<std::uint64_t>(std::nan(""))))));
    EXPECT_FALSE(parses(with(1, u64(std::bit_cast<std::uint64_t>(1.5)))));
    EXPECT_FALSE(parses(with(9, u64(0))));                             // capacity 0
    EXPECT_FALSE(parses(with(17, u32(0))));                            // expansion 0, scaling
    EXPECT_FALSE(parses(with(21, std::string(1, '\x02'))));            // nonscaling 2
    EXPECT_FALSE(parses(with(21, std::string(1, '\x01'))));            // nonscaling, several layers
    EXPECT_FALSE(parses(with(22, std::string(1, '\x03'))));            // layout 3 (2 is auto)
    EXPECT_FALSE(parses(with(23, std::string(1, '\x02'))));            // scheme 2
    EXPECT_FALSE(parses(with(24, u32(0))));                            // no layer
    EXPECT_FALSE(parses(with(24, u32(65))));                           // too many layers
    EXPECT_FALSE(parses(with(24, u32(filter->num_layers() + 1))));     // one more than there is
    EXPECT_FALSE(parses(with(28 + 16, u64(100))));                     // bits not whole words
    EXPECT_FALSE(parses(with(28 + 16, u64(std::uint64_t{1} << 60))));  // past the payload
    EXPECT_FALSE(parses(with(28 + 24, u32(0))));                       // no hash
    EXPECT_FALSE(parses(with(28 + 24, u32(1000))));                    // too many hashes
    EXPECT_FALSE(parses(with(28 + 28, std::string(1, '\x07'))));       // layer layout
    EXPECT_FALSE(parses(with(28 + 29, u64(std::uint64_t{1} << 60))));  // items
    // Cut anywhere, or one byte too many.
    for (std::size_t length = 0; length < value.size(); ++length) {
        EXPECT_FALSE(parses(refooted(value.substr(0, length)))) << length;
    }
    EXPECT_FALSE(parses(refooted(value + '\0')));
}

// ---- Keyspace ----

// A keyspace with a journal attached, as the server runs it.
struct Journaled {
    explicit Journaled(const TempDir& dir)
        : journal(dir.str(), "journal", persist::FsyncPolicy::no, 256ull << 20) {
        const core::Status opened = journal.open(7, 0, "");
        EXPECT_TRUE(opened.ok()) << opened.error();
        keyspace.set_mutation_log(&journal);
    }
    ~Journaled() { close(); }
    void close() {
        journal.close();
        keyspace.set_mutation_log(nullptr);
    }
    Keyspace keyspace{8};
    persist::Journal journal;
};

void replay(const TempDir& dir, Keyspace& into) {
    const core::Result<persist::ReplayStats> replayed =
        persist::replay_journal(dir.str(), "journal", std::nullopt, into);
    ASSERT_TRUE(replayed.ok()) << replayed.error();
}

void expect_same_filter(const ScalableFilter& a, const ScalableFilter& b) {
    EXPECT_EQ(bloom::encode_header(a), bloom::encode_header(b));
    EXPECT_EQ(a.items(), b.items());
    EXPECT_TRUE(scandump(a) == scandump(b));
}

TEST(KeyspaceRestore, ReplayRebuildsRestoredAndCopiedFiltersBitForBit) {
    TempDir dir;
    Journaled live(dir);
    const FilterRef source = filter_with(options_of(0.01, 100, bloom::Layout::blocked), 900);
    const FilterRef rb = filter_with(redisbloom_options(64), 300, "rb");
    const std::int64_t later = store::now_ms() + 3'600'000;
    ASSERT_TRUE(live.keyspace.restore("restored", source, {.expire_at_ms = later}));
    ASSERT_TRUE(live.keyspace.restore("rb", rb));
    // COPY's filter: taken from "restored", which then takes more adds that
    // the copy must not have, live or replayed.
    const FilterRef copy = ScalableFilter::copy_of(live.keyspace.get("restored")->value.filter(),
                                                   source->num_layers());
    ASSERT_TRUE(live.keyspace.restore("copy", copy));
    std::vector<bloom::AddResult> results;
    const std::vector<std::string> more = {"late-1", "late-2", "late-3"};
    const std::vector<std::string_view> views(more.begin(), more.end());
    ASSERT_TRUE(live.keyspace.add_items("restored", views, {}, nullptr, results));
    // A big empty filter costs its CREATE, not its zero bits.
    const std::uint64_t before_empty = live.journal.position();
    ASSERT_TRUE(live.keyspace.restore(
        "empty", ScalableFilter::create(options_of(0.001, 1'000'000, bloom::Layout::blocked))));
    EXPECT_LT(live.journal.position() - before_empty, 1024u);
    // REPLACE: DEL and CREATE and bits.
    ASSERT_TRUE(live.keyspace.restore("rb", filter_with(redisbloom_options(64), 50, "other"),
                                      {.if_live = store::IfLive::replace}));
    EXPECT_FALSE(live.keyspace.restore(
        "copy", ScalableFilter::create(options_of(0.01, 10, bloom::Layout::classic))));
    live.close();

    Keyspace replayed(8);
    replay(dir, replayed);
    ASSERT_EQ(replayed.size(), live.keyspace.size());
    for (const char* key : {"restored", "rb", "copy", "empty"}) {
        SCOPED_TRACE(key);
        ASSERT_TRUE(replayed.get(key));
        expect_same_filter(live.keyspace.get(key)->value.filter(),
                           replayed.get(key)->value.filter());
        EXPECT_EQ(replayed.get(key)->expire_at_ms, live.keyspace.get(key)->expire_at_ms);
    }
    EXPECT_EQ(replayed.expiry("restored"), later);
    // The copy is the source as it was copied, not as it is now.
    bool late_in_copy = true;
    replayed.with_filter("copy", [&](const ScalableFilter& f) {
        late_in_copy = f.contains("late-1") && f.contains("late-2") && f.contains("late-3");
    });
    EXPECT_FALSE(late_in_copy);
    EXPECT_EQ(replayed.get("copy")->value.filter().items(), source->items() - 3);
}

TEST(KeyspaceRestore, ABigFilterGoesAsChunksOfAtMostAMebibyte) {
    TempDir dir;
    Journaled live(dir);
    // About 4.8 MB of bits, half of them set: five or more CHUNK records.
    const FilterRef filter = filter_with(options_of(0.01, 4'000'000, bloom::Layout::classic), 0);
    filter->layer(0).set_items(0);
    std::vector<std::uint64_t> words(filter->layer(0).num_words(), 0x5555aaaa5555aaaaull);
    filter->layer(0).store_words(0, words.size(), words.data());
    const std::uint64_t before = live.journal.position();
    ASSERT_TRUE(live.keyspace.restore("big", filter));
    const std::uint64_t bytes = live.journal.position() - before;
    EXPECT_GT(bytes, filter->bits_size());
    EXPECT_LT(bytes, filter->bits_size() + 4096);
    live.close();
    Keyspace replayed(8);
    replay(dir, replayed);
    expect_same_filter(*filter, replayed.get("big")->value.filter());
}

TEST(KeyspaceRestore, RenameIfAbsentMovesOnlyToAFreeName) {
    Keyspace keyspace(4);
    keyspace.put("a", ScalableFilter::create(options_of(0.01, 10, bloom::Layout::classic)));
    keyspace.put("b", ScalableFilter::create(options_of(0.01, 10, bloom::Layout::classic)));
    const ScalableFilter* a = keyspace.get("a")->value.bloom_or_null();
    EXPECT_EQ(keyspace.rename_if_absent("missing", "x"), std::nullopt);
    EXPECT_EQ(keyspace.rename_if_absent("a", "b"), false);
    EXPECT_EQ(keyspace.rename_if_absent("a", "a"), false);
    EXPECT_EQ(keyspace.rename_if_absent("a", "c"), true);
    EXPECT_FALSE(keyspace.contains("a"));
    EXPECT_EQ(keyspace.get("c")->value.bloom_or_null(), a);
    // A name whose key is past its deadline is free.
    store::ManualClock clock;
    ASSERT_TRUE(keyspace.set_expiry("b", clock.now() + 1));
    clock.advance(std::chrono::milliseconds(5));
    EXPECT_EQ(keyspace.rename_if_absent("c", "b"), true);
    EXPECT_EQ(keyspace.get("b")->value.bloom_or_null(), a);
    EXPECT_EQ(keyspace.size(), 1u);
}

TEST(KeyspaceRestore, EraseIfUnchangedKeepsAKeyThatTookAdds) {
    Keyspace keyspace(4);
    keyspace.put("k", filter_with(options_of(0.01, 100, bloom::Layout::classic), 10));
    FilterRef filter = keyspace.get("k")->value.filter_ref();
    const std::uint64_t items = filter->items();
    const std::size_t layers = filter->num_layers();
    std::vector<bloom::AddResult> results;
    const std::vector<std::string_view> one = {"new"};
    ASSERT_TRUE(keyspace.add_items("k", one, {}, nullptr, results));
    EXPECT_EQ(keyspace.erase_if_unchanged("k", filter.get(), items, layers),
              Keyspace::EraseIf::changed);
    EXPECT_TRUE(keyspace.contains("k"));
    EXPECT_EQ(keyspace.erase_if_unchanged("k", filter.get(), filter->items(), layers),
              Keyspace::EraseIf::erased);
    EXPECT_FALSE(keyspace.contains("k"));
    EXPECT_EQ(keyspace.erase_if_unchanged("k", filter.get(), filter->items(), layers),
              Keyspace::EraseIf::gone);
    // Another filter under the name.
    keyspace.put("k", ScalableFilter::create(options_of(0.01, 100, bloom::Layout::classic)));
    EXPECT_EQ(keyspace.erase_if_unchanged("k", filter.get(), filter->items(), layers),
              Keyspace::EraseIf::changed);
}

TEST(KeyspaceRandomKey, EmptyGivesNothingAndEveryKeyComesUp) {
    Keyspace keyspace(16);
    EXPECT_EQ(keyspace.random_key(), std::nullopt);
    const FilterRef shared = ScalableFilter::create(options_of(0.01, 10, bloom::Layout::classic));
    constexpr int kKeys = 200;
    for (int i = 0; i < kKeys; ++i) keyspace.put("key-" + std::to_string(i), shared);
    std::map<std::string, int> seen;
    constexpr int kDraws = 200 * kKeys;
    for (int i = 0; i < kDraws; ++i) {
        const std::optional<std::string> key = keyspace.random_key();
        ASSERT_TRUE(key);
        ++seen[*key];
    }
    // Uniform: each key about kDraws / kKeys = 200 times (sd ~14); a
    // chi-square over 199 degrees of freedom stays far below 400 unless the
    // draw is biased (by shard or by probe run).
    ASSERT_EQ(seen.size(), static_cast<std::size_t>(kKeys));
    double chi_square = 0;
    for (const auto& [key, count] : seen) {
        const double expected = static_cast<double>(kDraws) / kKeys;
        chi_square += (count - expected) * (count - expected) / expected;
    }
    EXPECT_LT(chi_square, 400) << "draws are not uniform";
}

TEST(KeyspaceRandomKey, SkipsAndErasesKeysPastTheirDeadline) {
    store::ManualClock clock;
    Keyspace keyspace(4);
    const FilterRef shared = ScalableFilter::create(options_of(0.01, 10, bloom::Layout::classic));
    keyspace.put("live", shared);
    for (int i = 0; i < 30; ++i) keyspace.put("dead-" + std::to_string(i), shared, clock.now() + 1);
    clock.advance(std::chrono::milliseconds(5));
    for (int i = 0; i < 50; ++i) EXPECT_EQ(keyspace.random_key(), "live");
    // Every key past its deadline met on the way was erased.
    EXPECT_LT(keyspace.size(), 31u);
    // Only expired keys: nothing, after at most kRandomKeyDraws draws.
    Keyspace dead(4);
    for (int i = 0; i < 500; ++i) dead.put("d" + std::to_string(i), shared, clock.now() + 1);
    clock.advance(std::chrono::milliseconds(5));
    EXPECT_EQ(dead.random_key(), std::nullopt);
    EXPECT_GE(dead.size(), 500u - Keyspace::kRandomKeyDraws);
}

}  // namespace
}  // namespace bloomery
