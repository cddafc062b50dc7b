#pragma once
// The counting Bloom filter (Fan, Cao, Almeida, Broder 2000): a layer of
// Layout::counting (bounds.hpp) whose cells are 4-bit counters instead of
// bits, so an item can be deleted. An add increments the item's k cells, a
// delete decrements them, a lookup answers 1 when all k are non-zero. The
// cells are blocked as the blocked layout's bits are: 128 cells make a
// 512-bit block, one cache line, and all k cells of an item are in the block
// chosen by h1, at positions from h2 (hash.hpp: block_index, block_probe),
// so an item still touches one line. A layer's `bits` are its storage bits,
// 4 per cell.
//
// Counters saturate: one that reached 15 stays there (a decrement cannot
// know how many adds it stands for), and a decrement never takes a counter
// below 0. Deleting an item that was never added decrements cells other
// items need, and can make them answer 0: a false negative. Only delete
// what was added.
//
// Sizing: a cell is non-zero exactly where a Bloom filter of the same cells
// would have its bit set, so the false-positive rate is the blocked one with
// 128-cell blocks (params.hpp: blocked_false_positive_rate); counting_sizing
// gives the cells per item and k.
//
// This header holds the sizing and the cell arithmetic; BloomLayer
// (filter.hpp) stores the cells, and says which calls must be serialized.

#include <bit>
#include <cstdint>

namespace bloomery::bloom {

inline constexpr std::uint32_t kCellBits = 4;
inline constexpr std::uint32_t kCellMax = 15;
inline constexpr std::uint64_t kCellsPerWord = 64 / kCellBits;
inline constexpr std::uint64_t kBlockCells = 128;  // one 64-byte line
// Counting layers are refused below this error rate: 128-cell blocks need
// more than 4× the classic bits there (params.hpp), and a scaling counting
// filter stops growing before its layers' rates fall under it.
inline constexpr double kMinCountingErrorRate = 1e-7;

struct CountingSizing {
    double cells_per_item;
    std::uint32_t hashes;
};
// The fewest cells per item (and the best k) whose false-positive rate with
// 128-cell blocks is within `error_rate`. Precondition: 0 < p < 1.
CountingSizing counting_sizing(double error_rate);
// ceil(capacity · cells_per_item) rounded up to whole blocks; more than
// kMaxLayerBits hold (one block more) when they do not fit.
std::uint64_t counting_cells(std::uint64_t capacity, double cells_per_item);

namespace cells {

inline constexpr std::uint64_t kMask = (std::uint64_t{1} << kCellBits) - 1;

// Cell `index` (of the layer; its word is `word`).
inline std::uint32_t get(std::uint64_t word, std::uint64_t index) {
    return static_cast<std::uint32_t>((word >> (kCellBits * (index % kCellsPerWord))) & kMask);
}
inline std::uint64_t with(std::uint64_t word, std::uint64_t index, std::uint64_t value) {
    const unsigned shift = kCellBits * static_cast<unsigned>(index % kCellsPerWord);
    return (word & ~(kMask << shift)) | (value << shift);
}
// Per cell: 1 in its lowest bit where the cell is non-zero.
inline std::uint64_t nonzero(std::uint64_t word) {
    word |= word >> 2;
    word |= word >> 1;
    return word & 0x1111111111111111ull;
}
inline int count_nonzero(std::uint64_t word) {
    return std::popcount(nonzero(word));
}
// Each cell of a and b added, saturating at kCellMax.
std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b);

}  // namespace cells

}  // namespace bloomery::bloom
