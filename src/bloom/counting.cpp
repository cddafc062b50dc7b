#include "bloomery/bloom/counting.hpp"

#include <algorithm>
#include <cmath>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/params.hpp"

namespace bloomery::bloom {

CountingSizing counting_sizing(double error_rate) {
    const BlockedSizing sizing = blocked_sizing(error_rate, kBlockCells);
    return {sizing.bits_per_item, sizing.hashes};
}

std::uint64_t counting_cells(std::uint64_t capacity, double cells_per_item) {
    const double cells = std::ceil(static_cast<double>(capacity) * cells_per_item);
    // The same bound a layer's bits have, 4 bits per cell; past it, one
    // block more than fits, which check_layer() refuses.
    constexpr std::uint64_t kMaxCells = kMaxLayerBits / kCellBits;
    if (!(cells <= static_cast<double>(kMaxCells))) return kMaxCells + kBlockCells;
    const auto raw = static_cast<std::uint64_t>(cells);
    return std::max<std::uint64_t>(kBlockCells,
                                   (raw + kBlockCells - 1) / kBlockCells * kBlockCells);
}

std::uint64_t cells::saturating_add(std::uint64_t a, std::uint64_t b) {
    if (b == 0) return a;
    std::uint64_t sum = 0;
    for (std::uint64_t c = 0; c < kCellsPerWord; ++c) {
        const std::uint64_t value =
            std::min<std::uint64_t>(kCellMax, std::uint64_t{get(a, c)} + get(b, c));
        sum |= value << (kCellBits * c);
    }
    return sum;
}

}  // namespace bloomery::bloom
