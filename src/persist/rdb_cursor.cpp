// Redis's RDB container (Redis src/rdb.c, rdbLoadLen and rdbGenericLoadStringObject;
// LZF as liblzf decompresses it): lengths, strings, the CRC-64.

#include "rdb_cursor.hpp"

#include <cstring>

namespace bloomery::persist::rdb {
namespace {

// Decompresses LZF (liblzf's format, as Redis writes it) into `out`, which
// holds exactly the expected length; false on any malformed token.
bool lzf_decompress(const unsigned char* in, std::size_t in_size, unsigned char* out,
                    std::size_t out_size) {
    std::size_t ip = 0;
    std::size_t op = 0;
    while (ip < in_size) {
        const unsigned ctrl = in[ip++];
        if (ctrl < 32) {  // a literal run of ctrl + 1 bytes
            const std::size_t run = ctrl + 1;
            if (run > in_size - ip || run > out_size - op) return false;
            std::memcpy(out + op, in + ip, run);
            ip += run;
            op += run;
            continue;
        }
        std::size_t length = ctrl >> 5;  // a back reference
        if (length == 7) {
            if (ip >= in_size) return false;
            length += in[ip++];
        }
        if (ip >= in_size) return false;
        const std::size_t back = ((ctrl & 0x1f) << 8) + in[ip++] + 1;
        if (back > op) return false;
        length += 2;
        if (length > out_size - op) return false;
        for (std::size_t i = 0; i < length; ++i, ++op) out[op] = out[op - back];
    }
    return op == out_size;
}

}  // namespace

Crc64::Crc64() {
    constexpr std::uint64_t kPoly = 0x95ac9329ac4bc9b5ull;
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint64_t crc = i;
        for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) != 0 ? kPoly : 0);
        table_[i] = crc;
    }
}

std::uint64_t Crc64::of(const unsigned char* data, std::size_t size) const {
    std::uint64_t crc = 0;
    for (std::size_t i = 0; i < size; ++i) crc = table_[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
    return crc;
}

std::uint64_t Cursor::length(const char* what, bool* encoded) {
    const std::uint64_t start = pos_;
    const std::uint8_t first = u8(what);
    switch (first >> 6) {
        case 0:
            return first & 0x3f;
        case 1:
            return (static_cast<std::uint64_t>(first & 0x3f) << 8) | u8(what);
        case 2:
            if (first == 0x80) return be(4, what);
            if (first == 0x81) return be(8, what);
            fail(start, std::string("unknown length encoding in ") + what);
        default:
            if (encoded == nullptr) {
                fail(start,
                     std::string("an encoded string where a length was expected (") + what + ")");
            }
            *encoded = true;
            return first & 0x3f;
    }
}

void Cursor::read_string(const char* what, std::string* out, std::string_view* raw) {
    bool encoded = false;
    const std::uint64_t start = pos_;
    const std::uint64_t n = length(what, &encoded);
    if (!encoded) {
        need(n, what);
        const auto* at = reinterpret_cast<const char*>(bytes_.data() + pos_);
        if (raw) {
            *raw = std::string_view(at == nullptr ? "" : at, n);
        } else if (out) {
            out->assign(at, n);
        }
        pos_ += n;
        return;
    }
    switch (n) {
        case 0:
        case 1:
        case 2: {  // an integer of 1, 2 or 4 bytes, little-endian, signed
            const std::size_t size = n == 0 ? 1 : (n == 1 ? 2 : 4);
            const std::uint64_t bits = le(size, what);
            const std::uint64_t sign = std::uint64_t{1} << (8 * size - 1);
            const auto value = static_cast<std::int64_t>((bits ^ sign) - sign);
            if (out) *out = std::to_string(value);
            return;
        }
        case 3: {  // LZF
            const std::uint64_t compressed = length(what);
            const std::uint64_t size = length(what);
            need(compressed, what);
            if (size == 0 || compressed == 0 || size / kMaxLzfExpansion > compressed) {
                fail(start, std::string("LZF string of ") + std::to_string(compressed) +
                                " bytes cannot hold " + std::to_string(size) + " (" + what + ")");
            }
            if (out) {
                out->resize(size);
                if (!lzf_decompress(bytes_.data() + pos_, compressed,
                                    reinterpret_cast<unsigned char*>(out->data()), size)) {
                    fail(start, std::string("corrupt LZF-compressed string (") + what + ")");
                }
            }
            pos_ += compressed;
            return;
        }
        default:
            fail(start,
                 std::string("unknown string encoding ") + std::to_string(n) + " (" + what + ")");
    }
}

}  // namespace bloomery::persist::rdb
