#pragma once
// Private to src/bloom: where BF.SCANDUMP's chunks lie in a filter's layers
// (dump.cpp), skipping the untouched regions of large layers.

#include <cstddef>
#include <cstdint>
#include <optional>

#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::bloom::dump_location {

struct Location {
    std::size_t layer;
    std::uint64_t layer_offset;  // byte offset inside the layer
    std::uint64_t layer_bytes;
};

// Finds the layer holding byte `offset` of the concatenated bit arrays;
// nothing if the offset lies past the last layer.
std::optional<Location> locate(const ScalableFilter& filter, std::uint64_t offset);

// Untouched regions of a layer are zero, and LOADCHUNK puts a chunk where
// its iterator says into a filter made zeroed from the header (bloomery's
// and RedisBloom's alike), so SCANDUMP sends no chunk for them: from byte
// `offset`, the first byte in a touched region (moving `offset` there);
// nothing once no layer after it holds one.
std::optional<Location> locate_touched(const ScalableFilter& filter, std::uint64_t& offset);

// The length of a chunk from `loc`: at most `limit` bytes, through the
// touched regions that follow one another with gaps of at most 4 KiB (a
// gap sent costs less than a SCANDUMP round trip), to the layer's end at
// most. A full layer, or one without a summary, gives min(limit, the rest).
std::uint64_t chunk_length(const ScalableFilter& filter, const Location& loc, std::uint64_t limit);

}  // namespace bloomery::bloom::dump_location
