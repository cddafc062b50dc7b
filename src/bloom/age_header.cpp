#include "bloomery/bloom/age_header.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "little_endian.hpp"

namespace bloomery::bloom {

namespace {

constexpr char kMagic[8] = {'B', 'L', 'M', 'A', 'G', 'E', '0', '1'};
constexpr std::size_t kChecked = kAgeHeaderBytes - 8;

}  // namespace

std::string encode_age_header(const AgeFilter& filter) {
    return encode_age_header(filter, filter.generation(), filter.shifted_ms());
}

std::string encode_age_header(const AgeFilter& filter, std::uint64_t generation,
                              std::uint64_t shifted_ms) {
    using little_endian::put_f64;
    using little_endian::put_u32;
    using little_endian::put_u64;
    const AgeGeometry g = filter.geometry();
    std::string out(kMagic, sizeof kMagic);
    put_u32(out, g.shape.k);
    put_u32(out, g.shape.l);
    put_u64(out, g.generation_items);
    put_u64(out, g.slice_bits);
    put_f64(out, g.error_rate);
    put_u64(out, g.window_ms);
    put_u32(out, static_cast<std::uint32_t>(kAgeBlockBits));
    put_u64(out, generation);
    put_u64(out, shifted_ms);
    put_u64(out, XXH64(out.data(), out.size(), 0));
    return out;
}

core::Result<AgeHeader> decode_age_header(std::string_view bytes) {
    if (bytes.size() != kAgeHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
        return core::Error{"not an expiring filter's header"};
    }
    little_endian::Reader in(bytes);
    in.skip(sizeof kMagic);
    AgeHeader header;
    AgeGeometry& g = header.geometry;
    g.shape.k = in.u32();
    g.shape.l = in.u32();
    g.generation_items = in.u64();
    g.slice_bits = in.u64();
    g.error_rate = in.f64();
    g.window_ms = in.u64();
    const std::uint32_t block_bits = in.u32();
    header.generation = in.u64();
    header.shifted_ms = in.u64();
    if (in.u64() != XXH64(bytes.data(), kChecked, 0)) {
        return core::Error{"expiring filter's header checksum mismatch"};
    }
    if (block_bits != kAgeBlockBits) return core::Error{"unknown block size in expiring filter"};
    const std::string_view why = check_age_geometry(g);
    if (!why.empty()) return core::Error{"invalid expiring filter: " + std::string(why)};
    return header;
}

std::string encode_age_dump_header(const AgeFilter& filter) {
    const std::uint64_t generation = filter.generation();
    std::string out = encode_age_header(filter, generation, filter.shifted_ms());
    const std::uint64_t n = std::min<std::uint64_t>(filter.slices(), generation + 1);
    little_endian::put_u32(out, static_cast<std::uint32_t>(n));
    for (std::uint64_t i = 0; i < n; ++i) {
        little_endian::put_u64(out, filter.generation_count(generation - i));
    }
    return out;
}

core::Result<AgeDumpHeader> decode_age_dump_header(std::string_view bytes) {
    if (bytes.size() < kAgeHeaderBytes + 4) return core::Error{"not an expiring filter's header"};
    core::Result<AgeHeader> header = decode_age_header(bytes.substr(0, kAgeHeaderBytes));
    if (!header) return header.failure();
    little_endian::Reader in(bytes.substr(kAgeHeaderBytes));
    const std::uint32_t n = in.u32();
    const AgeHeader& h = *header;
    if (n > std::min<std::uint64_t>(h.geometry.slices(), h.generation + 1) ||
        bytes.size() != kAgeHeaderBytes + 4 + std::size_t{n} * 8) {
        return core::Error{"expiring filter's counts do not match its header"};
    }
    AgeDumpHeader dumped{h, std::vector<std::uint64_t>(n)};
    for (std::uint64_t& count : dumped.counts) {
        count = in.u64();
        if (count > kMaxAgeCount) return core::Error{"expiring filter's count out of range"};
    }
    return dumped;
}

std::string age_chunk(const AgeFilter& filter, std::uint64_t chunk) {
    if (chunk >= age_chunks(filter)) return {};
    const std::uint64_t first = chunk * kAgeChunkWords;
    const std::uint64_t words = std::min(kAgeChunkWords, filter.num_words() - first);
    std::string out;
    out.reserve(words * 8);
    for (std::uint64_t i = 0; i < words; ++i)
        little_endian::put_u64(out, filter.load_word(first + i));
    return out;
}

std::uint64_t next_age_chunk(const AgeFilter& filter, std::uint64_t chunk) {
    const std::uint64_t chunks = age_chunks(filter);
    for (; chunk < chunks; ++chunk) {
        const std::uint64_t first = chunk * kAgeChunkWords;
        const std::uint64_t end = std::min(first + kAgeChunkWords, filter.num_words());
        for (std::uint64_t w = first; w < end; ++w) {
            if (filter.load_word(w) != 0) return chunk;
        }
    }
    return chunks;
}

AgeFilterRef create_dumped(const AgeDumpHeader& dumped) {
    AgeFilterRef filter = AgeFilter::create(dumped.header.geometry, dumped.header.generation,
                                            dumped.header.shifted_ms);
    filter->set_counts(dumped.counts.data(), dumped.counts.size());
    return filter;
}

}  // namespace bloomery::bloom
