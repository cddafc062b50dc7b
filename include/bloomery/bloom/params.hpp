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

// Swamidass–Baldi estimate of distinct items: (m/k)·ln(m/m0), m bits of which
// m0 are zero. When the filter is saturated (m0 == 0) the estimate is computed
// with m0 = 1, the largest finite answer, instead of infinity. Never NaN or inf.
double estimate_items(std::uint64_t bits, std::uint32_t hashes, std::uint64_t zero_bits);

}  // namespace bloomery::bloom
