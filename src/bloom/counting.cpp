#include "bloomery/bloom/counting.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/params.hpp"

namespace bloomery::bloom {
namespace {

constexpr std::uint64_t kCellMask = (std::uint64_t{1} << kCellBits) - 1;

std::uint32_t cell_of(std::uint64_t word, std::uint64_t index) {
    return static_cast<std::uint32_t>((word >> (kCellBits * (index % kCellsPerWord))) & kCellMask);
}

std::uint64_t with_cell(std::uint64_t word, std::uint64_t index, std::uint64_t value) {
    const unsigned shift = kCellBits * static_cast<unsigned>(index % kCellsPerWord);
    return (word & ~(kCellMask << shift)) | (value << shift);
}

// Per nibble: 1 where the 4-bit cell is non-zero, in its lowest bit.
std::uint64_t nonzero_nibbles(std::uint64_t word) {
    word |= word >> 2;
    word |= word >> 1;
    return word & 0x1111111111111111ull;
}

}  // namespace

CountingSizing counting_sizing(double error_rate) {
    const BlockedSizing sizing = blocked_sizing(error_rate, kBlockCells);
    return {sizing.bits_per_item, sizing.hashes};
}

std::uint64_t counting_cells(std::uint64_t capacity, double cells_per_item) {
    const double cells = std::ceil(static_cast<double>(capacity) * cells_per_item);
    // The same bound a layer's bits have: 4 bits per cell.
    constexpr std::uint64_t kMaxCells = kMaxLayerBits / kCellBits;
    if (!(cells < static_cast<double>(kMaxCells))) return kMaxCells;
    const auto raw = static_cast<std::uint64_t>(cells);
    return std::max<std::uint64_t>(kBlockCells,
                                   (raw + kBlockCells - 1) / kBlockCells * kBlockCells);
}

CountingLayer::CountingLayer(std::uint64_t cells, std::uint32_t hashes)
    : cells_(cells),
      hashes_(hashes),
      words_(std::make_unique<std::atomic<std::uint64_t>[]>(cells / kCellsPerWord)) {}

void CountingLayer::cells_of(const ItemHash& hash, std::uint64_t* out) const {
    const std::uint64_t first = block_index(hash, cells_ / kBlockCells) * kBlockCells;
    BlockProbes probes(hash);
    for (std::uint32_t i = 0; i < hashes_; ++i) out[i] = first + (probes.next() % kBlockCells);
}

bool CountingLayer::contains(const ItemHash& hash) const {
    std::uint64_t cells[kMaxHashes];
    cells_of(hash, cells);
    for (std::uint32_t i = 0; i < hashes_; ++i) {
        if (cell_of(load_word(cells[i] / kCellsPerWord), cells[i]) == 0) return false;
    }
    return true;
}

bool CountingLayer::add(const ItemHash& hash) {
    std::uint64_t cells[kMaxHashes];
    cells_of(hash, cells);
    bool was_zero = false;
    for (std::uint32_t i = 0; i < hashes_; ++i) {
        const std::uint64_t at = cells[i] / kCellsPerWord;
        const std::uint64_t word = load_word(at);
        const std::uint32_t value = cell_of(word, cells[i]);
        was_zero |= value == 0;
        if (value < kCellMax) store_word(at, with_cell(word, cells[i], value + 1));
    }
    return was_zero;
}

bool CountingLayer::remove(const ItemHash& hash) {
    if (!contains(hash)) return false;
    std::uint64_t cells[kMaxHashes];
    cells_of(hash, cells);
    for (std::uint32_t i = 0; i < hashes_; ++i) {
        const std::uint64_t at = cells[i] / kCellsPerWord;
        const std::uint64_t word = load_word(at);
        const std::uint32_t value = cell_of(word, cells[i]);
        // A cell this item probes twice is decremented twice, as its add
        // incremented it twice; never below 0, and 15 stays.
        if (value != 0 && value < kCellMax) store_word(at, with_cell(word, cells[i], value - 1));
    }
    return true;
}

void CountingLayer::add_cells(const CountingLayer& other) {
    for (std::uint64_t w = 0; w < num_words(); ++w) {
        const std::uint64_t a = load_word(w);
        const std::uint64_t b = other.load_word(w);
        if (b == 0) continue;
        std::uint64_t sum = 0;
        for (std::uint64_t c = 0; c < kCellsPerWord; ++c) {
            const std::uint64_t value =
                std::min<std::uint64_t>(kCellMax, std::uint64_t{cell_of(a, c)} + cell_of(b, c));
            sum |= value << (kCellBits * c);
        }
        store_word(w, sum);
    }
}

std::uint32_t CountingLayer::cell(std::uint64_t index) const {
    return cell_of(load_word(index / kCellsPerWord), index);
}

std::uint64_t CountingLayer::nonzero_cells() const {
    std::uint64_t count = 0;
    for (std::uint64_t w = 0; w < num_words(); ++w) {
        count += static_cast<std::uint64_t>(std::popcount(nonzero_nibbles(load_word(w))));
    }
    return count;
}

}  // namespace bloomery::bloom
