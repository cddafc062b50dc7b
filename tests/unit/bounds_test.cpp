// The one table of filter bounds (bloom/bounds.hpp) and the layer geometry
// derived from it.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/params.hpp"

namespace bloomery::bloom {
namespace {

FilterOptions options(double error_rate, std::uint64_t capacity, std::uint32_t expansion = 2,
                      bool nonscaling = false) {
    return FilterOptions{error_rate, capacity, expansion, nonscaling};
}

TEST(Bounds, OptionsAtAndJustPastEachBound) {
    EXPECT_EQ(check_options(options(kMinErrorRate, 1)), BoundsError::none);
    EXPECT_EQ(check_options(options(std::nextafter(kMinErrorRate, 0.0), 1)),
              BoundsError::error_rate_too_small);
    EXPECT_EQ(check_options(options(std::nextafter(1.0, 0.0), 1)), BoundsError::none);
    EXPECT_EQ(check_options(options(1.0, 1)), BoundsError::error_rate_range);
    EXPECT_EQ(check_options(options(0.0, 1)), BoundsError::error_rate_range);
    EXPECT_EQ(check_options(options(std::numeric_limits<double>::quiet_NaN(), 1)),
              BoundsError::error_rate_range);
    EXPECT_EQ(check_options(options(0.01, 0)), BoundsError::capacity_zero);
    EXPECT_EQ(check_options(options(0.01, kMaxLayerCapacity)), BoundsError::none);
    EXPECT_EQ(check_options(options(0.01, kMaxLayerCapacity + 1)), BoundsError::capacity_too_large);
    EXPECT_EQ(check_options(options(0.01, 1, 0)), BoundsError::expansion_range);
    EXPECT_EQ(check_options(options(0.01, 1, kMaxExpansion)), BoundsError::none);
    EXPECT_EQ(check_options(options(0.01, 1, kMaxExpansion + 1)), BoundsError::expansion_range);
}

TEST(Bounds, StoredOptionsAcceptSmallerErrorRatesOfEarlierVersions) {
    EXPECT_EQ(check_stored_options(options(1e-18, 10)), BoundsError::none);
    EXPECT_EQ(check_stored_options(options(0.0, 10)), BoundsError::error_rate_range);
    EXPECT_EQ(check_stored_options(options(0.01, 10, kMaxExpansion + 1)),
              BoundsError::expansion_range);
}

TEST(Bounds, LayersAtAndJustPastEachBound) {
    const LayerGeometry good{100, 0.005, 1152, 8};
    EXPECT_EQ(check_layer(good, 0), BoundsError::none);
    EXPECT_EQ(check_layer(good, kMaxLayerItems), BoundsError::none);
    EXPECT_EQ(check_layer(good, kMaxLayerItems + 1), BoundsError::items_too_large);
    LayerGeometry g = good;
    g.hashes = kMaxHashes;
    EXPECT_EQ(check_layer(g, 0), BoundsError::none);
    g.hashes = kMaxHashes + 1;
    EXPECT_EQ(check_layer(g, 0), BoundsError::hashes_range);
    g = good;
    g.bits = kMaxLayerBits;
    EXPECT_EQ(check_layer(g, 0), BoundsError::none);
    g.bits = kMaxLayerBits + 64;
    EXPECT_EQ(check_layer(g, 0), BoundsError::bits_invalid);
    g.bits = 100;
    EXPECT_EQ(check_layer(g, 0), BoundsError::bits_invalid);
    g = good;
    g.capacity = kMaxLayerCapacity + 1;
    EXPECT_EQ(check_layer(g, 0), BoundsError::capacity_too_large);
}

TEST(Bounds, EveryLayerAScalingFilterCanGrowStaysInsideTheBounds) {
    // The worst case of each parameter: whatever growth produces, the loader
    // accepts (so whatever the server creates, it can save and load).
    for (const Layout layout : {Layout::classic, Layout::blocked}) {
        for (const double rate : {kMinErrorRate, 1e-9, 0.01, 0.5, 0.999999}) {
            for (const std::uint32_t expansion : {1u, 2u, 7u, kMaxExpansion}) {
                for (const std::uint64_t capacity :
                     {std::uint64_t{1}, std::uint64_t{1000}, kMaxLayerCapacity}) {
                    FilterOptions o = options(rate, capacity, expansion);
                    o.layout = layout;
                    ASSERT_EQ(check_options(o), BoundsError::none);
                    std::vector<LayerGeometry> layers = {first_layer(o)};
                    while (layers.size() < kMaxLayers) {
                        const std::optional<LayerGeometry> next = next_layer(o, layers.back());
                        if (!next) break;
                        layers.push_back(*next);
                    }
                    for (std::size_t i = 0; i < layers.size(); ++i) {
                        // The first layer may be too big for any machine (that is
                        // refused at the command as too large); later layers are
                        // only made when they pass.
                        if (i == 0 && layers[0].bits > kMaxLayerBits) continue;
                        EXPECT_EQ(check_layer(layers[i], layers[i].capacity), BoundsError::none)
                            << "rate " << rate << " expansion " << expansion << " capacity "
                            << capacity << " layer " << i;
                    }
                    EXPECT_LE(filter_bytes(layers), std::numeric_limits<std::uint64_t>::max());
                }
            }
        }
    }
}

// Found by loadchunk_fuzz: a loaded blocked filter whose last layer has the
// smallest positive error rate grows a layer at half of it, which is 0. The
// sizing must not divide by it or cast infinities (UBSan would stop here).
TEST(Bounds, GrowingFromAnUnderflowingErrorRateStaysDefined) {
    FilterOptions o = options(0.01, 100, 2);
    o.layout = Layout::blocked;
    const LayerGeometry last{100, 4.9e-324, 4096, 64, Layout::blocked};
    ASSERT_EQ(check_layer(last, 0), BoundsError::none);
    if (const std::optional<LayerGeometry> next = next_layer(o, last)) {
        EXPECT_EQ(next->layout, Layout::classic);
        EXPECT_EQ(check_layer(*next, 0), BoundsError::none);
    }
    EXPECT_EQ(blocked_sizing(0.0).hashes, 128u);
    EXPECT_GT(blocked_sizing(1e-320).bits_per_item, 1e6);
}

TEST(Bounds, BlockedLayersHaveAtLeastOneBlockAndAKnownLayout) {
    LayerGeometry g{100, 0.005, 512, 7, Layout::blocked};
    EXPECT_EQ(check_layer(g, 0), BoundsError::none);
    g.bits = 448;
    EXPECT_EQ(check_layer(g, 0), BoundsError::bits_invalid);
    g.bits = 576;  // whole words, not whole blocks
    EXPECT_EQ(check_layer(g, 0), BoundsError::bits_invalid);
    g.layout = Layout::classic;
    EXPECT_EQ(check_layer(g, 0), BoundsError::none);
    g.layout = static_cast<Layout>(7);
    EXPECT_EQ(check_layer(g, 0), BoundsError::layout_invalid);
    g.layout = Layout::automatic;  // a filter's policy, never a layer's
    EXPECT_EQ(check_layer(g, 0), BoundsError::layout_invalid);
    FilterOptions o;
    o.layout = Layout::automatic;
    EXPECT_EQ(check_options(o), BoundsError::none);
    o.layout = Layout::counting;
    EXPECT_EQ(check_options(o), BoundsError::none);
    o.layout = static_cast<Layout>(4);
    EXPECT_EQ(check_options(o), BoundsError::layout_invalid);
    // Small layers of a blocked filter stay classic (a default filter keeps
    // its 1,152 bits); from 32 KiB of bits they are blocked, in whole blocks.
    o = FilterOptions{};
    o.layout = Layout::blocked;
    EXPECT_EQ(first_layer(o).layout, Layout::classic);
    EXPECT_EQ(first_layer(o).bits, 1152u);
    o.capacity = 30000;
    EXPECT_EQ(first_layer(o).layout, Layout::blocked);
    EXPECT_EQ(first_layer(o).bits % kBlockBits, 0u);
}

TEST(Bounds, FilterBytesSumsEveryLayerAndSaturates) {
    const std::vector<LayerGeometry> layers = {{1, 0.5, 64, 1}, {2, 0.25, 128, 2}};
    EXPECT_EQ(filter_bytes(layers), 24u);
    const std::vector<LayerGeometry> huge(9, LayerGeometry{1, 0.5, ~std::uint64_t{63}, 1});
    EXPECT_EQ(filter_bytes(huge), std::numeric_limits<std::uint64_t>::max());
}

TEST(Bounds, MaxScaledCapacityGrowsUntilTheLayerLimit) {
    // 100, 200, 400, ... capacity 100·(2^64 − 1) would pass the capacity
    // bound first: 100·2^n <= 2^48 for n <= 41, so 42 layers.
    const FilterOptions o = options(0.01, 100);
    const LayerGeometry first = first_layer(o);
    const ScaleReach reach = max_scaled_capacity(o, std::span(&first, 1), 0);
    EXPECT_EQ(reach.stop, GrowthStop::bounds);
    // Expansion 1: the hash bound stops it (each layer halves the error
    // rate), or the 64-layer limit; either way a sum of equal layers.
    const FilterOptions flat = options(0.01, 100, 1);
    const LayerGeometry flat_first = first_layer(flat);
    const ScaleReach flat_reach = max_scaled_capacity(flat, std::span(&flat_first, 1), 0);
    EXPECT_EQ(flat_reach.capacity % 100, 0u);
    EXPECT_LE(flat_reach.capacity, 100u * kMaxLayers);
    EXPECT_GT(flat_reach.capacity, 100u);
}

TEST(Bounds, MaxScaledCapacityStopsAtMaxFilterBytes) {
    FilterOptions o = options(0.01, 1000);
    std::vector<LayerGeometry> layers = {first_layer(o)};
    // Room for exactly three layers: the fourth would pass the limit.
    for (int i = 0; i < 3; ++i) layers.push_back(*next_layer(o, layers.back()));
    const std::uint64_t three = filter_bytes(std::span(layers).first(3));
    const ScaleReach reach = max_scaled_capacity(o, std::span(layers).first(1), three);
    EXPECT_EQ(reach.stop, GrowthStop::filter_bytes);
    EXPECT_EQ(reach.capacity, 1000u + 2000u + 4000u);
    // From a filter that has grown already: the same answer.
    EXPECT_EQ(max_scaled_capacity(o, std::span(layers).first(2), three).capacity, 7000u);
    // One byte more does not make room for the fourth layer.
    EXPECT_EQ(max_scaled_capacity(o, std::span(layers).first(1), three + 1).capacity, 7000u);
    EXPECT_EQ(max_scaled_capacity(o, std::span(layers).first(1), filter_bytes(layers)).capacity,
              15000u);
}

TEST(Bounds, MaxScaledCapacityOfNonscalingFilterIsItsCapacity) {
    const FilterOptions o = options(0.01, 1000, 2, true);
    const LayerGeometry first = first_layer(o);
    const ScaleReach reach = max_scaled_capacity(o, std::span(&first, 1), 0);
    EXPECT_EQ(reach.stop, GrowthStop::nonscaling);
    EXPECT_EQ(reach.capacity, 1000u);
}

TEST(Bounds, MaxScaledCapacityStopsAtTheLayerLimit) {
    // Expansion 1 at a loose rate: 64 layers before any bound.
    const FilterOptions o = options(0.5, 10, 1);
    const LayerGeometry first = first_layer(o);
    const ScaleReach reach = max_scaled_capacity(o, std::span(&first, 1), 0);
    EXPECT_EQ(reach.stop, GrowthStop::layers);
    EXPECT_EQ(reach.capacity, 10u * kMaxLayers);
}

}  // namespace
}  // namespace bloomery::bloom
