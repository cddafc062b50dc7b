// A layer's touched regions (bloom/filter.hpp): every path that writes words
// keeps them covering every non-zero word, and snapshots and DUMP payloads of
// a mostly empty filter cost in proportion to what it holds (runs of
// non-zero words), while payloads of the earlier, whole-word version still
// restore.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/filter.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/core/crc64.hpp"
#include "bloomery/persist/dump_payload.hpp"
#include "dump_test_support.hpp"
#include "snapshot_test_support.hpp"

namespace bloomery {
namespace {

using bloom::BloomLayer;
using bloom::FilterOptions;
using bloom::FilterRef;
using bloom::ScalableFilter;
using persist::snapshot_testing::words_of;

FilterOptions options_of(double error_rate, std::uint64_t capacity, bloom::Layout layout) {
    FilterOptions options;
    options.error_rate = error_rate;
    options.capacity = capacity;
    options.layout = layout;
    return options;
}

FilterOptions redisbloom_options(std::uint64_t capacity) {
    FilterOptions options = options_of(0.01, capacity, bloom::Layout::classic);
    options.scheme = bloom::HashScheme::redisbloom;
    options.redisbloom_options = bloom::kRedisBloomDefaultOptions;
    return options;
}

FilterRef filled(const FilterOptions& options, int items, const std::string& prefix = "item-") {
    FilterRef filter = ScalableFilter::create(options);
    for (int i = 0; i < items; ++i) filter->add(prefix + std::to_string(i), bloom::GrowthLimits{});
    return filter;
}

// Words in touched regions, walked as the snapshot writer walks them.
std::uint64_t touched_words(const BloomLayer& layer) {
    std::uint64_t total = 0;
    for (std::uint64_t from = layer.next_touched(0); from < layer.num_words();
         from = layer.next_touched(from)) {
        const std::uint64_t end = layer.touched_end(from);
        EXPECT_GT(end, from);
        total += end - from;
        from = end;
    }
    return total;
}

void expect_covered(const ScalableFilter& filter) {
    for (std::size_t i = 0; i < filter.num_layers(); ++i) {
        EXPECT_TRUE(filter.layer(i).summary_covers_nonzero()) << "layer " << i;
    }
}

TEST(TouchedRegions, AddsOfEveryLayoutAndSchemeKeepThemCoveringAndSparse) {
    const std::vector<FilterOptions> all = {
        options_of(0.001, 1000000, bloom::Layout::classic),
        options_of(0.001, 1000000, bloom::Layout::blocked),
        options_of(0.01, 1000000, bloom::Layout::counting),
        redisbloom_options(1000000),
        options_of(0.01, 20000, bloom::Layout::blocked),  // from the allocator, not mmap
        options_of(0.01, 1000, bloom::Layout::classic),   // inline words: no summary
    };
    for (const FilterOptions& options : all) {
        const FilterRef filter = filled(options, 30);
        expect_covered(*filter);
        const BloomLayer& layer = filter->layer(0);
        if (layer.mapped()) {
            // 30 items touch a few hundred regions at most, not all of them.
            EXPECT_LT(touched_words(layer), layer.num_words() / 2);
        } else {
            EXPECT_EQ(touched_words(layer), layer.num_words());
        }
    }
}

TEST(TouchedRegions, CountingDeletesLeaveThemASuperset) {
    const FilterRef filter = filled(options_of(0.01, 1000000, bloom::Layout::counting), 200);
    for (int i = 0; i < 200; ++i) {
        EXPECT_EQ(filter->remove(filter->hash("item-" + std::to_string(i))),
                  bloom::RemoveResult::removed);
    }
    const BloomLayer& layer = filter->layer(0);
    EXPECT_EQ(layer.set_bits(), 0u);
    EXPECT_GT(touched_words(layer), 0u);
    EXPECT_TRUE(layer.summary_covers_nonzero());
}

TEST(TouchedRegions, StoresOrsCopiesAndChunksKeepThemCovering) {
    const FilterOptions options = options_of(0.001, 1000000, bloom::Layout::classic);
    FilterRef target = ScalableFilter::create(options);
    BloomLayer& layer = target->layer(0);
    const std::uint64_t last = layer.num_words() - 1;
    const std::uint64_t one = 0x8001;
    layer.store_words(77, 1, &one);
    layer.or_words(last, 1, &one);
    layer.or_words(4096 * 3 + 5, 1, &one);
    EXPECT_TRUE(layer.summary_covers_nonzero());
    EXPECT_EQ(layer.next_touched(0), BloomLayer::kRegionWords);  // the region of word 77
    EXPECT_EQ(layer.next_touched(78), 78u);                      // same region
    EXPECT_EQ(layer.touched_end(77), BloomLayer::kRegionWords * 2);
    EXPECT_EQ(layer.next_touched(BloomLayer::kRegionWords * 2), 4096u * 3);
    EXPECT_EQ(layer.next_touched(4096 * 3 + BloomLayer::kRegionWords),
              last / BloomLayer::kRegionWords * BloomLayer::kRegionWords);
    EXPECT_EQ(layer.touched_end(last), layer.num_words());

    // A copy and a chunk reload of a mostly empty 18 MB filter: SCANDUMP
    // sends only its touched regions, and they load back bit for bit.
    const FilterRef source = filled(options_of(0.001, 10000000, bloom::Layout::classic), 100);
    expect_covered(*ScalableFilter::copy_of(*source, source->num_layers()));
    EXPECT_EQ(words_of(ScalableFilter::copy_of(*source, 1)->layer(0)), words_of(source->layer(0)));
    core::Result<FilterRef> loaded = bloom::decode_header(bloom::dump_chunk(*source, 0).data, 0);
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    std::uint64_t chunks = 0, bytes = 0;
    for (std::int64_t iter = 1;;) {
        const bloom::DumpChunk chunk = bloom::dump_chunk(*source, iter);
        if (chunk.next_iter == 0) break;
        ASSERT_GT(chunk.next_iter, iter);
        ASSERT_TRUE(bloom::load_chunk(**loaded, chunk.next_iter, chunk.data).ok());
        ++chunks;
        bytes += chunk.data.size();
        iter = chunk.next_iter;
    }
    EXPECT_GT(chunks, 100u);
    EXPECT_LT(bytes * 4, source->layer(0).byte_size());
    EXPECT_EQ(words_of((*loaded)->layer(0)), words_of(source->layer(0)));
    expect_covered(**loaded);
}

std::string payload_of(const ScalableFilter& filter) {
    std::string out;
    EXPECT_TRUE(persist::append_dump_payload(filter, filter.num_layers(), out));
    return out;
}

// The payload an earlier build (kDumpPayloadWholeVersion) made of a
// one-layer filter: the same fields, every word of the layer.
std::string whole_payload_of(const ScalableFilter& filter) {
    const std::string runs = payload_of(filter);
    const core::Result<persist::DumpValue> value = persist::parse_dump_value(runs);
    EXPECT_TRUE(value.ok());
    const std::size_t words_at =
        static_cast<std::size_t>(value->layer_words[0].data() - runs.data());
    std::string out = runs.substr(0, words_at);
    for (std::uint64_t word : words_of(filter.layer(0))) {
        for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(word >> (8 * i)));
    }
    out.push_back(static_cast<char>(persist::kDumpPayloadWholeVersion & 0xff));
    out.push_back(static_cast<char>(persist::kDumpPayloadWholeVersion >> 8));
    const std::uint64_t crc = core::crc64(0, out);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(crc >> (8 * i)));
    return out;
}

