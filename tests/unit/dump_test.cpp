// DUMP / RESTORE payloads (persist/dump_payload.hpp), the keyspace writes
// behind RESTORE, COPY, RENAMENX, MIGRATE and RANDOMKEY, and those commands
// driven without sockets.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/cluster/topology.hpp"
#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/core/crc64.hpp"
#include "bloomery/core/key_slot.hpp"
#include "bloomery/persist/dump_payload.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/resp/writer.hpp"
#include "fake_hooks.hpp"

namespace bloomery {
namespace {

namespace fs = std::filesystem;
using bloom::FilterOptions;
using bloom::FilterRef;
using bloom::ScalableFilter;
using store::Keyspace;

class TempDir {
public:
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string pattern = std::string(base ? base : "/tmp") + "/dump_test.XXXXXX";
        if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    std::string str() const { return path_.string(); }
    std::uint64_t journal_bytes() const {
        std::uint64_t total = 0;
        for (const auto& entry : fs::directory_iterator(path_)) {
            if (entry.path().filename().string().rfind("journal.", 0) == 0)
                total += entry.file_size();
        }
        return total;
    }

private:
    fs::path path_;
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

// Every BF.SCANDUMP piece of a filter (header, then chunks).
std::vector<std::string> scandump(const ScalableFilter& filter) {
    std::vector<std::string> pieces;
    for (std::int64_t iter = 0;;) {
        bloom::DumpChunk chunk = bloom::dump_chunk(filter, iter);
        if (chunk.next_iter == 0) break;
        pieces.push_back(std::move(chunk.data));
        iter = chunk.next_iter;
    }
    return pieces;
}

// The payload with its footer made again: a valid version and CRC64 over
// whatever the value now holds, so the value's own checks are reached.
std::string refooted(std::string value_bytes) {
    value_bytes.push_back(static_cast<char>(persist::kDumpPayloadVersion & 0xff));
    value_bytes.push_back(static_cast<char>(persist::kDumpPayloadVersion >> 8));
    const std::uint64_t crc = core::crc64(0, value_bytes);
    for (int i = 0; i < 8; ++i) value_bytes.push_back(static_cast<char>(crc >> (8 * i)));
    return value_bytes;
}

std::string value_of(const std::string& payload) {
    return payload.substr(0, payload.size() - persist::kDumpFooterBytes);
}

bool parses(const std::string& payload) {
    persist::DumpValue value;
    std::string error;
    return persist::verify_dump_payload(payload) &&
           persist::parse_dump_value(payload, value, error);
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
        filter_with(options_of(0.01, 100, bloom::Layout::classic), 700),  // 3+ layers
        filter_with(options_of(0.001, 50000, bloom::Layout::blocked), 20000),
        filter_with(options_of(0.05, 300, bloom::Layout::classic, true), 250),
        filter_with(redisbloom_options(100), 500),
        ScalableFilter::create(options_of(0.01, 1000, bloom::Layout::blocked)),  // empty
    };
    for (const FilterRef& source : filters) {
        const std::string payload = payload_of(*source);
        EXPECT_EQ(payload.size(), persist::dump_payload_bytes(*source, source->num_layers()));
        ASSERT_TRUE(persist::verify_dump_payload(payload));
        persist::DumpValue value;
        std::string error;
        ASSERT_TRUE(persist::parse_dump_value(payload, value, error)) << error;
        const FilterRef restored = persist::build_dump_filter(value);
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
        const FilterRef filter = keyspace.get(name)->filter;
        one.put(name, filter);
        const std::string path = dir.str() + "/" + name + ".bloomery";
        persist::SaveStats stats;
        std::string error;
        ASSERT_TRUE(persist::save_snapshot(one, path, stats, error)) << error;
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
    EXPECT_EQ(static_cast<unsigned char>(payload[n - 10]), 0x01);
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
    for (const std::uint16_t version : {0xBF00, 0xBF02, 0x000A, 0x000B, 0x0001, 0xFFFF}) {
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
        std::string error;
        EXPECT_TRUE(journal.open(7, 0, "", error)) << error;
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
    persist::ReplayStats stats;
    std::string error;
    ASSERT_TRUE(persist::replay_journal(dir.str(), "journal", false, 0, 0, into, stats, error))
        << error;
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
    ASSERT_TRUE(live.keyspace.restore("restored", source, later, false));
    ASSERT_TRUE(live.keyspace.restore("rb", rb, 0, false));
    // COPY's filter: taken from "restored", which then takes more adds that
    // the copy must not have, live or replayed.
    const FilterRef copy =
        ScalableFilter::copy_of(*live.keyspace.get("restored")->filter, source->num_layers());
    ASSERT_TRUE(live.keyspace.restore("copy", copy, 0, false));
    std::vector<bloom::AddResult> results;
    const std::vector<std::string> more = {"late-1", "late-2", "late-3"};
    const std::vector<std::string_view> views(more.begin(), more.end());
    ASSERT_TRUE(live.keyspace.add_items("restored", views, {}, nullptr, results));
    // A big empty filter costs its CREATE, not its zero bits.
    const std::uint64_t before_empty = live.journal.position();
    ASSERT_TRUE(live.keyspace.restore(
        "empty", ScalableFilter::create(options_of(0.001, 1'000'000, bloom::Layout::blocked)), 0,
        false));
    EXPECT_LT(live.journal.position() - before_empty, 1024u);
    // REPLACE: DEL and CREATE and bits.
    ASSERT_TRUE(
        live.keyspace.restore("rb", filter_with(redisbloom_options(64), 50, "other"), 0, true));
    EXPECT_FALSE(live.keyspace.restore(
        "copy", ScalableFilter::create(options_of(0.01, 10, bloom::Layout::classic)), 0, false));
    live.close();

    Keyspace replayed(8);
    replay(dir, replayed);
    ASSERT_EQ(replayed.size(), live.keyspace.size());
    for (const char* key : {"restored", "rb", "copy", "empty"}) {
        SCOPED_TRACE(key);
        ASSERT_TRUE(replayed.get(key));
        expect_same_filter(*live.keyspace.get(key)->filter, *replayed.get(key)->filter);
        EXPECT_EQ(replayed.get(key)->expire_at_ms, live.keyspace.get(key)->expire_at_ms);
    }
    EXPECT_EQ(replayed.expiry("restored"), later);
    // The copy is the source as it was copied, not as it is now.
    bool late_in_copy = true;
    replayed.with_filter("copy", [&](const ScalableFilter& f) {
        late_in_copy = f.contains("late-1") && f.contains("late-2") && f.contains("late-3");
    });
    EXPECT_FALSE(late_in_copy);
    EXPECT_EQ(replayed.get("copy")->filter->items(), source->items() - 3);
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
    ASSERT_TRUE(live.keyspace.restore("big", filter, 0, false));
    const std::uint64_t bytes = live.journal.position() - before;
    EXPECT_GT(bytes, filter->bits_size());
    EXPECT_LT(bytes, filter->bits_size() + 4096);
    live.close();
    Keyspace replayed(8);
    replay(dir, replayed);
    expect_same_filter(*filter, *replayed.get("big")->filter);
}

TEST(KeyspaceRestore, RenameIfAbsentMovesOnlyToAFreeName) {
    Keyspace keyspace(4);
    keyspace.put("a", ScalableFilter::create(options_of(0.01, 10, bloom::Layout::classic)));
    keyspace.put("b", ScalableFilter::create(options_of(0.01, 10, bloom::Layout::classic)));
    const ScalableFilter* a = keyspace.get("a")->filter.get();
    EXPECT_EQ(keyspace.rename_if_absent("missing", "x"), std::nullopt);
    EXPECT_EQ(keyspace.rename_if_absent("a", "b"), false);
    EXPECT_EQ(keyspace.rename_if_absent("a", "a"), false);
    EXPECT_EQ(keyspace.rename_if_absent("a", "c"), true);
    EXPECT_FALSE(keyspace.contains("a"));
    EXPECT_EQ(keyspace.get("c")->filter.get(), a);
    // A name whose key is past its deadline is free.
    ASSERT_TRUE(keyspace.set_expiry("b", store::now_ms() + 1));
    ::usleep(5000);
    EXPECT_EQ(keyspace.rename_if_absent("c", "b"), true);
    EXPECT_EQ(keyspace.get("b")->filter.get(), a);
    EXPECT_EQ(keyspace.size(), 1u);
}

TEST(KeyspaceRestore, EraseIfUnchangedKeepsAKeyThatTookAdds) {
    Keyspace keyspace(4);
    keyspace.put("k", filter_with(options_of(0.01, 100, bloom::Layout::classic), 10));
    FilterRef filter = keyspace.get("k")->filter;
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
    Keyspace keyspace(4);
    const FilterRef shared = ScalableFilter::create(options_of(0.01, 10, bloom::Layout::classic));
    keyspace.put("live", shared);
    for (int i = 0; i < 30; ++i)
        keyspace.put("dead-" + std::to_string(i), shared, store::now_ms() + 1);
    ::usleep(5000);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(keyspace.random_key(), "live");
    // Every key past its deadline met on the way was erased.
    EXPECT_LT(keyspace.size(), 31u);
    // Only expired keys: nothing, after at most kRandomKeyDraws draws.
    Keyspace dead(4);
    for (int i = 0; i < 500; ++i) dead.put("d" + std::to_string(i), shared, store::now_ms() + 1);
    ::usleep(5000);
    EXPECT_EQ(dead.random_key(), std::nullopt);
    EXPECT_GE(dead.size(), 500u - Keyspace::kRandomKeyDraws);
}

// ---- Commands ----

using command::testing::FakeHooks;

class FakeSuspender : public command::ClientSuspender {
public:
    struct Sink : command::ReplySink {
        explicit Sink(std::vector<command::ReplyWriter>& into) : delivered(into) {}
        void deliver(command::ReplyWriter write_reply) override {
            delivered.push_back(std::move(write_reply));
        }
        std::vector<command::ReplyWriter>& delivered;
    };
    std::shared_ptr<command::ReplySink> suspend() override {
        return std::make_shared<Sink>(delivered);
    }
    std::vector<command::ReplyWriter> delivered;
};

// MIGRATE's target, played by a second keyspace: every RESTORE command the
// source sends is parsed and run there, its replies recorded as a target's.
class FakeTarget {
public:
    Keyspace keyspace{4};
    std::vector<std::string> commands;  // the command names it got
    command::MigrateRequest last;
    // Set to make the target refuse: every RESTORE answers this error line.
    std::string refuse;
    bool unreachable = false;
    // Runs once a key's payload is made, before the target answers.
    std::function<void(const std::string& key)> after_payload;

    void serve(command::MigrateRequest request,
               const std::function<void(command::MigrateResult)>& done) {
        command::MigrateResult result;
        last = request;
        if (unreachable) {
            result.failure = command::MigrateResult::Failure::connect;
            done(result);
            return;
        }
        for (std::size_t i = 0; i < request.keys; ++i) {
            std::string text;
            if (!request.restore_command(i, text)) continue;
            const std::vector<std::string> argv = parse(text);
            commands.push_back(argv.at(0));
            if (after_payload) after_payload(argv.at(1));
            const bool replace = argv.size() == 5 && argv[4] == "REPLACE";
            std::string error;
            if (!refuse.empty()) {
                error = refuse;
            } else if (!replace && keyspace.contains(argv[1])) {
                error = "BUSYKEY Target key name already exists.";
            } else {
                persist::DumpValue value;
                std::string why;
                EXPECT_TRUE(persist::verify_dump_payload(argv[3]));
                EXPECT_TRUE(persist::parse_dump_value(argv[3], value, why)) << why;
                const std::int64_t ttl = std::stoll(argv[2]);
                keyspace.restore(argv[1], persist::build_dump_filter(value),
                                 ttl == 0 ? 0 : store::now_ms() + ttl, replace);
            }
            if (error.empty()) {
                result.accepted.push_back(i);
            } else if (result.target_error.empty()) {
                result.target_error = error;
            }
        }
        done(result);
    }

private:
    // A RESP array of bulk strings.
    static std::vector<std::string> parse(const std::string& text) {
        std::vector<std::string> out;
        std::size_t at = text.find("\r\n") + 2;
        while (at < text.size()) {
            EXPECT_EQ(text[at], '$');
            const std::size_t end = text.find("\r\n", at);
            const std::size_t length = std::stoull(text.substr(at + 1, end - at - 1));
            out.push_back(text.substr(end + 2, length));
            at = end + 2 + length + 2;
        }
        return out;
    }
};

class MigratingHooks final : public command::ClientDirectory,
                             public command::ServerStats,
                             public command::Persistence,
                             public command::Shutdown,
                             public command::Replication,
                             public command::ReplicaGate,
                             public command::Migration {
public:
    explicit MigratingHooks(FakeTarget& target) : target_(target) {}
    std::size_t connected_clients() override { return 1; }
    std::int64_t blocked_clients() override { return 0; }
    std::string client_list(std::span<const std::int64_t>) override { return ""; }
    bool kill_client(std::int64_t) override { return false; }
    bool kill_client(std::string_view) override { return false; }
    command::StatsTotals stats() override { return {}; }
    void reset_stats() override {}
    void save_async(std::function<void(persist::SaveResult)> done) override { done({}); }
    persist::SaveResult bgsave() override { return {}; }
    persist::PersistenceInfo persistence() override { return {}; }
    bool snapshot_failing() override { return false; }
    void begin_shutdown(const command::ShutdownOptions&, std::function<void()>) override {}
    void abort_shutdown(std::function<void(bool)> done) override { done(false); }
    std::int64_t start_time_ms() override { return 0; }
    unsigned worker_threads() override { return 1; }
    void migrate(command::MigrateRequest request,
                 std::function<void(command::MigrateResult)> done) override {
        target_.serve(std::move(request), done);
    }
    command::PubSub& pubsub() { return channels_; }

private:
    FakeTarget& target_;
    command::PubSub channels_;
};

class KeyCommands : public ::testing::Test {
protected:
    void SetUp() override {
        const auto built = command::build_default_registry(registry);
        ASSERT_TRUE(built) << built.error();
    }
    std::string run(std::vector<std::string> words) {
        std::vector<std::string_view> argv(words.begin(), words.end());
        out.clear();
        command::DispatchContext ctx{registry, keyspace, config, hooks,
                                     client,   stats,    writer, &suspender};
        command::dispatch(registry, ctx, argv);
        for (auto& write_reply : suspender.delivered) write_reply(writer);
        suspender.delivered.clear();
        return out;
    }
    // The bulk string a reply holds.
    static std::string bulk(const std::string& reply) {
        EXPECT_EQ(reply[0], '$') << reply;
        const std::size_t end = reply.find("\r\n");
        const std::size_t length = std::stoull(reply.substr(1, end - 1));
        EXPECT_EQ(reply.size(), end + 2 + length + 2);
        return reply.substr(end + 2, length);
    }
    std::vector<std::string> scandump_of(const std::string& key) {
        return scandump(*keyspace.get(key)->filter);
    }

    command::Registry registry;
    Keyspace keyspace{8};
    core::Config config;
    FakeTarget target;
    MigratingHooks hooks{target};
    FakeSuspender suspender;
    command::ClientState client;
    command::WorkerStats stats;
    std::string out;
    resp::Writer writer{out};
};

TEST_F(KeyCommands, DumpAndRestoreRoundTrip) {
    EXPECT_EQ(run({"DUMP", "missing"}), "$-1\r\n");
    ASSERT_EQ(run({"BF.RESERVE", "src", "0.001", "1000", "EXPANSION", "3"}), "+OK\r\n");
    for (int i = 0; i < 3000; ++i) run({"BF.ADD", "src", "item-" + std::to_string(i)});
    const std::string payload = bulk(run({"DUMP", "src"}));
    EXPECT_EQ(run({"RESTORE", "dst", "0", payload}), "+OK\r\n");
    EXPECT_EQ(scandump_of("dst"), scandump_of("src"));
    EXPECT_EQ(run({"BF.INFO", "dst", "ITEMS"}), run({"BF.INFO", "src", "ITEMS"}));
    EXPECT_EQ(run({"TTL", "dst"}), ":-1\r\n");
    EXPECT_EQ(run({"BF.EXISTS", "dst", "item-2999"}), ":1\r\n");
    // Another DUMP of the copy is the same payload.
    EXPECT_EQ(bulk(run({"DUMP", "dst"})), payload);
    // TTL kept (relative, then absolute).
    EXPECT_EQ(run({"RESTORE", "ttl", "100000", payload}), "+OK\r\n");
    const std::string pttl = run({"PTTL", "ttl"});
    EXPECT_GT(std::stoll(pttl.substr(1)), 90000) << pttl;
    const std::int64_t at = store::now_ms() + 500000;
    EXPECT_EQ(run({"RESTORE", "abs", std::to_string(at), payload, "ABSTTL"}), "+OK\r\n");
    EXPECT_EQ(run({"PEXPIRETIME", "abs"}), ":" + std::to_string(at) + "\r\n");
}

TEST_F(KeyCommands, RestoreChecksInRedissOrder) {
    ASSERT_EQ(run({"BF.ADD", "k", "a"}), ":1\r\n");
    const std::string payload = bulk(run({"DUMP", "k"}));
    EXPECT_EQ(run({"RESTORE", "k", "0", payload}), "-BUSYKEY Target key name already exists.\r\n");
    // Options first, then BUSYKEY, then the TTL, then the payload.
    EXPECT_EQ(run({"RESTORE", "k", "x", "junk", "NOPE"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"RESTORE", "k", "x", "junk"}), "-BUSYKEY Target key name already exists.\r\n");
    EXPECT_EQ(run({"RESTORE", "n", "x", "junk"}),
              "-ERR value is not an integer or out of range\r\n");
    EXPECT_EQ(run({"RESTORE", "n", "-1", "junk"}), "-ERR Invalid TTL value, must be >= 0\r\n");
    EXPECT_EQ(run({"RESTORE", "n", "0", "junk"}),
              "-ERR DUMP payload version or checksum are wrong\r\n");
    EXPECT_EQ(run({"RESTORE", "n", "0", ""}),
              "-ERR DUMP payload version or checksum are wrong\r\n");
    EXPECT_EQ(run({"RESTORE", "n", "0", refooted("\x01garbage")}), "-ERR Bad data format\r\n");
    EXPECT_EQ(run({"RESTORE", "n", "0", payload, "IDLETIME", "-1"}),
              "-ERR Invalid IDLETIME value, must be >= 0\r\n");
    EXPECT_EQ(run({"RESTORE", "n", "0", payload, "IDLETIME", "x"}),
              "-ERR value is not an integer or out of range\r\n");
    EXPECT_EQ(run({"RESTORE", "n", "0", payload, "FREQ", "256"}),
              "-ERR Invalid FREQ value, must be >= 0 and <= 255\r\n");
    EXPECT_EQ(run({"RESTORE", "n", "0", payload, "FREQ", "-1"}),
              "-ERR Invalid FREQ value, must be >= 0 and <= 255\r\n");
    // IDLETIME and FREQ exclude each other (the second is a syntax error).
    EXPECT_EQ(run({"RESTORE", "n", "0", payload, "IDLETIME", "1", "FREQ", "1"}),
              "-ERR syntax error\r\n");
    EXPECT_EQ(run({"RESTORE", "n", "0", payload, "IDLETIME"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"EXISTS", "n"}), ":0\r\n");
    EXPECT_EQ(run({"RESTORE", "n", "0", payload, "IDLETIME", "100"}), "+OK\r\n");
    EXPECT_EQ(run({"RESTORE", "f", "0", payload, "freq", "255", "replace", "absttl"}), "+OK\r\n");
    // REPLACE replaces; an expired TTL deletes what was there.
    ASSERT_EQ(run({"BF.ADD", "other", "zzz"}), ":1\r\n");
    EXPECT_EQ(run({"RESTORE", "other", "0", payload, "REPLACE"}), "+OK\r\n");
    EXPECT_EQ(run({"BF.EXISTS", "other", "zzz"}), ":0\r\n");
    EXPECT_EQ(run({"BF.EXISTS", "other", "a"}), ":1\r\n");
    EXPECT_EQ(run({"RESTORE", "other", "1", payload, "REPLACE", "ABSTTL"}), "+OK\r\n");
    EXPECT_EQ(run({"EXISTS", "other"}), ":0\r\n");
    EXPECT_EQ(run({"RESTORE", "never", "1", payload, "ABSTTL"}), "+OK\r\n");
    EXPECT_EQ(run({"EXISTS", "never"}), ":0\r\n");
}

TEST_F(KeyCommands, RestoreAppliesTheFilterBounds) {
    ASSERT_EQ(run({"BF.RESERVE", "big", "0.0001", "200000"}), "+OK\r\n");
    const std::string payload = bulk(run({"DUMP", "big"}));
    config.max_filter_bytes = 64 * 1024;
    EXPECT_EQ(run({"RESTORE", "copy", "0", payload})
                  .rfind("-ERR filter would exceed max-filter-bytes", 0),
              0u);
    EXPECT_EQ(run({"COPY", "big", "copy"}).rfind("-ERR filter would exceed max-filter-bytes", 0),
              0u);
    EXPECT_EQ(run({"EXISTS", "copy"}), ":0\r\n");
    // DUMP makes nothing a RESTORE could not take.
    config.max_filter_bytes = 0;
    config.proto_max_bulk_len = 1024;
    EXPECT_EQ(run({"DUMP", "big"}).rfind("-ERR DUMP payload would exceed proto-max-bulk-len", 0),
              0u);
}

TEST_F(KeyCommands, CopyMakesAnIndependentFilterWithTheDeadline) {
    EXPECT_EQ(run({"COPY", "missing", "dst"}), ":0\r\n");
    ASSERT_EQ(run({"BF.MADD", "src", "a", "b"}), "*2\r\n:1\r\n:1\r\n");
    ASSERT_EQ(run({"EXPIRE", "src", "1000"}), ":1\r\n");
    EXPECT_EQ(run({"COPY", "src", "src"}), "-ERR source and destination objects are the same\r\n");
    EXPECT_EQ(run({"COPY", "src", "dst", "DB", "1"}), "-ERR DB index is out of range\r\n");
    EXPECT_EQ(run({"COPY", "src", "dst", "DB", "x"}),
              "-ERR value is not an integer or out of range\r\n");
    EXPECT_EQ(run({"COPY", "src", "dst", "DB"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"COPY", "src", "dst", "NOPE"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"COPY", "src", "dst", "DB", "0"}), ":1\r\n");
    EXPECT_EQ(scandump_of("dst"), scandump_of("src"));
    EXPECT_EQ(run({"PEXPIRETIME", "dst"}), run({"PEXPIRETIME", "src"}));
    EXPECT_NE(keyspace.get("dst")->filter.get(), keyspace.get("src")->filter.get());
    ASSERT_EQ(run({"BF.ADD", "src", "only-in-src"}), ":1\r\n");
    EXPECT_EQ(run({"BF.EXISTS", "dst", "only-in-src"}), ":0\r\n");
    EXPECT_EQ(run({"COPY", "src", "dst"}), ":0\r\n");
    EXPECT_EQ(run({"COPY", "src", "dst", "REPLACE"}), ":1\r\n");
    EXPECT_EQ(run({"BF.EXISTS", "dst", "only-in-src"}), ":1\r\n");
}

TEST_F(KeyCommands, RenamenxTouchAndRandomkey) {
    EXPECT_EQ(run({"RENAMENX", "missing", "x"}), "-ERR no such key\r\n");
    EXPECT_EQ(run({"RANDOMKEY"}), "$-1\r\n");
    ASSERT_EQ(run({"BF.ADD", "a", "1"}), ":1\r\n");
    ASSERT_EQ(run({"BF.ADD", "b", "1"}), ":1\r\n");
    EXPECT_EQ(run({"RENAMENX", "a", "b"}), ":0\r\n");
    EXPECT_EQ(run({"RENAMENX", "a", "a"}), ":0\r\n");
    EXPECT_EQ(run({"RENAMENX", "a", "c"}), ":1\r\n");
    EXPECT_EQ(run({"EXISTS", "a", "c"}), ":1\r\n");
    EXPECT_EQ(run({"TOUCH", "a", "b", "c", "c"}), ":3\r\n");
    EXPECT_EQ(run({"TOUCH", "nothing"}), ":0\r\n");
    std::set<std::string> drawn;
    for (int i = 0; i < 200; ++i) drawn.insert(bulk(run({"RANDOMKEY"})));
    EXPECT_EQ(drawn, (std::set<std::string>{"b", "c"}));
}

TEST_F(KeyCommands, MigrateMovesKeysAndDeletesThemUnlessCopy) {
    EXPECT_EQ(run({"MIGRATE", "127.0.0.1", "1", "missing", "0", "100"}), "+NOKEY\r\n");
    ASSERT_EQ(run({"BF.MADD", "k1", "a", "b"}), "*2\r\n:1\r\n:1\r\n");
    ASSERT_EQ(run({"BF.MADD", "k2", "c"}), "*1\r\n:1\r\n");
    ASSERT_EQ(run({"PEXPIRE", "k2", "100000"}), ":1\r\n");
    const std::vector<std::string> k1 = scandump_of("k1");
    const std::vector<std::string> k2 = scandump_of("k2");

    EXPECT_EQ(run({"MIGRATE", "127.0.0.1", "7000", "k1", "3", "0", "COPY"}), "+OK\r\n");
    EXPECT_EQ(target.last.host, "127.0.0.1");
    EXPECT_EQ(target.last.port, 7000);
    EXPECT_EQ(target.last.db, 3);
    EXPECT_EQ(target.last.timeout_ms, 1000);  // 0: Redis's default
    EXPECT_FALSE(target.last.auth);
    EXPECT_EQ(run({"EXISTS", "k1"}), ":1\r\n");
    EXPECT_EQ(scandump(*target.keyspace.get("k1")->filter), k1);
    // Again: the target has it (BUSYKEY passed back), unless REPLACE.
    EXPECT_EQ(run({"MIGRATE", "h", "7000", "k1", "0", "50"}),
              "-ERR Target instance replied with error: BUSYKEY Target key name already "
              "exists.\r\n");
    EXPECT_EQ(run({"EXISTS", "k1"}), ":1\r\n");
    EXPECT_EQ(run({"MIGRATE", "h", "7000", "", "0", "50", "REPLACE", "AUTH2", "u", "p", "KEYS",
                   "k1", "k2", "absent"}),
              "+OK\r\n");
    EXPECT_TRUE(target.last.auth);
    EXPECT_EQ(target.last.username, "u");
    EXPECT_EQ(target.last.password, "p");
    EXPECT_EQ(target.last.keys, 2u);  // "absent" is not sent
    EXPECT_EQ(target.commands.back(), "RESTORE");
    EXPECT_EQ(run({"EXISTS", "k1", "k2"}), ":0\r\n");
    EXPECT_EQ(scandump(*target.keyspace.get("k2")->filter), k2);
    const std::int64_t left = *target.keyspace.expiry("k2") - store::now_ms();
    EXPECT_GT(left, 90000);
    EXPECT_LE(left, 100000);
    EXPECT_EQ(run({"MIGRATE", "h", "7000", "", "0", "50", "KEYS", "k1"}), "+NOKEY\r\n");
}

TEST_F(KeyCommands, MigrateErrors) {
    ASSERT_EQ(run({"BF.ADD", "k", "a"}), ":1\r\n");
    EXPECT_EQ(run({"MIGRATE", "h", "1", "k", "0", "10", "KEYS", "k"}),
              "-ERR When using MIGRATE KEYS option, the key argument must be set to the empty "
              "string\r\n");
    EXPECT_EQ(run({"MIGRATE", "h", "1", "k", "0", "10", "AUTH"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"MIGRATE", "h", "1", "k", "0", "10", "AUTH2", "u"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"MIGRATE", "h", "1", "k", "0", "10", "BOGUS"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"MIGRATE", "h", "1", "k", "x", "10"}),
              "-ERR value is not an integer or out of range\r\n");
    EXPECT_EQ(run({"MIGRATE", "h", "1", "k", "0", "x"}),
              "-ERR value is not an integer or out of range\r\n");
    EXPECT_EQ(run({"MIGRATE", "h", "notaport", "k", "0", "10"}),
              "-IOERR error or timeout connecting to the client\r\n");
    target.unreachable = true;
    EXPECT_EQ(run({"MIGRATE", "h", "1", "k", "0", "10"}),
              "-IOERR error or timeout connecting to the client\r\n");
    target.unreachable = false;
    target.refuse = "NOAUTH Authentication required.";
    EXPECT_EQ(run({"MIGRATE", "h", "1", "k", "0", "10"}),
              "-ERR Target instance replied with error: NOAUTH Authentication required.\r\n");
    EXPECT_EQ(run({"EXISTS", "k"}), ":1\r\n");
    target.refuse.clear();
    // A payload past proto-max-bulk-len is not sent.
    config.proto_max_bulk_len = 64;
    EXPECT_EQ(run({"MIGRATE", "h", "1", "k", "0", "10"}).rfind("-ERR DUMP payload would exceed", 0),
              0u);
    EXPECT_EQ(run({"EXISTS", "k"}), ":1\r\n");
    EXPECT_FALSE(target.keyspace.contains("k"));
}

TEST_F(KeyCommands, MigrateKeepsAKeyThatChangedWhileItWasSent) {
    ASSERT_EQ(run({"BF.ADD", "k", "a"}), ":1\r\n");
    ASSERT_EQ(run({"BF.ADD", "quiet", "a"}), ":1\r\n");
    // Another client adds to "k" after its payload was made, before the
    // target answers: deleting "k" would lose that add.
    target.after_payload = [&](const std::string& key) {
        if (key != "k") return;
        std::vector<bloom::AddResult> results;
        const std::vector<std::string_view> item = {"b"};
        ASSERT_TRUE(keyspace.add_items("k", item, {}, nullptr, results));
        ASSERT_EQ(results.at(0), bloom::AddResult::added);
    };
    EXPECT_EQ(run({"MIGRATE", "h", "1", "", "0", "10", "KEYS", "k", "quiet"}),
              "-ERR a key changed while MIGRATE sent it: it is kept here, and the target holds "
              "the copy it was sent; MIGRATE it again with REPLACE\r\n");
    EXPECT_EQ(run({"BF.EXISTS", "k", "b"}), ":1\r\n");
    EXPECT_EQ(run({"EXISTS", "quiet"}), ":0\r\n");  // unchanged: moved
    ASSERT_TRUE(target.keyspace.contains("k"));
    target.after_payload = nullptr;
    EXPECT_EQ(run({"MIGRATE", "h", "1", "k", "0", "10", "REPLACE"}), "+OK\r\n");
    EXPECT_EQ(run({"EXISTS", "k"}), ":0\r\n");
    bool has_b = false;
    target.keyspace.with_filter("k", [&](const ScalableFilter& f) { has_b = f.contains("b"); });
    EXPECT_TRUE(has_b);
}

TEST_F(KeyCommands, MigrateInClusterModeSendsRestoreAsking) {
    std::string error;
    auto topology = cluster::parse_topology("0-16383=a:1", "a:1", "", error);
    ASSERT_TRUE(topology) << error;
    config.cluster_enabled = true;
    config.cluster = std::make_shared<const cluster::Topology>(std::move(*topology));
    ASSERT_EQ(run({"BF.ADD", "k", "a"}), ":1\r\n");
    EXPECT_EQ(run({"MIGRATE", "h", "1", "k", "0", "10", "COPY"}), "+OK\r\n");
    EXPECT_EQ(target.commands.back(), "RESTORE-ASKING");
}

// ---- Key positions: MIGRATE's KEYS form ----

const command::Registry& table() {
    static const command::Registry registry = [] {
        command::Registry r;
        if (const auto built = command::build_default_registry(r); !built) {
            throw std::runtime_error(built.error());
        }
        return r;
    }();
    return registry;
}

std::vector<std::string_view> keys_of(std::vector<std::string_view> argv) {
    const command::CommandSpec& spec = *table().find(argv[0]);
    std::vector<std::string_view> keys;
    for (std::size_t position : command::Registry::key_positions(spec, argv)) {
        keys.push_back(argv[position]);
    }
    return keys;
}

using Keys = std::vector<std::string_view>;

TEST(MigrateKeys, AreTheKeyArgumentOrThoseAfterKeys) {
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "k", "0", "10"}), Keys{"k"});
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "k", "0", "10", "COPY", "REPLACE"}), Keys{"k"});
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "", "0", "10", "KEYS", "a", "b"}), (Keys{"a", "b"}));
    EXPECT_EQ(keys_of({"migrate", "h", "1", "", "0", "10", "copy", "auth", "pw", "keys", "a"}),
              Keys{"a"});
    // A password or user name that reads KEYS is an option's value.
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "", "0", "10", "AUTH", "KEYS", "KEYS", "a"}),
              Keys{"a"});
    EXPECT_EQ(
        keys_of({"MIGRATE", "h", "1", "", "0", "10", "AUTH2", "KEYS", "KEYS", "KEYS", "x", "y"}),
        (Keys{"x", "y"}));
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "", "0", "10", "KEYS"}), Keys{});
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "k", "0", "10", "KEYS", "a"}), Keys{});  // refused
    EXPECT_EQ(keys_of({"COPY", "a", "b", "DB", "0"}), (Keys{"a", "b"}));
    EXPECT_EQ(keys_of({"TOUCH", "a", "b", "c"}), (Keys{"a", "b", "c"}));
    EXPECT_EQ(keys_of({"RESTORE-ASKING", "a", "0", "x"}), Keys{"a"});
    EXPECT_TRUE(table().find("restore-asking")->asking);
    EXPECT_FALSE(table().find("restore")->asking);
}

