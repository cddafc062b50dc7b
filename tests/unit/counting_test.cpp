// The counting Bloom filter (bloom/counting.hpp): sizing, a counting
// layer's adds, deletes, saturation and merging, a counting scalable
// filter's counts, and the hazard of deleting what was never added
// (measured here, quoted in docs/filters.md).

#include "bloomery/bloom/counting.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/filter.hpp"
#include "bloomery/bloom/hash.hpp"
#include "bloomery/bloom/params.hpp"
#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::bloom {
namespace {

ItemHash item(std::uint64_t i) {
    return hash_item("item:" + std::to_string(i));
}

LayerPtr layer_of(std::uint64_t cells, std::uint32_t hashes) {
    return make_layer(LayerGeometry{100, 0.01, cells * kCellBits, hashes, Layout::counting});
}

LayerPtr layer_for(std::uint64_t capacity, double error_rate) {
    const CountingSizing sizing = counting_sizing(error_rate);
    return layer_of(counting_cells(capacity, sizing.cells_per_item), sizing.hashes);
}

std::uint32_t cell(const BloomLayer& layer, std::uint64_t index) {
    return cells::get(layer.load_word(index / kCellsPerWord), index);
}

// BF.MERGE's step: `from`'s cells added to `to`'s.
void add_cells(BloomLayer& to, const BloomLayer& from) {
    std::vector<std::uint64_t> words(from.num_words());
    from.copy_words(0, words.size(), words.data());
    to.or_words(0, words.size(), words.data());
}

std::uint64_t false_positives(const BloomLayer& layer, std::uint64_t probes) {
    std::uint64_t found = 0;
    for (std::uint64_t i = 0; i < probes; ++i) found += layer.contains(item(1'000'000'000 + i));
    return found;
}

TEST(Counting, SizingMeetsTheRateWithOneLinePerItem) {
    for (const double p : {0.1, 0.01, 0.001}) {
        const CountingSizing sizing = counting_sizing(p);
        EXPECT_LE(blocked_false_positive_rate(sizing.cells_per_item, sizing.hashes, kBlockCells),
                  p);
        // 128-cell blocks crowd more than 512-bit ones: more cells per item.
        EXPECT_GT(sizing.cells_per_item, blocked_sizing(p).bits_per_item) << p;
        std::printf("[ measured ] counting at %g: %.2f cells (%.1f bits) per item, k = %u\n", p,
                    sizing.cells_per_item, sizing.cells_per_item * kCellBits, sizing.hashes);
    }
    EXPECT_EQ(counting_cells(1, 10.0), kBlockCells);
    EXPECT_EQ(counting_cells(1000, 10.0) % kBlockCells, 0u);
}

TEST(Counting, AddsAnswerOneDeletesTakeThemOut) {
    LayerPtr layer = layer_for(10000, 0.01);
    for (std::uint64_t i = 0; i < 10000; ++i) layer->add(item(i));
    for (std::uint64_t i = 0; i < 10000; ++i) ASSERT_TRUE(layer->contains(item(i))) << i;
    const std::uint64_t before = false_positives(*layer, 100000);
    EXPECT_LE(before, 1100u);  // 1 % of the probes, and some slack
    for (std::uint64_t i = 0; i < 5000; ++i) ASSERT_TRUE(layer->remove(item(i))) << i;
    // What stays answers 1; what left answers 1 only as often as a false positive.
    for (std::uint64_t i = 5000; i < 10000; ++i) ASSERT_TRUE(layer->contains(item(i))) << i;
    std::uint64_t still = 0;
    for (std::uint64_t i = 0; i < 5000; ++i) still += layer->contains(item(i));
    EXPECT_LE(still, 60u);
    // Deleting everything leaves every cell 0 (nothing saturated at this load).
    for (std::uint64_t i = 5000; i < 10000; ++i) ASSERT_TRUE(layer->remove(item(i)));
    EXPECT_EQ(layer->set_bits(), 0u);
    EXPECT_FALSE(layer->remove(item(1)));
}

TEST(Counting, ASaturatedCellStaysAndNothingGoesBelowZero) {
    LayerPtr layer = layer_of(kBlockCells, 3);
    for (int i = 0; i < 20; ++i) layer->add(item(7));
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(layer->remove(item(7)));
    EXPECT_TRUE(layer->contains(item(7)));  // its cells reached 15 and stay
    std::uint64_t at_max = 0;
    for (std::uint64_t c = 0; c < kBlockCells; ++c) at_max += cell(*layer, c) == kCellMax;
    EXPECT_GE(at_max, 1u);
    LayerPtr fresh = layer_of(kBlockCells, 3);
    EXPECT_TRUE(fresh->add(item(1)));
    EXPECT_FALSE(fresh->add(item(1)));  // no cell went from 0
    EXPECT_TRUE(fresh->remove(item(1)));
    EXPECT_TRUE(fresh->remove(item(1)));
    EXPECT_FALSE(fresh->remove(item(1)));  // all 0 again: certainly absent, nothing changed
    EXPECT_EQ(fresh->set_bits(), 0u);
}

TEST(Counting, NonZeroCellsAreCountedLikeSetBitsInLargeLayersToo) {
    // A mapped layer (per-thread counters): cells going from and to 0.
    LayerPtr layer = layer_for(100000, 0.01);
    ASSERT_TRUE(layer->mapped());
    for (std::uint64_t i = 0; i < 3000; ++i) layer->add(item(i));
    std::uint64_t nonzero = 0;
    for (std::uint64_t w = 0; w < layer->num_words(); ++w) {
        nonzero += static_cast<std::uint64_t>(cells::count_nonzero(layer->load_word(w)));
    }
    EXPECT_EQ(layer->set_bits(), nonzero);
    for (std::uint64_t i = 0; i < 3000; ++i) layer->remove(item(i));
    EXPECT_EQ(layer->set_bits(), 0u);
}

TEST(Counting, MergeAddsCellsSaturating) {
    LayerPtr a = layer_for(1000, 0.01);
    LayerPtr b = layer_for(1000, 0.01);
    for (std::uint64_t i = 0; i < 500; ++i) a->add(item(i));
    for (std::uint64_t i = 300; i < 800; ++i) b->add(item(i));
    add_cells(*a, *b);
    for (std::uint64_t i = 0; i < 800; ++i) ASSERT_TRUE(a->contains(item(i))) << i;
    // Items of both were counted twice: one delete leaves them present.
    for (std::uint64_t i = 300; i < 500; ++i) ASSERT_TRUE(a->remove(item(i)));
    for (std::uint64_t i = 300; i < 500; ++i) ASSERT_TRUE(a->contains(item(i))) << i;
    LayerPtr full = layer_of(kBlockCells, 2);
    for (int i = 0; i < 10; ++i) full->add(item(1));
    LayerPtr again = layer_of(kBlockCells, 2);
    for (int i = 0; i < 10; ++i) again->add(item(1));
    add_cells(*full, *again);
    std::uint64_t at_max = 0;
    for (std::uint64_t c = 0; c < kBlockCells; ++c) {
        ASSERT_LE(cell(*full, c), kCellMax);
        at_max += cell(*full, c) == kCellMax;
    }
    EXPECT_GE(at_max, 1u);  // 10 + 10 stopped at 15
}

// Deleting items that were never added (each a false positive, so the
// delete goes through) takes cells from items that were: they answer 0.
TEST(Counting, DeletingWhatWasNeverAddedCausesFalseNegatives) {
    LayerPtr layer = layer_for(10000, 0.01);
    for (std::uint64_t i = 0; i < 10000; ++i) layer->add(item(i));
    std::uint64_t deleted = 0;
    for (std::uint64_t i = 0; i < 100000; ++i) deleted += layer->remove(item(2'000'000'000 + i));
    std::uint64_t lost = 0;
    for (std::uint64_t i = 0; i < 10000; ++i) lost += !layer->contains(item(i));
    std::printf(
        "[ measured ] 100,000 deletes of absent items: %llu went through (false "
        "positives), and %llu of the 10,000 added items now answer 0\n",
        static_cast<unsigned long long>(deleted), static_cast<unsigned long long>(lost));
    EXPECT_GT(deleted, 0u);
    EXPECT_GT(lost, 0u);
}

FilterOptions counting_options(std::uint64_t capacity, bool nonscaling = false) {
    FilterOptions options;
    options.capacity = capacity;
    options.error_rate = 0.01;
    options.layout = Layout::counting;
    options.nonscaling = nonscaling;
    return options;
}

TEST(CountingFilter, EveryAddCountsAndDeletesTakeFromTheNewestLayerHoldingTheItem) {
    FilterRef filter = ScalableFilter::create(counting_options(100));
    ASSERT_TRUE(filter->counting());
    EXPECT_EQ(filter->layer(0).layout(), Layout::counting);
    EXPECT_EQ(filter->add("a", {}), AddResult::added);
    EXPECT_EQ(filter->add("a", {}), AddResult::exists);  // present, counted again
    EXPECT_EQ(filter->items(), 2u);
    for (int i = 0; i < 300; ++i) filter->add("x" + std::to_string(i), {});
    ASSERT_GT(filter->num_layers(), 1u);
    // "a" sits in layer 0 only; a new add of it goes to the newest layer.
    EXPECT_EQ(filter->add("a", {}), AddResult::exists);
    const std::size_t newest = filter->num_layers() - 1;
    const std::uint64_t newest_items = filter->layer(newest).items();
    EXPECT_EQ(filter->remove(filter->hash("a")), RemoveResult::removed);
    EXPECT_EQ(filter->layer(newest).items(), newest_items - 1);
    EXPECT_EQ(filter->remove(filter->hash("a")), RemoveResult::removed);
    EXPECT_EQ(filter->remove(filter->hash("a")), RemoveResult::removed);
    EXPECT_FALSE(filter->contains("a"));
    EXPECT_EQ(filter->remove(filter->hash("a")), RemoveResult::absent);
    EXPECT_EQ(filter->items(), 300u);
    // A plain filter deletes nothing.
    FilterOptions plain = counting_options(100);
    plain.layout = Layout::blocked;
    FilterRef bits = ScalableFilter::create(plain);
    bits->add("a", {});
    EXPECT_EQ(bits->remove(bits->hash("a")), RemoveResult::absent);
    EXPECT_TRUE(bits->contains("a"));
}

TEST(CountingFilter, AFullFilterKeepsItsFalsePositiveRateWithinTheRequest) {
    for (const double p : {0.01, 0.001}) {
        FilterOptions options = counting_options(100000, true);
        options.error_rate = p;
        FilterRef filter = ScalableFilter::create(options);
        for (int i = 0; i < 100000; ++i) filter->add("item:" + std::to_string(i), {});
        std::uint64_t hits = 0;
        constexpr int kProbes = 2'000'000;
        for (int i = 0; i < kProbes; ++i) hits += filter->contains("absent:" + std::to_string(i));
        const double measured = static_cast<double>(hits) / kProbes;
        const double bits = static_cast<double>(filter->bits_size()) * 8 / 100000;
        std::printf(
            "[ measured ] counting filter at %g: rate %.5f (%.2f of the request), "
            "%.1f bits per item\n",
            p, measured, measured / p, bits);
        EXPECT_LE(measured, p);
    }
}

TEST(CountingFilter, DeletesFreeRoomInANonscalingFilter) {
    FilterRef filter = ScalableFilter::create(counting_options(10, true));
    for (int i = 0; i < 10; ++i) EXPECT_NE(filter->add(std::to_string(i), {}), AddResult::full);
    EXPECT_EQ(filter->add("one more", {}), AddResult::full);
    EXPECT_EQ(filter->remove(filter->hash("3")), RemoveResult::removed);
    EXPECT_NE(filter->add("one more", {}), AddResult::full);
}

TEST(CountingFilter, ItsDumpKeepsTheLayoutAndTheCounters) {
    FilterRef filter = ScalableFilter::create(counting_options(100));
    for (int i = 0; i < 500; ++i) filter->add(std::to_string(i % 250), {});
    const std::string header = encode_header(*filter);
    const core::Result<DumpHeader> parsed = parse_header(header);
    ASSERT_TRUE(parsed.ok()) << parsed.error();
    EXPECT_EQ(parsed->options.layout, Layout::counting);
    for (const LayerGeometry& layer : parsed->layers) EXPECT_EQ(layer.layout, Layout::counting);
    // A counting filter's header naming a layer that is not counting, or
    // the other way round, is refused.
    EXPECT_TRUE(layer_layout_fits(Layout::counting, 3));
    EXPECT_FALSE(layer_layout_fits(Layout::counting, 1));
    EXPECT_FALSE(layer_layout_fits(Layout::blocked, 3));
    EXPECT_TRUE(layer_layout_fits(Layout::automatic, 1));
    EXPECT_EQ(check_options(counting_options(100)), BoundsError::none);
    FilterOptions tiny = counting_options(100);
    tiny.error_rate = 1e-8;
    EXPECT_EQ(check_options(tiny), BoundsError::counting_error_rate);
}

}  // namespace
}  // namespace bloomery::bloom
