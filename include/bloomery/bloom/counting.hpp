#pragma once
// A counting Bloom filter's layer (Fan, Cao, Almeida, Broder 2000): cells
// are 4-bit counters instead of bits, so an item can be deleted. An add
// increments the item's k cells, a delete decrements them, a lookup answers
// 1 when all k are non-zero. The cells are blocked as the blocked layout's
// bits are (bounds.hpp): 128 cells make a 64-byte block, one cache line, and
// all k cells of an item are in the block chosen by h1, at positions from h2
// (hash.hpp: block_index, block_probe), so an item still touches one line.
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
// gives the cells per item and k, and a layer takes 4 bits per cell.
//
// Thread safety: contains(), load_word() and the getters from any thread at
// any time (words are read with relaxed atomic loads). add(), remove(),
// add_cells() and the setters from one thread at a time: saturating
// increments and decrements do not commute, so whoever records them
// serializes them (one lock per filter) and records them in that order.

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "bloomery/bloom/hash.hpp"

namespace bloomery::bloom {

inline constexpr std::uint32_t kCellBits = 4;
inline constexpr std::uint32_t kCellMax = 15;
inline constexpr std::uint64_t kCellsPerWord = 64 / kCellBits;
inline constexpr std::uint64_t kBlockCells = 128;  // one 64-byte line

struct CountingSizing {
    double cells_per_item;
    std::uint32_t hashes;
};
// The fewest cells per item (and the best k) whose false-positive rate with
// 128-cell blocks is within `error_rate`. Precondition: 0 < p < 1.
CountingSizing counting_sizing(double error_rate);
// ceil(capacity · cells_per_item) rounded up to whole blocks.
std::uint64_t counting_cells(std::uint64_t capacity, double cells_per_item);

class CountingLayer {
public:
    // `cells` a positive multiple of kBlockCells, `hashes` in [1, 128];
    // every cell 0. Throws std::bad_alloc.
    CountingLayer(std::uint64_t cells, std::uint32_t hashes);

    std::uint64_t cells() const { return cells_; }
    std::uint32_t hashes() const { return hashes_; }
    std::uint64_t num_words() const { return cells_ / kCellsPerWord; }
    std::uint64_t byte_size() const { return cells_ / 2; }

    // Every one of the item's k cells is non-zero.
    bool contains(const ItemHash& hash) const;
    // Increments the item's k cells (a cell probed twice, twice; 15 stays).
    // True if one of them was 0 (the item was new).
    bool add(const ItemHash& hash);
    // If every one of the item's cells is non-zero, decrements each (one at
    // 15 stays) and returns true; otherwise changes nothing and returns
    // false (the item was certainly not present).
    bool remove(const ItemHash& hash);
    // BF.MERGE: adds `other`'s cells to these, each saturating at 15.
    // Precondition: the same cells and hashes.
    void add_cells(const CountingLayer& other);

    std::uint32_t cell(std::uint64_t index) const;
    // Cells that are not 0 (what a Bloom filter's set bits are).
    std::uint64_t nonzero_cells() const;

    // Word access for dumps, snapshots and replay: 16 cells per word, cell
    // i of a word in bits 4i..4i+3.
    std::uint64_t load_word(std::uint64_t index) const {
        return words_[index].load(std::memory_order_relaxed);
    }
    void store_word(std::uint64_t index, std::uint64_t value) {
        words_[index].store(value, std::memory_order_relaxed);
    }

private:
    // The item's k cell indexes (all in one block), in probe order.
    void cells_of(const ItemHash& hash, std::uint64_t* out) const;

    std::uint64_t cells_;
    std::uint32_t hashes_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> words_;
};

}  // namespace bloomery::bloom