TEST(MigrateKeys, AccessControlChecksTheKeysAfterKeys) {
    auto acl = command::Acl::build(table(), "", "users.acl", "user app on nopass ~app:* +@all\n");
    ASSERT_TRUE(acl) << acl.error();
    const command::AclUser& app = *(*acl)->find("app");
    const auto may = [&](std::vector<std::string_view> argv) {
        return app.may_access_keys(*table().find(argv[0]), command::Args(argv));
    };
    EXPECT_TRUE(may({"MIGRATE", "h", "1", "app:1", "0", "10"}));
    EXPECT_FALSE(may({"MIGRATE", "h", "1", "other", "0", "10"}));
    EXPECT_TRUE(may({"MIGRATE", "h", "1", "", "0", "10", "KEYS", "app:1", "app:2"}));
    EXPECT_FALSE(may({"MIGRATE", "h", "1", "", "0", "10", "KEYS", "app:1", "other"}));
    EXPECT_FALSE(may({"MIGRATE", "h", "1", "", "0", "10", "COPY", "KEYS", "other"}));
    EXPECT_FALSE(may({"COPY", "app:1", "other"}));
    EXPECT_TRUE(may({"COPY", "app:1", "app:2"}));
    EXPECT_FALSE(may({"RENAMENX", "app:1", "other"}));
    EXPECT_FALSE(may({"TOUCH", "app:1", "other"}));
    EXPECT_FALSE(may({"RESTORE", "other", "0", "x"}));
    EXPECT_FALSE(may({"DUMP", "other"}));
}