FilterRef restored(const std::string& payload) {
    EXPECT_TRUE(persist::verify_dump_payload(payload));
    const core::Result<persist::DumpValue> value = persist::parse_dump_value(payload);
    EXPECT_TRUE(value.ok()) << value.error();
    return value.ok() ? persist::build_dump_filter(*value) : FilterRef{};
}

TEST(SparseDump, MostlyEmptyFilterDumpsWhatItHoldsAndRestoresBitForBit) {
    FilterOptions options = options_of(0.0001, 10000000, bloom::Layout::classic);
    options.nonscaling = true;
    const FilterRef source = filled(options, 1000);
    const std::uint64_t layer_bytes = source->layer(0).byte_size();  // about 24 MB
    const std::string payload = payload_of(*source);
    // 1,000 items set about 14,000 words: 24 bytes each as runs at most.
    EXPECT_LT(payload.size(), 400000u);
    EXPECT_LT(payload.size() * 50, layer_bytes);
    const FilterRef back = restored(payload);
    ASSERT_TRUE(back);
    EXPECT_EQ(words_of(back->layer(0)), words_of(source->layer(0)));
    EXPECT_EQ(back->items(), source->items());
    expect_covered(*back);
    EXPECT_EQ(payload_of(*back), payload);

    // The same filter as an earlier build dumped it restores alike.
    const std::string whole = whole_payload_of(*source);
    EXPECT_GT(whole.size(), layer_bytes);
    const FilterRef from_whole = restored(whole);
    ASSERT_TRUE(from_whole);
    EXPECT_EQ(words_of(from_whole->layer(0)), words_of(source->layer(0)));
    EXPECT_EQ(from_whole->items(), source->items());
    expect_covered(*from_whole);
    EXPECT_EQ(payload_of(*from_whole), payload);
}

