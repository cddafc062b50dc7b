// The RedisBloom hash scheme against RedisBloom 2.4's own answers: the
// fixtures under tests/fixtures/redisbloom (make_fixtures.py) hold what
// RedisBloom dumped, answered and saved for filters of every option. Loading
// them must give the same bits (a dump byte for byte), the same answers for
// items held and not held, the same BF.INFO, and further adds must land
// where RedisBloom put them.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/journal_reader.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/keyspace.hpp"
#include "redisbloom_fixtures.hpp"

namespace bloomery {
namespace {

using bloom::AddResult;
using bloom::FilterRef;
using bloom::ScalableFilter;
using json = nlohmann::json;
using Chunks = std::vector<std::pair<std::int64_t, std::string>>;
using fixtures::base64_decode;
using fixtures::fixture_path;
using fixtures::read_file;

const json& fixtures(const std::string& name) {
    static std::map<std::string, json> loaded;
    auto it = loaded.find(name);
    if (it == loaded.end())
        it = loaded.emplace(name, json::parse(read_file(fixture_path(name)))).first;
    return it->second;
}

// The items of a fixture spec: a Python "%d" pattern and a count, or base64.
std::vector<std::string> items_of(const json& spec) {
    std::vector<std::string> out;
    if (spec.contains("pattern")) {
        const std::string pattern = spec["pattern"];
        const auto at = pattern.find("%d");
        const std::uint64_t count = spec["count"];
        for (std::uint64_t i = 0; i < count; ++i) {
            out.push_back(pattern.substr(0, at) + std::to_string(i) + pattern.substr(at + 2));
        }
    } else {
        for (const auto& item : spec["b64"]) out.push_back(base64_decode(item.get<std::string>()));
    }
    return out;
}

Chunks chunks_of(const json& list) {
    Chunks out;
    for (const auto& entry : list) {
        out.emplace_back(entry[0].get<std::int64_t>(), base64_decode(entry[1].get<std::string>()));
    }
    return out;
}

// BF.LOADCHUNK of every chunk, as a migration does.
FilterRef load_chunks(const Chunks& chunks) {
    core::Result<FilterRef> filter = bloom::decode_header(chunks.at(0).second, 0);
    EXPECT_TRUE(filter) << filter.error();
    if (!filter) return FilterRef{};
    for (std::size_t i = 1; i < chunks.size(); ++i) {
        const core::Status loaded = bloom::load_chunk(**filter, chunks[i].first, chunks[i].second);
        EXPECT_TRUE(loaded) << loaded.error();
    }
    return *filter;
}

// BF.SCANDUMP's whole loop.
Chunks dump_all(const ScalableFilter& filter) {
    Chunks out;
    for (std::int64_t iter = 0;;) {
        bloom::DumpChunk chunk = bloom::dump_chunk(filter, iter);
        if (chunk.next_iter == 0) return out;
        out.emplace_back(chunk.next_iter, std::move(chunk.data));
        iter = chunk.next_iter;
    }
}

std::string answers(const ScalableFilter& filter, const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) out += filter.contains(item) ? '1' : '0';
    return out;
}

// BF.INFO's five fields and BF.CARD as the server answers them.
void expect_info(const ScalableFilter& filter, const json& info) {
    EXPECT_EQ(filter.capacity(), info["Capacity"].get<std::uint64_t>());
    EXPECT_EQ(filter.info_size(), info["Size"].get<std::uint64_t>());
    EXPECT_EQ(filter.num_layers(), info["Number of filters"].get<std::uint64_t>());
    EXPECT_EQ(filter.items(), info["Number of items inserted"].get<std::uint64_t>());
    if (info["Expansion rate"].is_null()) {
        EXPECT_TRUE(filter.options().nonscaling);
    } else {
        EXPECT_FALSE(filter.options().nonscaling);
        EXPECT_EQ(filter.options().expansion, info["Expansion rate"].get<std::uint32_t>());
    }
}

// BF.MADD as RedisBloom answers it: 1, 0, or the error that stops it.
json madd(ScalableFilter& filter, const std::vector<std::string>& items) {
    json replies = json::array();
    for (const std::string& item : items) {
        const AddResult result = filter.add(item, {});
        if (result == AddResult::full) {
            replies.push_back("non scaling filter is full");
            break;
        }
        EXPECT_TRUE(result == AddResult::added || result == AddResult::exists);
        replies.push_back(result == AddResult::added ? 1 : 0);
    }
    return replies;
}

void expect_same_chunks(const Chunks& got, const Chunks& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].first, want[i].first) << "chunk " << i;
        EXPECT_TRUE(got[i].second == want[i].second) << "chunk " << i << " differs";
    }
}

