#include "bloomery/core/crc64.hpp"

#include <array>
#include <cstring>

namespace bloomery::core {
namespace {

constexpr std::uint64_t kReflectedPolynomial = 0x95ac9329ac4bc9b5ull;

// Eight tables, slicing by eight bytes (as Redis's crcspeed): table[0][i] is
// the CRC of byte i, table[k][i] that of byte i followed by k zero bytes. A
// DUMP payload is up to proto-max-bulk-len (512 MiB), checked on every
// RESTORE.
using Tables = std::array<std::array<std::uint64_t, 256>, 8>;

constexpr Tables make_tables() {
    Tables tables{};
    for (std::uint64_t i = 0; i < 256; ++i) {
        std::uint64_t crc = i;
        for (int bit = 0; bit < 8; ++bit) {
            crc = (crc & 1) != 0 ? (crc >> 1) ^ kReflectedPolynomial : crc >> 1;
        }
        tables[0][i] = crc;
    }
    for (std::size_t k = 1; k < 8; ++k) {
        for (std::size_t i = 0; i < 256; ++i) {
            const std::uint64_t previous = tables[k - 1][i];
            tables[k][i] = (previous >> 8) ^ tables[0][previous & 0xff];
        }
    }
    return tables;
}

constexpr Tables kTables = make_tables();

std::uint64_t load_le64(const unsigned char* p) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
    return v;
}

}  // namespace

std::uint64_t crc64(std::uint64_t crc, std::string_view bytes) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    std::size_t left = bytes.size();
    while (left >= 8) {
        crc ^= load_le64(p);
        crc = kTables[7][crc & 0xff] ^ kTables[6][(crc >> 8) & 0xff] ^
              kTables[5][(crc >> 16) & 0xff] ^ kTables[4][(crc >> 24) & 0xff] ^
              kTables[3][(crc >> 32) & 0xff] ^ kTables[2][(crc >> 40) & 0xff] ^
              kTables[1][(crc >> 48) & 0xff] ^ kTables[0][crc >> 56];
        p += 8;
        left -= 8;
    }
    while (left-- > 0) crc = kTables[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

}  // namespace bloomery::core