TEST(MigrateKeys, TheSlowLogHidesItsPasswords) {
    command::Slowlog log(0, 10);
    command::ClientState client;
    const auto logged = [&](std::vector<std::string_view> argv) {
        log.reset();
        log.record(table().find("migrate"), argv, 1000, client);
        return log.newest(1).at(0).argv;
    };
    using Words = std::vector<std::string>;
    EXPECT_EQ(logged({"MIGRATE", "h", "1", "k", "0", "10", "AUTH", "secret"}),
              (Words{"MIGRATE", "h", "1", "k", "0", "10", "AUTH", "(redacted)"}));
    EXPECT_EQ(logged({"MIGRATE", "h", "1", "", "0", "10", "AUTH2", "u", "pw", "KEYS", "a"}),
              (Words{"MIGRATE", "h", "1", "", "0", "10", "AUTH2", "(redacted)", "(redacted)",
                     "(redacted)", "(redacted)"}));
    EXPECT_EQ(logged({"MIGRATE", "h", "1", "", "0", "10", "KEYS", "auth", "pw"}),
              (Words{"MIGRATE", "h", "1", "", "0", "10", "KEYS", "auth", "pw"}));
}

class ClusterMigrate : public ::testing::Test {
protected:
    void SetUp() override {
        const auto built = command::build_default_registry(registry);
        ASSERT_TRUE(built) << built.error();
        // This node is a, serving slots 0-8191.
        std::string error;
        auto topology = cluster::parse_topology("0-8191=a:1,8192-16383=b:2", "a:1", "", error);
        ASSERT_TRUE(topology) << error;
        config.cluster_enabled = true;
        config.cluster = std::make_shared<const cluster::Topology>(std::move(*topology));
        // Keys of this node's slots and of the other's.
        for (int i = 0; mine.size() < 2 || theirs.empty(); ++i) {
            const std::string key = "key" + std::to_string(i);
            (core::key_slot(key) < 8192 ? mine : theirs).push_back(key);
        }
    }
    std::string run(std::vector<std::string> words) {
        std::vector<std::string_view> argv(words.begin(), words.end());
        out.clear();
        command::DispatchContext ctx{registry, keyspace, config, hooks,
                                     client,   stats,    writer, &suspender};
        command::dispatch(registry, ctx, argv);
        for (auto& write_reply : suspender.delivered) write_reply(writer);
        suspender.delivered.clear();
        return out;
    }

