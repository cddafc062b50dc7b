#include "bloomery/bloom/params.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <mutex>
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
    return classic_bits(capacity, bits_per_item(error_rate));
}

std::uint64_t classic_bits(std::uint64_t capacity, double bits_per_item) {
    const double bits = std::ceil(static_cast<double>(capacity) * bits_per_item);
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

double fill_false_positive_rate(std::uint64_t bits, std::uint32_t hashes, std::uint64_t set_bits) {
    if (bits == 0) return 1.0;
    if (hashes == 0 || set_bits == 0) return 0.0;
    // set_bits of a layer being added to can pass bits for a moment (a
    // counter read mid-update); a full layer answers 1.
    if (set_bits >= bits) return 1.0;
    return std::pow(static_cast<double>(set_bits) / static_cast<double>(bits),
                    static_cast<double>(hashes));
}

double estimate_items(std::uint64_t bits, std::uint32_t hashes, std::uint64_t zero_bits) {
    if (bits == 0) return 0.0;
    const double k = hashes == 0 ? 1.0 : static_cast<double>(hashes);
    // m0 = 0 would be ln(inf): a saturated filter answers as if one bit were
    // still zero, (m/k)·ln(m), the largest finite estimate for this geometry
    // (about 1.3 million for m = 1 Mbit, k = 7 vs 100k items at capacity).
    std::uint64_t m0 = zero_bits == 0 ? 1 : zero_bits;
    if (m0 > bits) m0 = bits;
    const auto m = static_cast<double>(bits);
    return (m / k) * std::log(m / static_cast<double>(m0));
}

namespace {

// The classic rate at c bits per item with the better of the two whole k
// around the optimum c·ln 2 (the rate is unimodal in k).
double classic_rate(double c, std::uint32_t& hashes) {
    const double optimum = c * kLn2;
    double best = 2.0;
    const double low = std::floor(optimum);
    for (double k : {low, low + 1}) {
        if (k < 1 || k > 128) continue;
        const double rate = std::pow(-std::expm1(-k / c), k);
        if (rate < best) {
            best = rate;
            hashes = static_cast<std::uint32_t>(k);
        }
    }
    return best;
}

}  // namespace

ClassicSizing classic_sizing(double error_rate) {
    if (!(error_rate > 0.0 && error_rate < 1.0)) return ClassicSizing{1e300, 128};
    // Bisection on c: k = 1 at c = 0.01 is far above any p < 1 and twice the
    // textbook bits always suffice.
    double low = 0.01;
    double high = 2 * bits_per_item(error_rate) + 1;
    std::uint32_t hashes = 1;
    for (int round = 0; round < 200 && high - low > low * 1e-5; ++round) {
        const double mid = (low + high) / 2;
        (classic_rate(mid, hashes) > error_rate ? low : high) = mid;
    }
    const double c = std::ceil(high * 10000.0) / 10000.0;
    classic_rate(c, hashes);
    return ClassicSizing{c, hashes};
}

double blocked_false_positive_rate(double bits_per_item, std::uint32_t hashes,
                                   std::uint64_t block_bits) {
    const auto block = static_cast<double>(block_bits);
    const double lambda = block / bits_per_item;
    const double k = hashes;
    // log(1 - 1/B): each of the i·k bits set in a block misses a given bit
    // with probability 1 - 1/B.
    const double log_miss = std::log1p(-1.0 / block);
    // Sum the Poisson terms up to far into the tail (12 standard deviations),
    // in log space so large λ neither overflows nor underflows.
    const auto last = static_cast<std::uint64_t>(lambda + 12.0 * std::sqrt(lambda) + 20.0);
    double total = 0.0;
    double log_poisson = -lambda;  // log Pois(0; λ)
    for (std::uint64_t i = 0; i <= last; ++i) {
        if (i > 0) log_poisson += std::log(lambda / static_cast<double>(i));
        const double fill = -std::expm1(k * static_cast<double>(i) * log_miss);
        total += std::exp(log_poisson + k * std::log(fill > 0 ? fill : 1e-300));
    }
    return total;
}

namespace {

// For a given c the rate is unimodal in k: walk from the classic optimum
// towards the better neighbour.
std::uint32_t best_hashes(double bits_per_item, std::uint64_t block, double& rate) {
    // Clamped before the cast: k beyond 128 is refused by the bounds anyway.
    const double guess = std::round(bits_per_item * kLn2);
    auto k = static_cast<std::uint32_t>(guess >= 1.0 ? (guess <= 128.0 ? guess : 128.0) : 1.0);
    rate = blocked_false_positive_rate(bits_per_item, k, block);
    for (int direction : {-1, +1}) {
        for (;;) {
            const std::int64_t next = static_cast<std::int64_t>(k) + direction;
            if (next < 1 || next > 128) break;
            const double r =
                blocked_false_positive_rate(bits_per_item, static_cast<std::uint32_t>(next), block);
            if (!(r < rate)) break;
            rate = r;
            k = static_cast<std::uint32_t>(next);
        }
    }
    return k;
}

BlockedSizing compute_blocked_sizing(double error_rate, std::uint64_t block) {
    // Bisection on c between the classic bits per item (never enough) and a
    // bound that is; 40 rounds pin c far below the 0.1 % it is rounded to.
    double low = bits_per_item(error_rate);
    double high = low * 2;
    double rate = 0;
    while (best_hashes(high, block, rate), rate > error_rate) {
        low = high;
        high *= 2;
        if (high > 1e7) break;  // absurd rates: the caller's overhead cap refuses it
    }
    for (int round = 0; round < 40 && high - low > low * 1e-4; ++round) {
        const double mid = (low + high) / 2;
        best_hashes(mid, block, rate);
        (rate > error_rate ? low : high) = mid;
    }
    const double c = std::ceil(high * 1000.0) / 1000.0;
    return BlockedSizing{c, best_hashes(c, block, rate)};
}

}  // namespace

BlockedSizing blocked_sizing(double error_rate, std::uint64_t block_bits) {
    if (!(error_rate >= 1e-300 && error_rate < 1.0)) {
        // Outside the precondition: an answer that the callers' overhead cap
        // refuses, rather than undefined arithmetic.
        return BlockedSizing{1e300, 128};
    }
    // Filters of one server use a handful of error rates (the default, and
    // p·2^-i for the layers of scaling filters): a small cache of recent ones.
    struct Entry {
        double error_rate;
        std::uint64_t block;
        BlockedSizing sizing;
    };
    thread_local Entry last{0.0, 0, {}};
    if (last.error_rate == error_rate && last.block == block_bits) return last.sizing;
    static std::mutex mutex;
    static std::array<Entry, 64> cache{};
    static std::size_t next = 0;
    {
        std::lock_guard lock(mutex);
        for (const Entry& entry : cache) {
            if (entry.error_rate == error_rate && entry.block == block_bits) {
                last = entry;
                return entry.sizing;
            }
        }
    }
    const BlockedSizing sizing = compute_blocked_sizing(error_rate, block_bits);
    last = Entry{error_rate, block_bits, sizing};
    std::lock_guard lock(mutex);
    cache[next] = Entry{error_rate, block_bits, sizing};
    next = (next + 1) % cache.size();
    return sizing;
}

std::uint64_t blocked_bits(std::uint64_t capacity, double bits_per_item, std::uint64_t block_bits) {
    const double bits = std::ceil(static_cast<double>(capacity) * bits_per_item);
    if (!(bits < 18446744073709551616.0 / 2)) return kMaxBits;
    auto raw = static_cast<std::uint64_t>(bits);
    if (raw > kMaxBits - block_bits) return kMaxBits;
    return (raw + block_bits - 1) / block_bits * block_bits;
}

}  // namespace bloomery::bloom