// ---- The scheme itself ----

TEST(RedisBloomScheme, SizesSubFiltersAsRedisBloomDoes) {
    // BF.DEBUG of RedisBloom 2.4.23 for BF.RESERVE a 0.01 1000 (first layer
    // at 0.005), b 0.001 100 EXPANSION 4 (two layers) and c 0.01 100
    // NONSCALING.
    struct Case {
        std::uint64_t entries;
        double error;
        std::uint64_t bits;
        std::uint32_t hashes;
    };
    for (const Case& c : {Case{1000, 0.005, 11072, 8}, Case{100, 0.0005, 1600, 11},
                          Case{400, 0.00025, 6912, 12}, Case{100, 0.01, 960, 7}}) {
        const std::optional<bloom::LayerGeometry> g =
            bloom::redisbloom_layer(c.entries, c.error, bloom::kRedisBloomDefaultOptions);
        ASSERT_TRUE(g);
        EXPECT_EQ(g->bits, c.bits) << c.entries << " at " << c.error;
        EXPECT_EQ(g->hashes, c.hashes);
        EXPECT_EQ(g->capacity, c.entries);
        EXPECT_EQ(g->redisbloom_n2, 0);
        EXPECT_EQ(bloom::check_layer(*g, 0), bloom::BoundsError::none);
    }
    // Without NOROUND (RedisBloom 1.x): a power of two, and the entries the
    // extra bits hold: 1000 at 1 % wants 9585 bits, gets 2^14.
    const std::optional<bloom::LayerGeometry> g =
        bloom::redisbloom_layer(1000, 0.01, bloom::kRedisBloomForce64);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->bits, 16384u);
    EXPECT_EQ(g->redisbloom_n2, 14);
    EXPECT_EQ(g->capacity, 1000u + static_cast<std::uint64_t>((16384 - 1000 * g->redisbloom_bpe) /
                                                              g->redisbloom_bpe));
    EXPECT_FALSE(bloom::redisbloom_layer(0, 0.01, bloom::kRedisBloomDefaultOptions));
    EXPECT_FALSE(bloom::redisbloom_layer(10, 1.0, bloom::kRedisBloomDefaultOptions));
    EXPECT_FALSE(bloom::redisbloom_layer(10, 0.01, bloom::kRedisBloomEntsIsBits));
}