TEST(SparseDump, FullFilterAndEveryGapShapeRoundTrip) {
    FilterOptions options = options_of(0.01, 5000, bloom::Layout::classic);
    options.nonscaling = true;
    FilterRef source = ScalableFilter::create(options);
    BloomLayer& layer = source->layer(0);
    // Runs split by gaps of 1 to 5 zero words, and a run at the very end.
    std::vector<std::uint64_t> words(layer.num_words(), 0);
    std::uint64_t at = 3;
    for (std::uint64_t gap = 1; at + 10 < words.size(); gap = gap % 5 + 1) {
        words[at] = at * 0x9e3779b97f4a7c15ull | 1;
        words[at + 1] = 1;
        at += 2 + gap;
    }
    words.back() = 2;
    layer.store_words(0, words.size(), words.data());
    const FilterRef back = restored(payload_of(*source));
    ASSERT_TRUE(back);
    EXPECT_EQ(words_of(back->layer(0)), words);

    std::vector<std::uint64_t> full(layer.num_words(), ~std::uint64_t{0});
    layer.store_words(0, full.size(), full.data());
    const std::string payload = payload_of(*source);
    // One run: a 16-byte pair more than every word.
    EXPECT_EQ(payload.size(), whole_payload_of(*source).size() + 16);
    const FilterRef full_back = restored(payload);
    ASSERT_TRUE(full_back);
    EXPECT_EQ(words_of(full_back->layer(0)), full);
}

TEST(SparseDump, RefusesRunsThatDoNotAccountForTheLayerExactly) {
    FilterOptions options = options_of(0.01, 1000, bloom::Layout::classic);
    options.nonscaling = true;
    const FilterRef source = filled(options, 10);
    const std::string payload = payload_of(*source);
    const core::Result<persist::DumpValue> value = persist::parse_dump_value(payload);
    ASSERT_TRUE(value.ok());
    const std::size_t runs_at =
        static_cast<std::size_t>(value->layer_words[0].data() - payload.data());
    std::string value_bytes = payload.substr(0, payload.size() - persist::kDumpFooterBytes);
    const auto with_first_pair = [&](std::uint64_t zeros, std::uint64_t count) {
        std::string bytes = value_bytes;
        for (int i = 0; i < 8; ++i) {
            bytes[runs_at + i] = static_cast<char>(zeros >> (8 * i));
            bytes[runs_at + 8 + i] = static_cast<char>(count >> (8 * i));
        }
        return testing::refooted(bytes);
    };
    const std::uint64_t num_words = source->layer(0).num_words();
    EXPECT_FALSE(persist::parse_dump_value(with_first_pair(0, 0)).ok());
    EXPECT_FALSE(persist::parse_dump_value(with_first_pair(num_words + 1, 0)).ok());
    EXPECT_FALSE(persist::parse_dump_value(with_first_pair(1, num_words)).ok());
    EXPECT_FALSE(persist::parse_dump_value(with_first_pair(0, ~std::uint64_t{0})).ok());
    // Bytes left after the last run, or runs cut short.
    EXPECT_FALSE(persist::parse_dump_value(testing::refooted(value_bytes + "x")).ok());
    EXPECT_FALSE(
        persist::parse_dump_value(testing::refooted(value_bytes.substr(0, value_bytes.size() - 1)))
            .ok());
}

TEST(SparseSnapshot, MostlyEmptyFilterSnapshotsWhatItHoldsAndLoadsBitForBit) {
    persist::snapshot_testing::TempDir dir;
    store::Keyspace keyspace(8);
    const FilterRef urls = filled(options_of(0.0001, 10000000, bloom::Layout::classic), 1000, "u");
    const FilterRef counts = filled(options_of(0.01, 1000000, bloom::Layout::counting), 1000, "c");
    keyspace.put("urls", urls);
    keyspace.put("counts", counts);
    const std::string path = dir.file("sparse.bloomery");
    const core::Result<persist::SaveStats> saved = persist::save_snapshot(keyspace, path);
    ASSERT_TRUE(saved.ok()) << saved.error();
    // About 24 MB and 600 KB of layers; 1,000 items each.
    EXPECT_LT(saved->bytes, 700000u);
    store::Keyspace loaded(8);
    const core::Result<persist::LoadStats> read = persist::load_snapshot(path, loaded);
    ASSERT_TRUE(read.ok()) << read.error();
    persist::snapshot_testing::expect_same_filter(*urls, loaded.get("urls")->value.filter(), "u",
                                                  1000);
    persist::snapshot_testing::expect_same_filter(*counts, loaded.get("counts")->value.filter(),
                                                  "c", 1000);
    expect_covered(loaded.get("urls")->value.filter());
    expect_covered(loaded.get("counts")->value.filter());
}

}  // namespace
}  // namespace bloomery
