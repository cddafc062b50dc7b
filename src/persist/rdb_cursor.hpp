#pragma once
// Reading Redis's RDB container (rdb_cursor.cpp): a bounds-checked cursor
// over the image that reads its lengths in all four forms and its strings
// raw, integer-encoded or LZF-compressed, and Redis's CRC-64. Every read
// that fails throws rdb::Failure naming the byte offset and what it read.

#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "rdb_format.hpp"

namespace bloomery::persist::rdb {

// Redis's CRC-64: the Jones polynomial, reflected, no final xor.
class Crc64 {
public:
    Crc64();
    std::uint64_t of(const unsigned char* data, std::size_t size) const;

private:
    std::array<std::uint64_t, 256> table_{};
};

// A bounds-checked cursor over the image. Every read names its offset when
// it fails.
class Cursor {
public:
    explicit Cursor(std::span<const unsigned char> bytes) : bytes_(bytes) {}

    std::uint64_t offset() const { return pos_; }
    std::uint64_t left() const { return bytes_.size() - pos_; }
    const unsigned char* at(std::uint64_t offset) const { return bytes_.data() + offset; }

    [[noreturn]] void fail(std::uint64_t offset, std::string reason) const {
        throw Failure{offset, std::move(reason)};
    }
    void need(std::uint64_t n, const char* what) const {
        if (n > left()) {
            fail(pos_, std::string("unexpected end of file (truncated) reading ") + what);
        }
    }
    std::uint8_t u8(const char* what) {
        need(1, what);
        return bytes_[pos_++];
    }
    std::uint64_t le(std::size_t n, const char* what) {
        need(n, what);
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i)
            v |= static_cast<std::uint64_t>(bytes_[pos_ + i]) << (8 * i);
        pos_ += n;
        return v;
    }
    std::uint64_t be(std::size_t n, const char* what) {
        need(n, what);
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i) v = (v << 8) | bytes_[pos_ + i];
        pos_ += n;
        return v;
    }
    void skip(std::uint64_t n, const char* what) {
        need(n, what);
        pos_ += n;
    }
    double f64(const char* what) { return std::bit_cast<double>(le(8, what)); }

    // A length (rdbLoadLen). `encoded` is set for the special string forms
    // (the low six bits then say which) instead of failing.
    std::uint64_t length(const char* what, bool* encoded = nullptr);

    // A string, skipped.
    void skip_string(const char* what) { read_string(what, nullptr); }
    // A string, read in full (decompressed, integers as decimal text).
    std::string string(const char* what) {
        std::string decoded;
        const std::string_view bytes = string_bytes(what, decoded);
        return bytes.data() == decoded.data() ? decoded : std::string(bytes);
    }
    // A string's bytes: a view into the image when it is stored raw, or into
    // `scratch`, which receives it decoded otherwise.
    std::string_view string_bytes(const char* what, std::string& scratch) {
        std::string_view raw;
        read_string(what, &scratch, &raw);
        return raw.data() != nullptr ? raw : std::string_view(scratch);
    }

private:
    // A string: skipped (both null), decoded into `out`, or, when stored
    // raw, seen in place through `raw`.
    void read_string(const char* what, std::string* out, std::string_view* raw = nullptr);

    std::span<const unsigned char> bytes_;
    std::uint64_t pos_ = 0;
};

}  // namespace bloomery::persist::rdb