TEST(RedisBloomScheme, BoundsRefuseOptionsAndLayersItCannotHonour) {
    bloom::FilterOptions rb;
    rb.scheme = bloom::HashScheme::redisbloom;
    rb.redisbloom_options = bloom::kRedisBloomDefaultOptions;
    EXPECT_EQ(bloom::check_stored_options(rb), bloom::BoundsError::none);
    auto with = [&](auto change) {
        bloom::FilterOptions o = rb;
        change(o);
        return bloom::check_stored_options(o);
    };
    using bloom::BoundsError;
    EXPECT_EQ(with([](auto& o) { o.redisbloom_options |= bloom::kRedisBloomEntsIsBits; }),
              BoundsError::scheme_invalid);
    EXPECT_EQ(with([](auto& o) { o.redisbloom_options |= 16; }), BoundsError::scheme_invalid);
    EXPECT_EQ(with([](auto& o) { o.nonscaling = true; }), BoundsError::scheme_invalid);
    EXPECT_EQ(with([](auto& o) {
                  o.nonscaling = true;
                  o.redisbloom_options |= bloom::kRedisBloomNoScaling;
              }),
              BoundsError::none);
    EXPECT_EQ(with([](auto& o) { o.layout = bloom::Layout::blocked; }),
              BoundsError::scheme_invalid);
    EXPECT_EQ(with([](auto& o) { o.scheme = bloom::HashScheme::bloomery; }),
              BoundsError::scheme_invalid);  // RedisBloom options on bloomery's scheme
    EXPECT_EQ(with([](auto& o) { o.scheme = static_cast<bloom::HashScheme>(7); }),
              BoundsError::scheme_invalid);

    const std::optional<bloom::LayerGeometry> layer =
        bloom::redisbloom_layer(1000, 0.01, bloom::kRedisBloomDefaultOptions);
    ASSERT_TRUE(layer);
    EXPECT_EQ(bloom::check_layer(*layer, 0), BoundsError::none);
    auto layer_with = [&](auto change) {
        bloom::LayerGeometry g = *layer;
        change(g);
        return bloom::check_layer(g, 0);
    };
    EXPECT_EQ(layer_with([](auto& g) { ++g.hashes; }), BoundsError::scheme_invalid);
    EXPECT_EQ(layer_with([](auto& g) { g.redisbloom_bpe = 0; }), BoundsError::scheme_invalid);
    EXPECT_EQ(layer_with([](auto& g) { g.redisbloom_n2 = 20; }), BoundsError::scheme_invalid);
    EXPECT_EQ(layer_with([](auto& g) { g.redisbloom_n2 = 10; }), BoundsError::none);
    EXPECT_EQ(layer_with([](auto& g) { g.scheme = bloom::HashScheme::bloomery; }),
              BoundsError::scheme_invalid);  // RedisBloom fields on a bloomery layer
}

TEST(RedisBloomScheme, NewFiltersKeepBloomerysSchemeByDefault) {
    const FilterRef filter = ScalableFilter::create(bloom::FilterOptions{});
    EXPECT_EQ(filter->scheme(), bloom::HashScheme::bloomery);
    EXPECT_EQ(filter->hash("x").h1, bloom::hash_item("x").h1);
}

TEST(RedisBloomScheme, ACreatedFilterGrowsByRedisBloomsRule) {
    bloom::FilterOptions options;
    options.scheme = bloom::HashScheme::redisbloom;
    options.redisbloom_options = bloom::kRedisBloomDefaultOptions;
    options.capacity = 100;
    options.error_rate = 0.01;
    options.expansion = 3;
    ASSERT_EQ(bloom::check_options(options), bloom::BoundsError::none);
    FilterRef filter = ScalableFilter::create(options);
    for (int i = 0; i < 1000; ++i) filter->add("item" + std::to_string(i), {});
    ASSERT_EQ(filter->num_layers(), 3u);  // 100 + 300 + 900
    double error = 0.005;
    std::uint64_t entries = 100;
    for (std::size_t i = 0; i < filter->num_layers(); ++i) {
        const std::optional<bloom::LayerGeometry> want =
            bloom::redisbloom_layer(entries, error, options.redisbloom_options);
        ASSERT_TRUE(want);
        const bloom::LayerGeometry got = filter->layer(i).geometry();
        EXPECT_EQ(got.bits, want->bits);
        EXPECT_EQ(got.hashes, want->hashes);
        EXPECT_EQ(got.capacity, want->capacity);
        EXPECT_EQ(got.redisbloom_bpe, want->redisbloom_bpe);
        entries *= 3;
        error /= 2;
    }
    for (int i = 0; i < 1000; ++i) EXPECT_TRUE(filter->contains("item" + std::to_string(i)));
}

// ---- RedisBloom's own dumps ----

TEST(RedisBloomFixtures, EveryFilterLoadsBitForBitAndAnswersAsRedisBloom) {
    const json& all = fixtures("filters.json");
    ASSERT_GE(all["filters"].size(), 10u);
    for (const json& f : all["filters"]) {
        SCOPED_TRACE(f["key"].get<std::string>());
        const Chunks chunks = chunks_of(f["chunks"]);
        const FilterRef filter = load_chunks(chunks);
        ASSERT_TRUE(filter);
        EXPECT_EQ(filter->scheme(), bloom::HashScheme::redisbloom);
        // The dump is RedisBloom's, byte for byte: same header, same bits,
        // same iterators.
        EXPECT_EQ(bloom::encode_header(*filter), chunks.front().second);
        expect_same_chunks(dump_all(*filter), chunks);
        const std::vector<std::string> held = items_of(f["items"]);
        EXPECT_EQ(answers(*filter, held), std::string(held.size(), '1'));
    }
}

