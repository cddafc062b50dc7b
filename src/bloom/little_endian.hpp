#pragma once
// Private to src/bloom: little-endian fields of the dump formats (dump.cpp,
// age_header.cpp).

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace bloomery::bloom::little_endian {

// Little-endian conversion. On little-endian hosts (all we ship on) these are
// plain copies the compiler turns into single moves.
inline std::uint64_t to_le(std::uint64_t v) {
    if constexpr (std::endian::native == std::endian::big) return __builtin_bswap64(v);
    return v;
}
inline std::uint32_t to_le(std::uint32_t v) {
    if constexpr (std::endian::native == std::endian::big) return __builtin_bswap32(v);
    return v;
}

inline void put_u32(std::string& out, std::uint32_t v) {
    v = to_le(v);
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
inline void put_u64(std::string& out, std::uint64_t v) {
    v = to_le(v);
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
inline void put_f64(std::string& out, double v) {
    put_u64(out, std::bit_cast<std::uint64_t>(v));
}

// Bounds are checked by the caller (exact total length) before any read.
class Reader {
public:
    explicit Reader(std::string_view bytes) : bytes_(bytes) {}
    std::uint8_t u8() { return static_cast<std::uint8_t>(bytes_[pos_++]); }
    std::uint32_t u32() {
        std::uint32_t v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof v);
        pos_ += sizeof v;
        return to_le(v);
    }
    std::uint64_t u64() {
        std::uint64_t v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof v);
        pos_ += sizeof v;
        return to_le(v);
    }
    double f64() { return std::bit_cast<double>(u64()); }
    void skip(std::size_t n) { pos_ += n; }

private:
    std::string_view bytes_;
    std::size_t pos_ = 0;
};

}  // namespace bloomery::bloom::little_endian
