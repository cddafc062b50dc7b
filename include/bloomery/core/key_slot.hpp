#pragma once
// Redis Cluster's key -> hash slot mapping, bit for bit: CRC16-XMODEM
// (polynomial 0x1021, initial value 0, no reflection) of the key, or of its
// hash tag, modulo 16384. The hash tag is the text between the first '{' and
// the first '}' after it, when that text is not empty ("{user1000}.following"
// and "{user1000}.followers" share a slot; "foo{}{bar}" hashes whole).
//
// Pure functions: no allocation, no state, safe from any thread. They live in
// core, below the store, because the keyspace keeps per-slot key counts in
// cluster mode; the cluster layer (slot ownership, the node map) builds on them.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace bloomery::core {

inline constexpr std::uint32_t kSlotCount = 16384;

// CRC16-XMODEM of `bytes`, as Redis's crc16() (CRC16("123456789") = 0x31C3).
std::uint16_t crc16(std::string_view bytes);

// The part of `key` that is hashed: its hash tag if it has one, else the key.
inline std::string_view hash_tag(std::string_view key) {
    const std::size_t open = key.find('{');
    if (open == std::string_view::npos) return key;
    const std::size_t close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1) return key;
    return key.substr(open + 1, close - open - 1);
}

// The slot of `key`, 0 .. 16383.
inline std::uint16_t key_slot(std::string_view key) {
    // kSlotCount is a power of two: the modulo is a mask, as in Redis.
    return static_cast<std::uint16_t>(crc16(hash_tag(key)) & (kSlotCount - 1));
}

}  // namespace bloomery::core

// The names the cluster code and the keyspace use for them.
namespace bloomery::cluster {
using core::crc16;
using core::hash_tag;
using core::key_slot;
using core::kSlotCount;
}  // namespace bloomery::cluster
