// The automatic layout (bounds.hpp: Layout::automatic), the default of
// filters created without LAYOUT: never more than 2 % more bits than
// RedisBloom's sub-filters for the same BF.RESERVE, blocked only where that
// holds, and the measured false-positive rate within the request.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "bloom_test_support.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/params.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::bloom {
namespace {

using testing::absent_item;
using testing::make_options;
using testing::present_item;

constexpr double kErrorRates[] = {0.5, 0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6, 1e-9};
constexpr std::uint64_t kCapacities[] = {1000, 1000000};

FilterOptions auto_options(std::uint64_t capacity, double error_rate, bool nonscaling) {
    FilterOptions options = make_options(capacity, error_rate, 2, nonscaling);
    options.layout = Layout::automatic;
    return options;
}

// RedisBloom's chain for the same BF.RESERVE (bloom_init with NOROUND and
// FORCE64, as BF.RESERVE gives it): its first sub-filter, then each next one
// at capacity × expansion and half the error rate.
std::vector<LayerGeometry> redisbloom_chain(const FilterOptions& options, std::size_t layers) {
    constexpr std::uint32_t kOptions = kRedisBloomDefaultOptions;
    const double first_rate = options.nonscaling ? options.error_rate : options.error_rate / 2;
    const std::optional<LayerGeometry> first =
        redisbloom_layer(options.capacity, first_rate, kOptions);
    EXPECT_TRUE(first);
    std::vector<LayerGeometry> chain{first.value_or(LayerGeometry{})};
    while (chain.size() < layers) {
        const std::optional<LayerGeometry> next = redisbloom_layer(
            chain.back().capacity * options.expansion, chain.back().error_rate / 2, kOptions);
        EXPECT_TRUE(next);
        chain.push_back(next.value_or(LayerGeometry{}));
    }
    return chain;
}

std::uint64_t total_bits(const std::vector<LayerGeometry>& layers) {
    std::uint64_t total = 0;
    for (const LayerGeometry& layer : layers) total += layer.bits;
    return total;
}

TEST(AutoLayout, IsAFilterPolicyNamedAutoAndNeverALayerLayout) {
    EXPECT_EQ(layout_name(Layout::automatic), "auto");
    EXPECT_EQ(check_options(auto_options(1000, 0.01, false)), BoundsError::none);
    LayerGeometry layer = first_layer(auto_options(1000, 0.01, false));
    ASSERT_EQ(check_layer(layer, 0), BoundsError::none);
    layer.layout = Layout::automatic;
    EXPECT_EQ(check_layer(layer, 0), BoundsError::layout_invalid);
}

TEST(AutoLayout, EachSubFilterCostsAtMostTwoPercentMoreThanRedisBloom) {
    for (const double p : kErrorRates) {
        for (const std::uint64_t n : kCapacities) {
            for (const bool nonscaling : {false, true}) {
                const FilterOptions options = auto_options(n, p, nonscaling);
                // Ten layers for a scaling filter (what 1023 × the capacity
                // brings), one for a nonscaling one.
                std::vector<LayerGeometry> mine{first_layer(options)};
                const std::size_t layers = nonscaling ? 1 : 10;
                while (mine.size() < layers) {
                    const std::optional<LayerGeometry> next = next_layer(options, mine.back());
                    ASSERT_TRUE(next) << p << " " << n;
                    mine.push_back(*next);
                }
                const std::vector<LayerGeometry> theirs = redisbloom_chain(options, layers);
                for (std::size_t i = 0; i < layers; ++i) {
                    SCOPED_TRACE("p " + std::to_string(p) + " n " + std::to_string(n) + " layer " +
                                 std::to_string(i));
                    EXPECT_EQ(check_layer(mine[i], 0), BoundsError::none);
                    EXPECT_EQ(mine[i].capacity, theirs[i].capacity);
                    EXPECT_DOUBLE_EQ(mine[i].error_rate, theirs[i].error_rate);
                    EXPECT_LE(static_cast<double>(mine[i].bits),
                              kMaxAutoOverhead * static_cast<double>(theirs[i].bits));
                }
                EXPECT_LE(static_cast<double>(total_bits(mine)),
                          1.02 * static_cast<double>(total_bits(theirs)))
                    << "p " << p << " n " << n << " nonscaling " << nonscaling;
            }
        }
    }
}

TEST(AutoLayout, BlocksWhereThatIsWithinTheBudgetAndOnlyThere) {
    // At 1 %, blocking 1M items costs about 5 % more bits: classic.
    EXPECT_EQ(first_layer(auto_options(1000000, 0.01, true)).layout, Layout::classic);
    // At 12.5 % (BF.RESERVE 0.25: the first layer of a scaling filter),
    // under 2 %.
    const LayerGeometry cheap = first_layer(auto_options(1000000, 0.25, false));
    EXPECT_EQ(cheap.layout, Layout::blocked);
    const std::optional<LayerGeometry> reference =
        redisbloom_layer(1000000, 0.125, kRedisBloomDefaultOptions);
    ASSERT_TRUE(reference);
    EXPECT_GT(cheap.bits, reference->bits);
    EXPECT_LE(static_cast<double>(cheap.bits), 1.02 * static_cast<double>(reference->bits));
    // Exactly the layer `blocked` would make there.
    FilterOptions blocked = auto_options(1000000, 0.25, false);
    blocked.layout = Layout::blocked;
    const LayerGeometry same = first_layer(blocked);
    EXPECT_EQ(same.bits, cheap.bits);
    EXPECT_EQ(same.hashes, cheap.hashes);
    // Small layers stay classic under either (they sit in cache anyway).
    EXPECT_EQ(first_layer(auto_options(1000, 0.25, false)).layout, Layout::classic);
}

TEST(AutoLayout, ExplicitLayoutsKeepTheirMeaning) {
    for (const double p : {0.01, 1e-4}) {
        FilterOptions options = auto_options(1000000, p, true);
        options.layout = Layout::blocked;
        EXPECT_EQ(first_layer(options).layout, Layout::blocked) << p;
        options.layout = Layout::classic;
        const LayerGeometry classic = first_layer(options);
        EXPECT_EQ(classic.layout, Layout::classic) << p;
        EXPECT_EQ(classic.bits, optimal_bits(1000000, p));
    }
}

TEST(AutoLayout, TheFilterKeepsItsPolicyForTheLayersItAdds) {
    // BF.RESERVE 0.5 with 40000: the first layer (at 25 %, 21 KB) is small,
    // so classic; the second (80000 at 12.5 %) and on are large enough to
    // block where it is within 2 %.
    const FilterRef owned = ScalableFilter::create(auto_options(40000, 0.5, false));
    ScalableFilter& filter = *owned;
    EXPECT_EQ(filter.options().layout, Layout::automatic);
    std::uint64_t next = 0;
    while (filter.num_layers() < 4) {
        ASSERT_NE(filter.add(present_item(next++), GrowthLimits{}), AddResult::full);
    }
    const FilterOptions options = filter.options();
    LayerGeometry expected = first_layer(options);
    for (std::size_t i = 0; i < filter.num_layers(); ++i) {
        if (i > 0) {
            const std::optional<LayerGeometry> grown = next_layer(options, expected);
            ASSERT_TRUE(grown);
            expected = *grown;
        }
        const LayerGeometry got = filter.layer(i).geometry();
        EXPECT_EQ(got.layout, expected.layout) << i;
        EXPECT_EQ(got.bits, expected.bits) << i;
        EXPECT_EQ(got.hashes, expected.hashes) << i;
    }
    EXPECT_EQ(filter.layer(0).layout(), Layout::classic);
    for (std::uint64_t i = 0; i < next; i += 97) EXPECT_TRUE(filter.contains(present_item(i)));
}

TEST(AutoLayout, ADumpHeaderCarriesThePolicyAndEachLayersLayout) {
    // 200000 at 25 %: 2.4 % more bits blocked, so classic; 400000 at 12.5 %:
    // 1.9 %, blocked.
    const FilterRef owned = ScalableFilter::create(auto_options(200000, 0.5, false));
    ScalableFilter& filter = *owned;
    for (std::uint64_t i = 0; filter.num_layers() < 2; ++i) {
        ASSERT_NE(filter.add(present_item(i), GrowthLimits{}), AddResult::full);
    }
    ASSERT_EQ(filter.layer(0).layout(), Layout::classic);
    ASSERT_EQ(filter.layer(1).layout(), Layout::blocked);
    const std::string header = encode_header(filter);
    const core::Result<FilterRef> decoded = decode_header(header, 0);
    ASSERT_TRUE(decoded) << decoded.error();
    const FilterRef& copy = *decoded;
    EXPECT_EQ(copy->options().layout, Layout::automatic);
    ASSERT_EQ(copy->num_layers(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
        const LayerGeometry a = filter.layer(i).geometry();
        const LayerGeometry b = copy->layer(i).geometry();
        EXPECT_EQ(a.layout, b.layout) << i;
        EXPECT_EQ(a.bits, b.bits) << i;
        EXPECT_EQ(a.hashes, b.hashes) << i;
    }
    EXPECT_EQ(encode_header(*copy), header);
}

// Allowed false positives among `probes` absent items at rate p: the
// expected count plus four standard deviations (a binomial's), plus one for
// rates so low that the expected count is below one.
std::uint64_t allowed_false_positives(double p, std::uint64_t probes) {
    const double mean = p * static_cast<double>(probes);
    return static_cast<std::uint64_t>(std::floor(mean + 4 * std::sqrt(mean * (1 - p)) + 1));
}

std::uint64_t false_positives(const ScalableFilter& filter, std::uint64_t probes) {
    std::uint64_t count = 0;
    for (std::uint64_t i = 0; i < probes; ++i) count += filter.contains(absent_item(i)) ? 1 : 0;
    return count;
}

TEST(AutoLayout, MeasuredRateAtCapacityIsWithinTheRequest) {
    constexpr std::uint64_t kProbes = 200000;
    std::vector<double> rates(std::begin(kErrorRates), std::end(kErrorRates));
    rates.push_back(0.125);  // blocked at 1M items
    for (const double p : rates) {
        for (const std::uint64_t n : kCapacities) {
            // Nonscaling: the one layer has the whole rate, the tightest case.
            const FilterRef owned = ScalableFilter::create(auto_options(n, p, true));
            ScalableFilter& filter = *owned;
            // n distinct items: what the filter was sized for. (Its item
            // count stays below n: an add that finds its item present, a
            // false positive, is not counted, as in RedisBloom.)
            for (std::uint64_t i = 0; i < n; ++i) {
                const AddResult r = filter.add(present_item(i), GrowthLimits{});
                ASSERT_NE(r, AddResult::full) << p << " " << n;
            }
            ASSERT_LE(filter.items(), n);
            if (p == 0.125 && n == 1000000) {
                EXPECT_EQ(filter.layer(0).layout(), Layout::blocked);
            }
            for (std::uint64_t i = 0; i < n; i += 101) {
                ASSERT_TRUE(filter.contains(present_item(i))) << p << " " << n;
            }
            const std::uint64_t found = false_positives(filter, kProbes);
            EXPECT_LE(found, allowed_false_positives(p, kProbes))
                << "p " << p << " n " << n << " layout " << layout_name(filter.layer(0).layout())
                << ": " << found << " of " << kProbes;
        }
    }
}

TEST(AutoLayout, MeasuredRateOfAGrownFilterIsWithinTheRequest) {
    constexpr std::uint64_t kProbes = 200000;
    for (const double p : {0.5, 0.1, 0.01, 1e-3}) {
        // 63000 items from a capacity of 1000: five or six layers (fewer
        // items are counted than added), the later ones blocked where that
        // is within the budget.
        const FilterRef owned = ScalableFilter::create(auto_options(1000, p, false));
        ScalableFilter& filter = *owned;
        for (std::uint64_t i = 0; i < 63000; ++i) {
            ASSERT_NE(filter.add(present_item(i), GrowthLimits{}), AddResult::full);
        }
        EXPECT_GE(filter.num_layers(), 5u) << p;
        const std::uint64_t found = false_positives(filter, kProbes);
        EXPECT_LE(found, allowed_false_positives(p, kProbes)) << p << ": " << found;
    }
}

}  // namespace
}  // namespace bloomery::bloom
