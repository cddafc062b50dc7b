#include "dump_location.hpp"

#include <algorithm>

namespace bloomery::bloom::dump_location {

std::optional<Location> locate(const ScalableFilter& filter, std::uint64_t offset) {
    const std::size_t n = filter.num_layers();
    std::uint64_t start = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t size = filter.layer(i).byte_size();
        if (offset - start < size) return Location{i, offset - start, size};
        start += size;
    }
    return std::nullopt;
}

std::optional<Location> locate_touched(const ScalableFilter& filter, std::uint64_t& offset) {
    std::optional<Location> loc = locate(filter, offset);
    while (loc) {
        const BloomLayer& layer = filter.layer(loc->layer);
        const std::uint64_t word = loc->layer_offset / 8;
        const std::uint64_t next = layer.next_touched(word);
        if (next == word) return loc;
        if (next < layer.num_words()) {
            offset += next * 8 - loc->layer_offset;
            loc->layer_offset = next * 8;
            return loc;
        }
        offset += loc->layer_bytes - loc->layer_offset;
        loc = locate(filter, offset);
    }
    return loc;
}

std::uint64_t chunk_length(const ScalableFilter& filter, const Location& loc, std::uint64_t limit) {
    constexpr std::uint64_t kMaxGapBytes = 4096;
    const BloomLayer& layer = filter.layer(loc.layer);
    const std::uint64_t from = loc.layer_offset;
    const std::uint64_t cap = std::min(loc.layer_bytes, from + limit);
    std::uint64_t end = layer.touched_end(from / 8) * 8;
    while (end < cap) {
        const std::uint64_t next = layer.next_touched(end / 8) * 8;
        if (next >= cap || next - end > kMaxGapBytes) break;
        end = layer.touched_end(next / 8) * 8;
    }
    return std::min(end, cap) - from;
}

}  // namespace bloomery::bloom::dump_location