TEST(RedisBloomFixtures, AbsentItemsGetRedisBloomsAnswersAndInfoIsEqual) {
    for (const json& f : fixtures("filters.json")["filters"]) {
        SCOPED_TRACE(f["key"].get<std::string>());
        const FilterRef filter = load_chunks(chunks_of(f["chunks"]));
        ASSERT_TRUE(filter);
        // The false positives are RedisBloom's own: the same items.
        EXPECT_EQ(answers(*filter, items_of(f["absent"])), f["absent_answers"].get<std::string>());
        expect_info(*filter, f["info"]);
        EXPECT_EQ(filter->items(), f["card"].get<std::uint64_t>());
    }
}

TEST(RedisBloomFixtures, FurtherAddsLandWhereRedisBloomPutThem) {
    for (const json& f : fixtures("filters.json")["filters"]) {
        SCOPED_TRACE(f["key"].get<std::string>());
        FilterRef filter = load_chunks(chunks_of(f["chunks"]));
        ASSERT_TRUE(filter);
        const json& after = f["after"];
        EXPECT_EQ(madd(*filter, items_of(f["more"])), after["replies"]);
        EXPECT_TRUE(bloom::encode_header(*filter) ==
                    base64_decode(after["header_b64"].get<std::string>()));
        EXPECT_EQ(answers(*filter, items_of(f["absent"])),
                  after["absent_answers"].get<std::string>());
        expect_info(*filter, after["info"]);
    }
}

TEST(RedisBloomFixtures, OlderEncodingsGrowAndHashAsRedisBloomDid) {
    // 32-bit hashing (no FORCE64), power-of-two sub-filters (no NOROUND),
    // NONSCALING, from RedisBloom's RDB encodings 0 to 3.
    for (const json& f : fixtures("legacy.json")["filters"]) {
        SCOPED_TRACE(f["key"].get<std::string>());
        FilterRef filter = load_chunks(chunks_of(f["loaded_chunks"]));
        ASSERT_TRUE(filter);
        expect_same_chunks(dump_all(*filter), chunks_of(f["loaded_chunks"]));
        EXPECT_EQ(madd(*filter, items_of(f["items"])), f["replies"]);
        expect_same_chunks(dump_all(*filter), chunks_of(f["chunks"]));
        EXPECT_EQ(answers(*filter, items_of(f["absent"])), f["absent_answers"].get<std::string>());
        expect_info(*filter, f["info"]);
    }
}

// ---- Dump formats ----

