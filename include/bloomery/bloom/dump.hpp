#pragma once
// Filter serialization for BF.SCANDUMP / BF.LOADCHUNK (and reused by snapshots).
//
// Iterator protocol, as RedisBloom's: SCANDUMP key 0 answers (1, header);
// each later call answers (next, chunk) where next = (end byte offset of the
// chunk in the concatenated layer bit arrays) + 1, and finally (0, "").
// LOADCHUNK key 1 header creates the filter; LOADCHUNK key next chunk writes
// the chunk at offset next - 1 - payload_length.
//
// Two encodings, both specified in proto/resp.md ("BF.SCANDUMP /
// BF.LOADCHUNK payloads"); a filter dumps in the one of its hash scheme, and
// a header is read as whichever it is (parse_header tells them apart):
// - RedisBloom-scheme filters: RedisBloom 2.x's own, so a filter migrated
//   from RedisBloom dumps back into it unchanged (little-endian, packed):
//   header = u64 size (items in all sub-filters), u32 nfilters, u32 options
//            (redisbloom.hpp: NOROUND 1, FORCE64 4, NOSCALING 8), u32 growth
//            (the expansion), per sub-filter 53 bytes: u64 bytes, u64 bits,
//            u64 size (items), f64 error, f64 bpe, u32 hashes, u64 entries
//            (capacity), u8 n2.
//   chunk  = raw bytes of the bit arrays (no checksum), at any byte offset,
//            at most 16 MiB and within one sub-filter, as RedisBloom's
//            SBChain_GetEncodedChunk cuts them.
// - bloomery's, the header little-endian, 40 [+ 8] + 40·layers + 8 bytes in
//   version 2:
//     0  char[8] "BLMDUMP1"
//     8  u32     version: 2 (1 is still read: no layout fields, all classic)
//     12 f64     options.error_rate
//     20 u64     options.capacity
//     28 u32     options.expansion
//     32 u32     flags: bit 0 = nonscaling, bit 1 = blocked layout for new
//                layers, bit 2 = automatic layout for new layers, bit 4 =
//                counting (version 2; at most one of bits 1, 2 and 4), bit 3 =
//                tightening below (version 2); others 0
//     36 u32     layer count
//     40 f64     options.tightening, only with flag bit 3 (never 0.5)
//     .. per layer: u64 capacity, f64 error_rate, u64 bits, u32 hashes,
//                u32 layout (version 2: 0 classic, 1 blocked, 3 counting:
//                every layer of a counting filter, and only there), u64 items
//     .. u64     XXH64 (seed 0) of every byte before it
//   Chunk: payload words (little-endian), then u64 XXH64 (seed 0) of
//   (u64 byte offset of the payload in the concatenated layers, payload).
//   Hashing the offset with the payload means a valid chunk replayed at
//   another iterator is rejected, not written to the wrong place.
// Every decode checks lengths, ranges and checksums: bad input is an error
// message, never a crash or a half-written filter.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::bloom {

inline constexpr std::size_t kMaxDumpChunkBytes = 16 * 1024 * 1024;

std::string encode_header(const ScalableFilter& filter);

// A header's content, validated against bounds.hpp.
struct DumpHeader {
    FilterOptions options;
    std::vector<LayerGeometry> layers;
    std::vector<std::uint64_t> items;  // per layer
};

// Which format a payload offered as a header is in, by its shape alone
// (nothing else in it is checked): bloomery's (it starts with the BLMDUMP1
// magic), RedisBloom's (no magic, and exactly as long as the sub-filter
// count at its bytes 8..11 says), or neither: no header at all.
enum class HeaderFormat { bloomery, redisbloom, unknown };
HeaderFormat header_format(std::string_view bytes);

// Parses and validates a header: bloomery's (checksum first, then every
// field against the bounds every other path uses), or RedisBloom's (a
// payload without bloomery's magic whose length is 20 + 53 · the sub-filter
// count it names: RedisBloom's own checks, then the same bounds). Bad input
// fails with a reason without an "ERR " prefix; RedisBloom-format problems use
// RedisBloom's wording where it refuses them too. Allocates nothing beyond
// the header's own description.
core::Result<DumpHeader> parse_header(std::string_view bytes);
// A new, all-zero filter with the header's geometry and item counts, its
// bytes reserved against `maxmemory` (0: no limit) before they are allocated:
// an empty reference if they would pass it. Throws std::bad_alloc. The
// caller checks --max-filter-bytes first (filter_bytes).
FilterRef build_filter(const DumpHeader& header, std::uint64_t maxmemory = 0);
// parse_header + a whole-filter bound (bit arrays of all layers at most
// `max_filter_bytes`, 0 = unbounded) + build_filter. The filter (never an
// empty reference), or why it was refused (no "ERR " prefix).
core::Result<FilterRef> decode_header(std::string_view bytes, std::uint64_t max_filter_bytes);

struct DumpChunk {
    std::int64_t next_iter;  // 0 when the dump is complete
    std::string data;        // empty when complete
};

// iter 0: the header; iter >= 1: the chunk starting at byte offset iter - 1.
// Chunks are at most `max_chunk_bytes` of payload (bloomery's: rounded down
// to words, at least one word, from a word-aligned offset; RedisBloom's: any
// byte offset, at least one byte) and never cross a layer boundary. The
// untouched regions of a large layer (filter.hpp), all zero, are skipped:
// the chunk starts at the first touched byte at or after the iter and
// stops before a long untouched stretch, its next iter just after it
// (LOADCHUNK places a chunk by its iter, in a filter made zeroed). An iter
// past the end, or past the last touched byte (or, for bloomery's format,
// not word aligned + 1) yields {0, ""}.
DumpChunk dump_chunk(const ScalableFilter& filter, std::int64_t iter,
                     std::size_t max_chunk_bytes = kMaxDumpChunkBytes);

// The bits a data chunk of dump_chunk(filter, ...) carries: the chunk
// without bloomery's trailing checksum (a RedisBloom-scheme chunk is all
// bits).
std::string_view chunk_bits(const ScalableFilter& filter, std::string_view chunk);

// Where a data chunk of dump_chunk() goes in a filter, once checked.
struct ChunkTarget {
    std::size_t layer = 0;
    std::uint64_t byte_offset = 0;  // in that layer (a multiple of 8 for bloomery's chunks)
    std::string_view payload;       // the bytes to set, into the chunk
};
// Checks a data chunk against `filter`, in the format of its scheme
// (bloomery's: iterator, length, alignment, bounds, checksum; RedisBloom's:
// iterator and bounds, as RedisBloom checks them) without changing anything.
// Where it goes, or why it does not fit (no "ERR " prefix).
core::Result<ChunkTarget> check_chunk(const ScalableFilter& filter, std::int64_t iter,
                                      std::string_view chunk);
// Sets the chunk's bits in the filter: bits only go 0 -> 1, so a filter that
// already held bits there keeps them, chunks and adds commute (replay in any
// order gives the same bits), and loading never makes an item answer 0.
// Safe beside concurrent adds. Layers never shrink, so a target checked
// earlier against the same filter still fits. A counting filter's cells are
// set to the chunk's instead (under ScalableFilter::serialize_changes()).
void apply_chunk(ScalableFilter& filter, const ChunkTarget& target);
// check_chunk, then apply_chunk; check_chunk's reason if it does not fit.
core::Status load_chunk(ScalableFilter& filter, std::int64_t iter, std::string_view chunk);

}  // namespace bloomery::bloom
