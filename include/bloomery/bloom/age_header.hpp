#pragma once
// What describes an expiring filter apart from its words: its geometry, its
// generation and the time of its last shift, as the journal's AGE-CREATE
// record, snapshots and dumps carry it (proto/journal.md, "Expiring
// filters"). Little-endian, 76 bytes:
//   0  char[8] "BLMAGE01"
//   8  u32     k          12 u32 l
//   16 u64     generation items (g)
//   24 u64     slice bits (m)
//   32 f64     error rate
//   40 u64     window in ms (0: a count window)
//   48 u32     block bits (512)
//   52 u64     generation
//   60 u64     time of the last shift (ms)
//   68 u64     XXH64 (seed 0) of the 68 bytes before it
// Decoding checks the length, the checksum and the geometry
// (check_age_geometry): bad bytes are an error, never a filter.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::bloom {

inline constexpr std::size_t kAgeHeaderBytes = 76;

struct AgeHeader {
    AgeGeometry geometry;
    std::uint64_t generation = 0;
    std::uint64_t shifted_ms = 0;
};

std::string encode_age_header(const AgeFilter& filter);
// The header of `filter` at another generation and last shift (a snapshot's
// cut).
std::string encode_age_header(const AgeFilter& filter, std::uint64_t generation,
                              std::uint64_t shifted_ms);
core::Result<AgeHeader> decode_age_header(std::string_view bytes);

// An expiring filter's header with its item counts: BF.SCANDUMP's first
// chunk and the AGE-CREATE record's. The header, then u32 n and n u64
// counts, count i being generation G − i's (n ≤ min(slices, G + 1)).
// What every expiring filter's header begins with.
inline constexpr std::string_view kAgeHeaderMagic = "BLMAGE01";

struct AgeDumpHeader {
    AgeHeader header;
    std::vector<std::uint64_t> counts;
};
std::string encode_age_dump_header(const AgeFilter& filter);
core::Result<AgeDumpHeader> decode_age_dump_header(std::string_view bytes);
// The largest count a generation may claim (loaders refuse more).
inline constexpr std::uint64_t kMaxAgeCount = std::uint64_t{1} << 48;
// A new filter as `dumped` describes it, its counts set, all bits clear.
// Throws std::bad_alloc.
AgeFilterRef create_dumped(const AgeDumpHeader& dumped);
// What encode_age_dump_header() writes of `filter`, unencoded.
AgeDumpHeader dump_header_of(const AgeFilter& filter);

// COPY: a new filter holding what `source` holds (its words copied live:
// an add racing the copy may or may not be in it). Throws std::bad_alloc.
AgeFilterRef copy_age(const AgeFilter& source);
// BF.MERGE: whether two expiring filters line up slice for slice (the same
// shape, generation size, slice bits, error rate and window, and the same
// generation).
bool age_aligned(const AgeFilter& a, const AgeFilter& b);
// The union of `sources`, all aligned: words ORed, each generation's counts
// summed, the latest shift's time. Throws std::bad_alloc.
AgeFilterRef merge_age(std::span<const AgeFilter* const> sources);

// BF.SCANDUMP's data chunks of an expiring filter: chunk j holds the words
// [j·kAgeChunkWords, (j + 1)·kAgeChunkWords), the last one fewer.
inline constexpr std::uint64_t kAgeChunkWords = std::uint64_t{1} << 20;
inline std::uint64_t age_chunks(const AgeFilter& filter) {
    return (filter.num_words() + kAgeChunkWords - 1) / kAgeChunkWords;
}
// Chunk j's bytes: its words, little-endian; empty past the last chunk.
std::string age_chunk(const AgeFilter& filter, std::uint64_t chunk);
// The first chunk from `chunk` on with a word set (age_chunks() if none).
std::uint64_t next_age_chunk(const AgeFilter& filter, std::uint64_t chunk);

}  // namespace bloomery::bloom