TEST(RedisBloomDump, HeadersOfEitherFormatAreToldApartAndMalformedOnesRefused) {
    const json& f = fixtures("filters.json")["filters"][3];  // rb:scaling, several layers
    const std::string header = chunks_of(f["chunks"]).front().second;
    const core::Result<bloom::DumpHeader> parsed = bloom::parse_header(header);
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(parsed->options.scheme, bloom::HashScheme::redisbloom);
    EXPECT_EQ(parsed->options.redisbloom_options, bloom::kRedisBloomDefaultOptions);
    // bloomery's own header is still bloomery's.
    const FilterRef own = ScalableFilter::create(bloom::FilterOptions{});
    const core::Result<bloom::DumpHeader> own_parsed =
        bloom::parse_header(bloom::encode_header(*own));
    ASSERT_TRUE(own_parsed) << own_parsed.error();
    EXPECT_EQ(own_parsed->options.scheme, bloom::HashScheme::bloomery);

    auto refused = [&](std::string bad, const std::string& why) {
        SCOPED_TRACE(why);
        const core::Result<FilterRef> decoded = bloom::decode_header(bad, 0);
        ASSERT_FALSE(decoded);
        EXPECT_EQ(decoded.error().rfind(why, 0), 0u) << decoded.error();
    };
    auto patched = [&](std::size_t at, std::string_view bytes) {
        std::string out = header;
        out.replace(at, bytes.size(), bytes);
        return out;
    };
    constexpr std::size_t kLink = 20;  // the first sub-filter's fields
    // Not RedisBloom-shaped: judged (and refused) as bloomery's, whose
    // checksum comes first.
    for (const std::string& bad : {header.substr(0, header.size() - 1), header + "x"}) {
        const core::Result<FilterRef> decoded = bloom::decode_header(bad, 0);
        ASSERT_FALSE(decoded);
        const std::string& message = decoded.error();
        EXPECT_TRUE(message == "invalid dump header" || message == "dump header checksum mismatch")
            << message;
    }
    // RedisBloom-shaped, failing RedisBloom's own checks.
    refused(patched(0, std::string("\x01", 1)), "received bad data");           // size
    refused(patched(kLink + 8, std::string("\x01", 1)), "received bad data");   // bits
    refused(patched(kLink + 40, std::string("\x07", 1)), "received bad data");  // hashes
    refused(patched(kLink + 52, std::string("\x3f", 1)), "received bad data");  // n2
    refused(patched(12, std::string("\x15", 1)), "received bad data");          // options 16
    refused(patched(kLink + 24, std::string(8, '\0')), "received bad data");    // error 0
    // Accepted by RedisBloom, beyond bloomery's bounds or its support.
    refused(patched(12, std::string("\x07", 1)), "unsupported RedisBloom filter options");
    refused(patched(16, std::string("\0\0\0\0", 4)), "RedisBloom filter is outside");  // growth 0
    refused(patched(12, std::string("\x0d", 1)),
            "RedisBloom filter is outside");  // NONSCALING, 4 layers
    refused(patched(kLink + 44, std::string(8, '\0')), "RedisBloom sub-filter 0");  // entries 0
    std::string many = header.substr(0, 20);
    many[8] = 65;
    for (int i = 0; i < 65; ++i) many += header.substr(kLink, 53);
    refused(many, "RedisBloom filter of 65 sub-filters");
    std::string odd_bits = header;  // 9 bytes (72 bits): no whole number of words
    for (int b = 0; b < 8; ++b) {
        odd_bits[kLink + b] = static_cast<char>(b == 0 ? 9 : 0);
        odd_bits[kLink + 8 + b] = static_cast<char>(b == 0 ? 72 : 0);
    }
    refused(odd_bits, "RedisBloom sub-filter 0");
}

TEST(RedisBloomDump, HeaderFormatIsToldByShapeAlone) {
    const json& f = fixtures("filters.json")["filters"][3];  // rb:scaling, several layers
    const std::string header = chunks_of(f["chunks"]).front().second;
    EXPECT_EQ(bloom::header_format(header), bloom::HeaderFormat::redisbloom);
    const FilterRef own = ScalableFilter::create(bloom::FilterOptions{});
    const std::string own_header = bloom::encode_header(*own);
    EXPECT_EQ(bloom::header_format(own_header), bloom::HeaderFormat::bloomery);
    // Damaged past its magic, bloomery's header is still bloomery's (its
    // checks then refuse it); with its magic damaged, or cut to less than
    // its magic, it is no header.
    std::string damaged = own_header;
    damaged[20] = static_cast<char>(damaged[20] ^ 1);
    EXPECT_EQ(bloom::header_format(damaged), bloom::HeaderFormat::bloomery);
    damaged = own_header;
    damaged[5] = static_cast<char>(damaged[5] ^ 1);
    EXPECT_EQ(bloom::header_format(damaged), bloom::HeaderFormat::unknown);
    EXPECT_EQ(bloom::header_format(own_header.substr(0, 7)), bloom::HeaderFormat::unknown);
    // RedisBloom's is told by its length alone: one byte off is no header.
    EXPECT_EQ(bloom::header_format(header.substr(0, header.size() - 1)),
              bloom::HeaderFormat::unknown);
    EXPECT_EQ(bloom::header_format(header + "x"), bloom::HeaderFormat::unknown);
    EXPECT_EQ(bloom::header_format(""), bloom::HeaderFormat::unknown);
    EXPECT_EQ(bloom::header_format("garbage"), bloom::HeaderFormat::unknown);
}

