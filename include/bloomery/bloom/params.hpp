#pragma once
// Sizing math for classic Bloom filters. Here the paper's letters are fine:
// n items, p false-positive rate, m bits, k hash functions.
//   m = ceil(-n·ln p / (ln 2)²)       (9.585 bits/item at p = 1 %)
//   k = ceil((m/n)·ln 2) = ceil(-log2 p)
// All functions are pure and thread-safe.

#include <cstdint>

namespace bloomery::bloom {

// Accepted ranges: see bounds.hpp, the one table every path checks.

// -ln p / (ln 2)²: the bits per item for false-positive rate p.
double bits_per_item(double error_rate);

// ceil(n · bits_per_item(p)) rounded up to a whole number of 64-bit words,
// at least 64. Precondition: capacity >= 1, 0 < error_rate < 1.
std::uint64_t optimal_bits(std::uint64_t capacity, double error_rate);

// ceil(ln 2 · bits_per_item(p)), at least 1.
std::uint32_t optimal_hashes(double error_rate);

// (1 − e^(−k·n/m))^k: expected false-positive rate after `items` distinct adds.
double expected_false_positive_rate(std::uint64_t bits, std::uint32_t hashes, std::uint64_t items);

// The false-positive rate a layer has now, from its fill: f^k with f the
// fraction of its bits set (set_bits / bits, at most 1). 1 for a layer
// without bits, 0 for one without hashes or set bits.
double fill_false_positive_rate(std::uint64_t bits, std::uint32_t hashes, std::uint64_t set_bits);

// Swamidass–Baldi estimate of distinct items: (m/k)·ln(m/m0), m bits of which
// m0 are zero. When the filter is saturated (m0 == 0) the estimate is computed
// with m0 = 1, the largest finite answer, instead of infinity. Never NaN or inf.
double estimate_items(std::uint64_t bits, std::uint32_t hashes, std::uint64_t zero_bits);

// ---- Classic layout, sized to the rate ----
// m = n·bits_per_item(p) with k = ceil(-log2 p) (RedisBloom's sizing, and
// LAYOUT CLASSIC's) meets p only where -log2 p is a whole number: any other
// k is off the optimum, and the rate at n items is above p (+2.8 % at p =
// 0.1). The sizing below is the smallest bits per item c (to 0.01 %) and its
// best whole k with (1 − e^(−k/c))^k <= p: within 0.2 % of bits_per_item(p)
// below 1 %, up to +4 % between 0.35 and 0.45, and below it at some rates (p
// = 0.5 with k = 1).
struct ClassicSizing {
    double bits_per_item;
    std::uint32_t hashes;
};
// Precondition: 0 < p < 1. Pure; a few microseconds.
ClassicSizing classic_sizing(double error_rate);

// ceil(capacity · bits_per_item) rounded up to whole 64-bit words, at least 64.
std::uint64_t classic_bits(std::uint64_t capacity, double bits_per_item);

// ---- Blocked layout (bounds.hpp: Layout::blocked) ----
// B = 512-bit blocks (one cache line). With c bits per item a block holds on
// average λ = B/c items, and its load is Poisson(λ); an item's k bits land in
// one block, so (Putze, Sanders, Singler 2007):
//   FPR(c, k) = Σ_i Pois(i; λ) · (1 − (1 − 1/B)^(k·i))^k
// which is above the classic (1 − e^(−k/c))^k because crowded blocks are
// worse than sparse ones are better. The sizing below picks the smallest c
// (and its best k) whose FPR is within p: at p = 1 % that is 9.93 bits per
// item instead of 9.59 (+3.6 %), at 0.1 % +7.8 %, at 0.01 % +14 %.
inline constexpr std::uint64_t kBlockBits = 512;

// `block_bits` cells per block: 512 bits, or 128 counters of a counting
// filter's 64-byte block (counting.hpp).
double blocked_false_positive_rate(double bits_per_item, std::uint32_t hashes,
                                   std::uint64_t block_bits = kBlockBits);

struct BlockedSizing {
    double bits_per_item;
    std::uint32_t hashes;
};
// Smallest bits per item (to 0.1 %) and its best k with
// blocked_false_positive_rate <= p. Cached: a few hundred microseconds the
// first time for a given p, a lookup after. Precondition: 0 < p < 1.
BlockedSizing blocked_sizing(double error_rate, std::uint64_t block_bits = kBlockBits);

// ceil(capacity · bits_per_item) rounded up to whole blocks of `block_bits`.
std::uint64_t blocked_bits(std::uint64_t capacity, double bits_per_item,
                           std::uint64_t block_bits = kBlockBits);

}  // namespace bloomery::bloom
