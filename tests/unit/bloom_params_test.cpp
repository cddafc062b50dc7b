#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "bloomery/bloom/params.hpp"

namespace bloomery::bloom {
namespace {

TEST(BloomParams, BitsPerItemMatchesTextbookFigures) {
    EXPECT_NEAR(bits_per_item(0.01), 9.585, 0.001);
    EXPECT_NEAR(bits_per_item(0.0001), 19.17, 0.01);
    EXPECT_NEAR(bits_per_item(0.5), 1.4427, 0.0001);  // 1/ln 2
}

TEST(BloomParams, OptimalBitsIsCeilingRoundedUpToWholeWords) {
    for (std::uint64_t n : {1ull, 7ull, 1000ull, 12345ull, 1000000ull}) {
        for (double p : {0.5, 0.1, 0.01, 0.001, 0.0001}) {
            const std::uint64_t m = optimal_bits(n, p);
            const double exact = std::ceil(static_cast<double>(n) * bits_per_item(p));
            EXPECT_EQ(m % 64, 0u) << n << " " << p;
            EXPECT_GE(static_cast<double>(m), exact) << n << " " << p;
            EXPECT_LT(static_cast<double>(m), std::max(exact, 64.0) + 64) << n << " " << p;
        }
    }
    EXPECT_EQ(optimal_bits(1000, 0.01), 9600u);  // ceil(9585.06) = 9586 -> 150 words
    EXPECT_EQ(optimal_bits(1, 0.5), 64u);        // minimum one word
}

TEST(BloomParams, OptimalBitsMatchesDesignSanityFigures) {
    // The sizing the server is built for: 10^9 URLs at 0.01 % need about
    // 2.4 GB, at 1 % about 1.2 GB (m = -n ln p / (ln 2)^2 bits).
    EXPECT_NEAR(static_cast<double>(optimal_bits(1000000000, 0.0001)) / 8 / 1e9, 2.396, 0.01);
    EXPECT_NEAR(static_cast<double>(optimal_bits(1000000000, 0.01)) / 8 / 1e9, 1.198, 0.01);
}

TEST(BloomParams, OptimalBitsSaturatesInsteadOfOverflowing) {
    const std::uint64_t max_bits = std::numeric_limits<std::uint64_t>::max() & ~std::uint64_t{63};
    EXPECT_EQ(optimal_bits(std::numeric_limits<std::uint64_t>::max(), 0.01), max_bits);
    EXPECT_EQ(optimal_bits(std::uint64_t{1} << 62, 0.0001), max_bits);
}

TEST(BloomParams, OptimalHashesIsCeilingOfMinusLog2P) {
    EXPECT_EQ(optimal_hashes(0.5), 1u);
    EXPECT_EQ(optimal_hashes(0.25), 2u);
    EXPECT_EQ(optimal_hashes(0.1), 4u);          // 3.32
    EXPECT_EQ(optimal_hashes(0.01), 7u);         // 6.64
    EXPECT_EQ(optimal_hashes(0.005), 8u);        // 7.64
    EXPECT_EQ(optimal_hashes(0.001), 10u);       // 9.97
    EXPECT_EQ(optimal_hashes(1.0 / 1024), 10u);  // exactly 10, no float creep to 11
    EXPECT_EQ(optimal_hashes(0.0001), 14u);      // 13.29
    EXPECT_EQ(optimal_hashes(0.9), 1u);          // at least 1
    for (double p : {0.3, 0.01, 0.002, 1e-5, 1e-9}) {
        EXPECT_EQ(optimal_hashes(p),
                  static_cast<std::uint32_t>(std::ceil(std::log(2.0) * bits_per_item(p) - 1e-9)))
            << p;
    }
}

TEST(BloomParams, ExpectedFalsePositiveRateAtCapacityIsNearTarget) {
    for (double p : {0.01, 0.001, 0.0001}) {
        const std::uint64_t n = 100000;
        const double rate = expected_false_positive_rate(optimal_bits(n, p), optimal_hashes(p), n);
        // k is rounded up from -log2 p, so the rate can sit a hair above p
        // (0.01003 at p = 1 %); never by more than a few percent of p.
        EXPECT_NEAR(rate, p, p * 0.05) << p;
    }
    EXPECT_EQ(expected_false_positive_rate(1024, 7, 0), 0.0);
    EXPECT_NEAR(expected_false_positive_rate(1000, 1, 1000), 1 - std::exp(-1.0), 1e-12);
}

TEST(BloomParams, EstimateItemsFollowsSwamidassBaldi) {
    EXPECT_EQ(estimate_items(1024, 7, 1024), 0.0);
    EXPECT_NEAR(estimate_items(1000, 1, 500), 1000 * std::log(2.0), 1e-9);
    EXPECT_NEAR(estimate_items(6400, 4, 3200), 1600 * std::log(2.0), 1e-9);
}

TEST(BloomParams, EstimateItemsStaysFiniteWhenSaturated) {
    const double saturated = estimate_items(1000000, 7, 0);
    EXPECT_TRUE(std::isfinite(saturated));
    EXPECT_NEAR(saturated, 1000000.0 / 7 * std::log(1000000.0), 1e-6);
    EXPECT_GE(saturated, estimate_items(1000000, 7, 1));
    const std::uint64_t max_bits = std::numeric_limits<std::uint64_t>::max() & ~std::uint64_t{63};
    EXPECT_TRUE(std::isfinite(estimate_items(max_bits, 1, 0)));
    EXPECT_TRUE(std::isfinite(estimate_items(64, 0, 0)));
    EXPECT_EQ(estimate_items(0, 7, 0), 0.0);
    EXPECT_EQ(estimate_items(64, 7, 1000), 0.0);  // zero_bits > bits is clamped
}

TEST(BloomParams, FillFalsePositiveRateIsTheFillToTheK) {
    EXPECT_DOUBLE_EQ(fill_false_positive_rate(1000, 7, 500), std::pow(0.5, 7));
    EXPECT_DOUBLE_EQ(fill_false_positive_rate(1024, 3, 256), 1.0 / 64);
    EXPECT_EQ(fill_false_positive_rate(1000, 7, 0), 0.0);
    EXPECT_EQ(fill_false_positive_rate(1000, 7, 1000), 1.0);
    EXPECT_EQ(fill_false_positive_rate(1000, 7, 2000), 1.0);  // a count read mid-update
    EXPECT_EQ(fill_false_positive_rate(0, 7, 0), 1.0);
    EXPECT_EQ(fill_false_positive_rate(1000, 0, 500), 0.0);
    // At the design load about half the bits are set: f^k is close to the
    // expected rate (1 − e^(−kn/m))^k.
    const std::uint64_t m = 9586;
    const double set = static_cast<double>(m) * -std::expm1(-7.0 * 1000 / m);
    EXPECT_NEAR(fill_false_positive_rate(m, 7, static_cast<std::uint64_t>(set)),
                expected_false_positive_rate(m, 7, 1000), 1e-5);
}

}  // namespace
}  // namespace bloomery::bloom
