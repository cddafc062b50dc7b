#pragma once
// CRC-64/Jones as Redis computes it for DUMP payloads and RDB files
// (reflected polynomial 0x95ac9329ac4bc9b5, initial value 0, no final xor):
// crc64(0, "123456789") = 0xe9c6d914c4b8d9ca. DUMP / RESTORE payloads keep
// Redis's footer, a 2-byte version and this checksum of everything before it
// (persist/dump_payload.hpp).
//
// A pure function: no allocation, no state, safe from any thread.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace bloomery::core {

// The CRC of `bytes` continued from `crc` (0 to start): crc64(crc64(0, a), b)
// equals crc64(0, a + b).
std::uint64_t crc64(std::uint64_t crc, std::string_view bytes);

}  // namespace bloomery::core