TEST(RedisBloomDump, ChunksLoadFromAnyByteOffsetAndBadOnesChangeNothing) {
    const Chunks chunks = chunks_of(fixtures("filters.json")["filters"][3]["chunks"]);
    const core::Result<FilterRef> decoded = bloom::decode_header(chunks.front().second, 0);
    ASSERT_TRUE(decoded) << decoded.error();
    const FilterRef& target = *decoded;
    // The same bits cut at odd offsets, in odd sizes, out of order.
    std::vector<std::pair<std::int64_t, std::string>> pieces;
    for (std::size_t c = 1; c < chunks.size(); ++c) {
        const std::int64_t start =
            chunks[c].first - static_cast<std::int64_t>(chunks[c].second.size());
        const std::string& data = chunks[c].second;
        for (std::size_t at = 0; at < data.size(); at += 13) {
            const std::string piece = data.substr(at, 13);
            pieces.emplace_back(start + static_cast<std::int64_t>(at + piece.size()), piece);
        }
    }
    std::reverse(pieces.begin(), pieces.end());
    for (const auto& [iter, piece] : pieces) {
        const core::Status loaded = bloom::load_chunk(*target, iter, piece);
        ASSERT_TRUE(loaded) << loaded.error();
    }
    expect_same_chunks(dump_all(*target), chunks);
    // Refusals, with RedisBloom's words, and no bit changed.
    const core::Result<FilterRef> decoded_empty = bloom::decode_header(chunks.front().second, 0);
    ASSERT_TRUE(decoded_empty) << decoded_empty.error();
    const FilterRef& empty = *decoded_empty;
    const std::string& first = chunks[1].second;
    const std::int64_t end = chunks[1].first;
    auto refused = [&](std::int64_t iter, const std::string& data, const std::string& why) {
        const core::Status loaded = bloom::load_chunk(*empty, iter, data);
        EXPECT_FALSE(loaded);
        EXPECT_EQ(loaded.error(), why);
    };
    refused(static_cast<std::int64_t>(first.size()) - 1, first, "received bad data");
    refused(static_cast<std::int64_t>(first.size()), first, "invalid offset - no link found");
    refused(std::int64_t{1} << 40, first, "invalid offset - no link found");
    refused(end + 1, first, "invalid chunk - Too big for current filter");
    for (const auto& chunk : dump_all(*empty)) {
        if (chunk.first == 1) continue;
        EXPECT_EQ(chunk.second.find_first_not_of('\0'), std::string::npos);
    }
    // SCANDUMP cuts at 16 MiB as RedisBloom does; smaller limits cut anywhere.
    const bloom::DumpChunk odd = bloom::dump_chunk(*target, 5, 7);
    EXPECT_EQ(odd.next_iter, 12);
    EXPECT_EQ(odd.data, chunks[1].second.substr(4, 7));
    EXPECT_EQ(bloom::dump_chunk(*target, -3).next_iter, 0);
    EXPECT_EQ(bloom::dump_chunk(*target, std::int64_t{1} << 40).next_iter, 0);
}

// ---- Snapshots and the journal ----

class TempDir {
public:
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string pattern = std::string(base ? base : "/tmp") + "/redisbloom_test.XXXXXX";
        if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    std::string str() const { return path_; }

private:
    std::string path_;
};

void expect_same_filters(const store::Keyspace& a, const store::Keyspace& b) {
    const store::KeyspaceView view = a.view();
    ASSERT_EQ(view.size(), b.size());
    for (std::size_t i = 0; i < view.size(); ++i) {
        const std::string key(view.key(i));
        SCOPED_TRACE(key);
        const auto other = b.get(key);
        ASSERT_TRUE(other.has_value());
        EXPECT_EQ(other->expire_at_ms, view.entry(i).expire_at_ms);
        EXPECT_EQ(other->value.filter().scheme(), view.entry(i).value.filter().scheme());
        expect_same_chunks(dump_all(other->value.filter()), dump_all(view.entry(i).value.filter()));
    }
}

