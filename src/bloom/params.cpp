#include "bloomery/bloom/params.hpp"

#include <cmath>
#include <limits>
#include <numbers>

namespace bloomery::bloom {

namespace {

constexpr double kLn2 = std::numbers::ln2;
// The largest multiple of 64 representable in uint64_t. Sizes that would
// exceed it saturate here; such a layer can never be allocated, so callers
// see it as "too large" (max_layer_bytes) or std::bad_alloc, never a wrap.
constexpr std::uint64_t kMaxBits = std::numeric_limits<std::uint64_t>::max() & ~std::uint64_t{63};

}  // namespace

double bits_per_item(double error_rate) {
    return -std::log(error_rate) / (kLn2 * kLn2);
}

std::uint64_t optimal_bits(std::uint64_t capacity, double error_rate) {
    const double bits = std::ceil(static_cast<double>(capacity) * bits_per_item(error_rate));
    // Converting a double >= 2^64 to uint64_t is undefined: compare first.
    // 1.8e19 is exactly 2^64 as a double, and kMaxBits rounds up to it.
    if (!(bits < 18446744073709551616.0)) return kMaxBits;
    const auto raw = static_cast<std::uint64_t>(bits);
    if (raw > kMaxBits) return kMaxBits;
    const std::uint64_t rounded = (raw + 63) & ~std::uint64_t{63};
    return rounded < 64 ? 64 : rounded;
}

std::uint32_t optimal_hashes(double error_rate) {
    // ln2 · bits_per_item(p) = -log2(p). Rounding the product of two
    // rounded doubles can land a hair above an integer (p = 0.5 gives
    // 1.0000000000000002): subtract a relative epsilon before ceil so exact
    // powers of two get the textbook k (p = 1/1024 -> 10, not 11).
    const double k = -std::log2(error_rate);
    const double nudged = k - k * 1e-12;
    const double hashes = std::ceil(nudged);
    if (!(hashes >= 1.0)) return 1;
    if (hashes > 1e6) return 1000000;  // absurd error rates; keeps the cast defined
    return static_cast<std::uint32_t>(hashes);
}

double expected_false_positive_rate(std::uint64_t bits, std::uint32_t hashes, std::uint64_t items) {
    if (bits == 0) return 1.0;
    if (items == 0 || hashes == 0) return 0.0;
    const double k = hashes;
    const double fill = -std::expm1(-k * static_cast<double>(items) / static_cast<double>(bits));
    return std::pow(fill, k);
}

double estimate_items(std::uint64_t bits, std::uint32_t hashes, std::uint64_t zero_bits) {
    if (bits == 0) return 0.0;
    const double k = hashes == 0 ? 1.0 : static_cast<double>(hashes);
    // m0 = 0 would be ln(inf): a saturated filter answers as if one bit were
    // still zero, (m/k)·ln(m), the largest finite estimate for this geometry
    // (about 1.3 million for m = 1 Mbit, k = 7 vs 100k items at capacity).
    std::uint64_t m0 = zero_bits == 0 ? 1 : zero_bits;
    if (m0 > bits) m0 = bits;
    const double m = static_cast<double>(bits);
    return (m / k) * std::log(m / static_cast<double>(m0));
}

}  // namespace bloomery::bloom
