#include "bloomery/core/key_slot.hpp"

#include <array>

namespace bloomery::core {
namespace {

// The byte-at-a-time table of Redis's crc16.c, computed at compile time
// instead of pasted: entry i is the CRC of the byte i shifted through the
// polynomial eight times.
constexpr std::array<std::uint16_t, 256> make_table() {
    std::array<std::uint16_t, 256> table{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t crc = i << 8;
        for (int bit = 0; bit < 8; ++bit) {
            crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
        }
        table[i] = static_cast<std::uint16_t>(crc);
    }
    return table;
}

constexpr std::array<std::uint16_t, 256> kTable = make_table();
static_assert(kTable[1] == 0x1021 && kTable[255] == 0x1ef0, "Redis's crc16tab");

}  // namespace

std::uint16_t crc16(std::string_view bytes) {
    std::uint16_t crc = 0;
    for (const char c : bytes) {
        const auto byte = static_cast<std::uint8_t>(c);
        crc = static_cast<std::uint16_t>((crc << 8) ^ kTable[((crc >> 8) ^ byte) & 0xff]);
    }
    return crc;
}

}  // namespace bloomery::core