    command::Registry registry;
    Keyspace keyspace{4};
    core::Config config;
    FakeTarget target;
    MigratingHooks hooks{target};
    FakeSuspender suspender;
    command::ClientState client;
    command::WorkerStats stats;
    std::string out;
    resp::Writer writer{out};
    std::vector<std::string> mine, theirs;
};

TEST_F(ClusterMigrate, RoutesByTheKeysAfterKeys) {
    // Keys of this node: served (NOKEY, none exists); another node's:
    // redirected, whichever form names them.
    EXPECT_EQ(run({"MIGRATE", "h", "1", mine[0], "0", "10"}), "+NOKEY\r\n");
    EXPECT_EQ(run({"MIGRATE", "h", "1", theirs[0], "0", "10"}).rfind("-MOVED ", 0), 0u);
    EXPECT_EQ(run({"MIGRATE", "h", "1", "", "0", "10", "KEYS", theirs[0]}).rfind("-MOVED ", 0), 0u);
    // The empty key argument is not a key of the KEYS form.
    const std::string crossslot = "-CROSSSLOT Keys in request don't hash to the same slot\r\n";
    if (core::key_slot(mine[0]) != core::key_slot(mine[1])) {
        EXPECT_EQ(run({"MIGRATE", "h", "1", "", "0", "10", "KEYS", mine[0], mine[1]}), crossslot);
    }
    EXPECT_EQ(run({"MIGRATE", "h", "1", "", "0", "10", "KEYS", mine[0]}), "+NOKEY\r\n");
    // RESTORE-ASKING is served whatever the slot; RESTORE is redirected.
    ASSERT_EQ(run({"BF.ADD", mine[0], "x"}), ":1\r\n");
    const std::string dump = run({"DUMP", mine[0]});
    const std::string payload =
        dump.substr(dump.find("\r\n") + 2, dump.size() - dump.find("\r\n") - 4);
    EXPECT_EQ(run({"RESTORE", theirs[0], "0", payload}).rfind("-MOVED ", 0), 0u);
    EXPECT_EQ(run({"RESTORE-ASKING", theirs[0], "0", payload}), "+OK\r\n");
}

}  // namespace
}  // namespace bloomery
