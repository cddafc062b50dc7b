#include "bloomery/bloom/age_header.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "little_endian.hpp"

namespace bloomery::bloom {

namespace {

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
    std::string out(kAgeHeaderMagic);
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
    if (bytes.size() != kAgeHeaderBytes || !bytes.starts_with(kAgeHeaderMagic)) {
        return core::Error{"not an expiring filter's header"};
    }
    little_endian::Reader in(bytes);
    in.skip(kAgeHeaderMagic.size());
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

AgeDumpHeader dump_header_of(const AgeFilter& filter) {
    AgeDumpHeader dumped;
    dumped.header = {filter.geometry(), filter.generation(), filter.shifted_ms()};
    const std::uint64_t generation = dumped.header.generation;
    dumped.counts.resize(std::min<std::uint64_t>(filter.slices(), generation + 1));
    for (std::uint64_t i = 0; i < dumped.counts.size(); ++i) {
        dumped.counts[i] = filter.generation_count(generation - i);
    }
    return dumped;
}

std::string encode_age_dump_header(const AgeFilter& filter) {
    const AgeDumpHeader dumped = dump_header_of(filter);
    std::string out = encode_age_header(filter, dumped.header.generation, dumped.header.shifted_ms);
    little_endian::put_u32(out, static_cast<std::uint32_t>(dumped.counts.size()));
    for (const std::uint64_t count : dumped.counts) little_endian::put_u64(out, count);
    return out;
}

AgeFilterRef copy_age(const AgeFilter& source) {
    const AgeFilter* const one[] = {&source};
    return merge_age(one);
}

bool age_aligned(const AgeFilter& a, const AgeFilter& b) {
    const AgeGeometry x = a.geometry();
    const AgeGeometry y = b.geometry();
    return x.shape.k == y.shape.k && x.shape.l == y.shape.l &&
           x.generation_items == y.generation_items && x.slice_bits == y.slice_bits &&
           x.error_rate == y.error_rate && x.window_ms == y.window_ms &&
           a.generation() == b.generation();
}

AgeFilterRef merge_age(std::span<const AgeFilter* const> sources) {
    AgeDumpHeader merged = dump_header_of(*sources[0]);
    for (const AgeFilter* source : sources.subspan(1)) {
        const AgeDumpHeader other = dump_header_of(*source);
        merged.header.shifted_ms = std::max(merged.header.shifted_ms, other.header.shifted_ms);
        for (std::size_t i = 0; i < merged.counts.size() && i < other.counts.size(); ++i) {
            merged.counts[i] = std::min(merged.counts[i] + other.counts[i], kMaxAgeCount);
        }
    }
    AgeFilterRef out = create_dumped(merged);
    constexpr std::uint64_t kStep = 4096;
    std::vector<std::uint64_t> words(kStep);
    std::vector<std::uint64_t> more(kStep);
    for (std::uint64_t first = 0; first < out->num_words(); first += kStep) {
        const std::uint64_t n = std::min(kStep, out->num_words() - first);
        sources[0]->copy_words(first, n, words.data());
        for (const AgeFilter* source : sources.subspan(1)) {
            source->copy_words(first, n, more.data());
            for (std::uint64_t i = 0; i < n; ++i) words[i] |= more[i];
        }
        // Zero words are left unwritten: a sparse filter's pages stay
        // uncommitted.
        for (std::uint64_t i = 0; i < n; ++i) {
            if (words[i] != 0) out->store_words(first + i, 1, &words[i]);
        }
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
