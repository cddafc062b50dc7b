// The counting Bloom filter's layer (bloom/counting.hpp): sizing, adds,
// deletes, saturation, merging, and the hazard of deleting what was never
// added (measured here, quoted in docs/filters.md).

#include "bloomery/bloom/counting.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "bloomery/bloom/hash.hpp"
#include "bloomery/bloom/params.hpp"

namespace bloomery::bloom {
namespace {

ItemHash item(std::uint64_t i) {
    return hash_item("item:" + std::to_string(i));
}

CountingLayer layer_for(std::uint64_t capacity, double error_rate) {
    const CountingSizing sizing = counting_sizing(error_rate);
    return CountingLayer(counting_cells(capacity, sizing.cells_per_item), sizing.hashes);
}

std::uint64_t false_positives(const CountingLayer& layer, std::uint64_t probes) {
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
    CountingLayer layer = layer_for(10000, 0.01);
    for (std::uint64_t i = 0; i < 10000; ++i) layer.add(item(i));
    for (std::uint64_t i = 0; i < 10000; ++i) ASSERT_TRUE(layer.contains(item(i))) << i;
    const std::uint64_t before = false_positives(layer, 100000);
    EXPECT_LE(before, 1100u);  // 1 % of the probes, and some slack
    for (std::uint64_t i = 0; i < 5000; ++i) ASSERT_TRUE(layer.remove(item(i))) << i;
    // What stays answers 1; what left answers 1 only as often as a false positive.
    for (std::uint64_t i = 5000; i < 10000; ++i) ASSERT_TRUE(layer.contains(item(i))) << i;
    std::uint64_t still = 0;
    for (std::uint64_t i = 0; i < 5000; ++i) still += layer.contains(item(i));
    EXPECT_LE(still, 60u);
    // Deleting everything leaves every cell 0 (nothing saturated at this load).
    for (std::uint64_t i = 5000; i < 10000; ++i) ASSERT_TRUE(layer.remove(item(i)));
    EXPECT_EQ(layer.nonzero_cells(), 0u);
    EXPECT_FALSE(layer.remove(item(1)));
}

TEST(Counting, ASaturatedCellStaysAndNothingGoesBelowZero) {
    CountingLayer layer(kBlockCells, 3);
    for (int i = 0; i < 20; ++i) layer.add(item(7));
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(layer.remove(item(7)));
    EXPECT_TRUE(layer.contains(item(7)));  // its cells reached 15 and stay
    std::uint64_t at_max = 0;
    for (std::uint64_t c = 0; c < layer.cells(); ++c) at_max += layer.cell(c) == kCellMax;
    EXPECT_GE(at_max, 1u);
    CountingLayer fresh(kBlockCells, 3);
    fresh.add(item(1));
    EXPECT_TRUE(fresh.remove(item(1)));
    EXPECT_FALSE(fresh.remove(item(1)));  // all 0 again: certainly absent, nothing changed
    EXPECT_EQ(fresh.nonzero_cells(), 0u);
}

TEST(Counting, MergeAddsCellsSaturating) {
    CountingLayer a = layer_for(1000, 0.01);
    CountingLayer b = layer_for(1000, 0.01);
    for (std::uint64_t i = 0; i < 500; ++i) a.add(item(i));
    for (std::uint64_t i = 300; i < 800; ++i) b.add(item(i));
    a.add_cells(b);
    for (std::uint64_t i = 0; i < 800; ++i) ASSERT_TRUE(a.contains(item(i))) << i;
    // Items of both were counted twice: one delete leaves them present.
    for (std::uint64_t i = 300; i < 500; ++i) ASSERT_TRUE(a.remove(item(i)));
    for (std::uint64_t i = 300; i < 500; ++i) ASSERT_TRUE(a.contains(item(i))) << i;
    CountingLayer full(kBlockCells, 2);
    for (int i = 0; i < 10; ++i) full.add(item(1));
    CountingLayer again(kBlockCells, 2);
    for (int i = 0; i < 10; ++i) again.add(item(1));
    full.add_cells(again);
    for (std::uint64_t c = 0; c < full.cells(); ++c) ASSERT_LE(full.cell(c), kCellMax);
}

// Deleting items that were never added (each a false positive, so the
// delete goes through) takes cells from items that were: they answer 0.
TEST(Counting, DeletingWhatWasNeverAddedCausesFalseNegatives) {
    CountingLayer layer = layer_for(10000, 0.01);
    for (std::uint64_t i = 0; i < 10000; ++i) layer.add(item(i));
    std::uint64_t deleted = 0;
    for (std::uint64_t i = 0; i < 100000; ++i) deleted += layer.remove(item(2'000'000'000 + i));
    std::uint64_t lost = 0;
    for (std::uint64_t i = 0; i < 10000; ++i) lost += !layer.contains(item(i));
    std::printf(
        "[ measured ] 100,000 deletes of absent items: %llu went through (false "
        "positives), and %llu of the 10,000 added items now answer 0\n",
        static_cast<unsigned long long>(deleted), static_cast<unsigned long long>(lost));
    EXPECT_GT(deleted, 0u);
    EXPECT_GT(lost, 0u);
}

}  // namespace
}  // namespace bloomery::bloom
