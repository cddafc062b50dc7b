#include "bloomery/bloom/age_header.hpp"

#include <xxhash.h>

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

}  // namespace bloomery::bloom