TEST(RedisBloomPersistence, ASnapshotKeepsEveryFilterBitForBit) {
    TempDir dir;
    store::Keyspace live(8);
    for (const json& f : fixtures("filters.json")["filters"]) {
        live.put(f["key"].get<std::string>(), load_chunks(chunks_of(f["chunks"])),
                 store::now_ms() + 3600000);
    }
    for (const json& f : fixtures("legacy.json")["filters"]) {
        live.put(f["key"].get<std::string>(), load_chunks(chunks_of(f["chunks"])));
    }
    live.put("own", ScalableFilter::create(bloom::FilterOptions{}));
    const std::string path = dir.str() + "/dump.bloomery";
    const core::Result<persist::SaveStats> saved = persist::save_snapshot(live, path);
    ASSERT_TRUE(saved.ok()) << saved.error();
    store::Keyspace loaded(8);
    const core::Result<persist::LoadStats> stats = persist::load_snapshot(path, loaded);
    ASSERT_TRUE(stats.ok()) << stats.error();
    expect_same_filters(live, loaded);
    const persist::SnapshotCheck checked = persist::check_snapshot(path);
    ASSERT_TRUE(checked.verdict.ok()) << checked.verdict.error();
    const std::string& report = checked.report;
    EXPECT_NE(report.find("scheme redisbloom (options 5)"), std::string::npos);
    EXPECT_NE(report.find("scheme redisbloom (options 0)"), std::string::npos);  // 1.x, 32-bit
    EXPECT_NE(report.find(", n2 14"), std::string::npos);  // its power-of-two sub-filter
    EXPECT_NE(report.find("scheme bloomery"), std::string::npos);
}

TEST(RedisBloomPersistence, JournalReplayRedoesLoadsAndAddsExactly) {
    TempDir dir;
    store::Keyspace live(8);
    {
        persist::Journal journal(dir.str(), "journal", persist::FsyncPolicy::everysec, 64ull << 20);
        const core::Status opened = journal.open(7, 0, "");
        ASSERT_TRUE(opened.ok()) << opened.error();
        live.set_mutation_log(&journal);
        for (const json& f : fixtures("filters.json")["filters"]) {
            const std::string key = f["key"];
            const Chunks chunks = chunks_of(f["chunks"]);
            const core::Result<FilterRef> decoded = bloom::decode_header(chunks[0].second, 0);
            ASSERT_TRUE(decoded) << decoded.error();
            ASSERT_TRUE(live.insert_new(key, *decoded));
            std::string error;
            for (std::size_t i = 1; i < chunks.size(); ++i) {
                const auto loaded = live.load_chunk(key, chunks[i].first, chunks[i].second);
                ASSERT_TRUE(loaded) << loaded.error();
                ASSERT_EQ(*loaded, store::Keyspace::ChunkStatus::loaded);
            }
            // Adds through the write path: ADD records of RedisBloom's two
            // hashes, and the growth they cause.
            const std::vector<std::string> more = items_of(f["more"]);
            const std::vector<std::string_view> views(more.begin(), more.end());
            std::vector<AddResult> results;
            ASSERT_TRUE(live.add_items(key, views, {}, nullptr, results));
            EXPECT_TRUE(bloom::encode_header(live.get(key)->value.filter()) ==
                        base64_decode(f["after"]["header_b64"].get<std::string>()));
        }
        journal.close();
        live.set_mutation_log(nullptr);
    }
    store::Keyspace replayed(8);
    const core::Result<persist::ReplayStats> replay =
        persist::replay_journal(dir.str(), "journal", std::nullopt, replayed);
    ASSERT_TRUE(replay.ok()) << replay.error();
    expect_same_filters(live, replayed);
    for (const json& f : fixtures("filters.json")["filters"]) {
        const FilterRef filter = replayed.get(f["key"].get<std::string>())->value.filter_ref();
        EXPECT_EQ(answers(*filter, items_of(f["absent"])),
                  f["after"]["absent_answers"].get<std::string>());
    }
}

}  // namespace
}  // namespace bloomery
