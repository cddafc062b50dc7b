// The shape of age-partitioned filters: the false-positive rate of a ring of
// k + l slices, checked against a simulated ring, and the choice of (k, l)
// of fewest bits for a requested rate.

#include "bloomery/bloom/age_params.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

namespace bloomery::bloom {
namespace {

// The largest l at which (k, l) meets `rate`, found one l after another
// (the rate grows with l); 0 if not even l = 1 does; `limit` if all do.
std::uint32_t longest_window(std::uint32_t k, double rate, std::uint32_t limit) {
    std::uint32_t l = 0;
    while (l < limit && age_false_positive_rate({k, l + 1}) <= rate) ++l;
    return l;
}

TEST(AgeParams, OnePercentCostsAboutTwentyBitsPerWindowItem) {
    const std::optional<AgeShape> shape = choose_age_shape(0.01);
    ASSERT_TRUE(shape);
    EXPECT_LE(age_false_positive_rate(*shape), 0.01);
    EXPECT_GT(age_false_positive_rate({shape->k, shape->l + 1}), 0.01);
    EXPECT_NEAR(age_bits_per_window_item(*shape), 19.70, 0.05);
    // The paper's k = 11, l = 46 costs about as much and sits at the rate.
    EXPECT_NEAR(age_bits_per_window_item({11, 46}), 19.67, 0.01);
    EXPECT_NEAR(age_false_positive_rate({11, 46}), 0.01, 0.0005);
}

TEST(AgeParams, NoNearbyShapeMeetsTheRateWithFewerBits) {
    for (const double rate : {0.1, 0.01, 0.001}) {
        const std::optional<AgeShape> shape = choose_age_shape(rate);
        ASSERT_TRUE(shape) << rate;
        const double bits = age_bits_per_window_item(*shape);
        EXPECT_LE(age_false_positive_rate(*shape), rate);
        for (std::uint32_t k = 1; k <= shape->k + 3; ++k) {
            const std::uint32_t l = longest_window(k, rate, 3000);
            if (l == 0) continue;
            EXPECT_GE(age_bits_per_window_item({k, l}), bits - 1e-9)
                << "rate " << rate << ": k " << k << ", l " << l;
        }
    }
}

TEST(AgeParams, TheRateGrowsWithTheWindowAndTheNewestGeneration) {
    for (const std::uint32_t k : {1u, 4u, 11u}) {
        double before = 0.0;
        for (std::uint32_t l = 1; l <= 64; l *= 2) {
            const double rate = age_false_positive_rate({k, l});
            EXPECT_GT(rate, before);
            before = rate;
        }
        EXPECT_LT(age_false_positive_rate({k, 8}, 0.0), age_false_positive_rate({k, 8}, 0.5));
        EXPECT_LT(age_false_positive_rate({k, 8}, 0.5), age_false_positive_rate({k, 8}, 1.0));
    }
    // One slice of one generation, half full: a lookup finds half the items.
    EXPECT_NEAR(age_false_positive_rate({1, 0}), 0.5, 1e-12);
}

TEST(AgeParams, RatesOutsideZeroToOneHaveNoShape) {
    for (const double rate : {0.0, 1.0, -0.5, 2.0, std::nan("")}) {
        EXPECT_FALSE(choose_age_shape(rate)) << rate;
    }
    const std::optional<AgeShape> loose = choose_age_shape(0.9);
    ASSERT_TRUE(loose);
    EXPECT_LE(age_false_positive_rate(*loose), 0.9);
}

TEST(AgeParams, SlicesAreWholeBlocksOfKGOverLn2) {
    EXPECT_EQ(age_slice_bits({11, 46}, 1000), 15872u);        // 15,869.8 bits: 31 blocks
    EXPECT_EQ(age_slice_bits({11, 46}, 1000, 1.01), 16384u);  // 16,028.5 bits: 32 blocks
    EXPECT_EQ(age_slice_bits({1, 1}, 1), 512u);
    EXPECT_EQ(age_slice_bits({4, 6}, 0), 512u);
}

// Blocks cost a little: the slices grow by under 2 % at 1 % and 0.1 %, and
// the rate with the block estimate is then within the request.
TEST(AgeParams, BlocksAreMadeUpForByAFewMoreBits) {
    for (const double rate : {0.01, 0.001, 1e-4}) {
        const std::optional<AgeShape> shape = choose_age_shape(rate);
        ASSERT_TRUE(shape);
        const double scale = age_slice_scale(*shape, rate);
        EXPECT_GT(scale, 1.0) << rate;
        EXPECT_LT(scale, rate >= 1e-3 ? 1.02 : 1.04) << rate;
        EXPECT_LE(age_false_positive_rate(*shape, 1.0, scale) * (1 + age_block_inflation(shape->k)),
                  rate * (1 + 1e-9));
    }
    EXPECT_GT(age_block_inflation(16), age_block_inflation(12));
    EXPECT_EQ(age_block_inflation(1), 0.0);
}

// A ring of k + l slices of m bits, each generation of g items setting one
// random bit in each of the k newest, shifted after each generation; at the
// end of a generation, random lookups (one random bit per slice) answer 1
// as often as age_false_positive_rate() says.
TEST(AgeParams, ASimulatedRingMatchesTheRate) {
    const AgeShape shape{4, 6};
    const std::uint64_t g = 3000;
    const std::uint64_t m = age_slice_bits(shape, g);
    const std::uint32_t slices = shape.k + shape.l;
    std::vector<std::vector<bool>> ring(slices, std::vector<bool>(m));  // ring[0]: newest
    std::mt19937_64 rng(26);
    std::uniform_int_distribution<std::uint64_t> bit(0, m - 1);
    for (std::uint32_t generation = 0; generation < 2 * slices; ++generation) {
        if (generation != 0) {
            ring.pop_back();
            ring.insert(ring.begin(), std::vector<bool>(m));
        }
        for (std::uint64_t item = 0; item < g; ++item) {
            for (std::uint32_t s = 0; s < shape.k; ++s) ring[s][bit(rng)] = true;
        }
    }
    const int lookups = 200000;
    int found = 0;
    for (int q = 0; q < lookups; ++q) {
        std::uint32_t run = 0;
        bool hit = false;
        for (std::uint32_t s = 0; s < slices && !hit; ++s) {
            run = ring[s][bit(rng)] ? run + 1 : 0;
            hit = run == shape.k;
        }
        found += hit ? 1 : 0;
    }
    // The slices as rounded up to whole blocks.
    const double scale = static_cast<double>(m) * std::numbers::ln2 / (shape.k * g);
    const double expected = age_false_positive_rate(shape, 1.0, scale);
    const double measured = static_cast<double>(found) / lookups;
    const double sigma = std::sqrt(expected * (1 - expected) / lookups);
    EXPECT_NEAR(measured, expected, 4 * sigma)
        << "k " << shape.k << ", l " << shape.l << ", m " << m;
}

}  // namespace
}  // namespace bloomery::bloom
