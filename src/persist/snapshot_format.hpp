#pragma once
// Private to src/persist: the constants of proto/snapshot.md and the helpers
// the writer and the reader share. Every integer on disk is little-endian and
// is encoded or decoded byte by byte (or with an explicit host-order check),
// never by copying a host struct.

#include <xxhash.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <system_error>

namespace bloomery::persist::format {

inline constexpr std::size_t kMagicBytes = 8;
// magic, version, created_at_ms, journal id, journal offset (the last two
// since version 3)
inline constexpr std::size_t kFileHeaderBytes = 8 + 4 + 8 + 8 + 8;

inline constexpr std::uint8_t kRecordFilter = 0x01;
// A Cuckoo filter: u32 key length, key, i64 deadline, u64 filter id, u64
// the number of its last change, its 38-byte CF.SCANDUMP header, then every
// sub-filter's slots, oldest first, then the record checksum.
inline constexpr std::uint8_t kRecordCuckoo = 0x02;
// An expiring filter: u32 key length, key, i64 deadline, u64 filter id, its
// 76-byte header (bloom/age_header.hpp) at the cut, u32 n and the counts of
// generations G, G - 1, ..., G - n + 1, its words as runs, the checksum.
inline constexpr std::uint8_t kRecordAge = 0x03;
inline constexpr std::uint8_t kRecordEnd = 0xFF;

// A filter record's byte after the expansion: bit 0 NONSCALING, bit 1 (from
// version 4 on) a tightening ratio other than the default follows the scheme
// fields, so a filter at the default is written as before the ratio could be
// chosen.
inline constexpr std::uint8_t kOptionNonscaling = 1;
inline constexpr std::uint8_t kOptionTightening = 2;

// u64 capacity, f64 error_rate, u64 bits, u32 hashes, u8 layout, u64 items
// (version 1: no layout byte).
inline constexpr std::size_t kLayerHeaderBytes = 8 + 8 + 8 + 4 + 1 + 8;
// type, u64 record count, u64 file checksum.
inline constexpr std::size_t kEndRecordBytes = 1 + 8 + 8;
inline constexpr std::size_t kChecksumBytes = 8;

// Filter words move between the filter and the file in chunks of this many
// words (1 MiB), so neither side ever holds a second copy of a whole filter.
inline constexpr std::size_t kWordChunk = (1u << 20) / 8;
// Size of the writer's and the reader's byte buffers.
inline constexpr std::size_t kIoBufferBytes = 1u << 20;

inline void put_u8(unsigned char* out, std::uint8_t v) {
    out[0] = v;
}
inline void put_u16(unsigned char* out, std::uint16_t v) {
    out[0] = static_cast<unsigned char>(v);
    out[1] = static_cast<unsigned char>(v >> 8);
}
inline std::uint16_t get_u16(const unsigned char* in) {
    return static_cast<std::uint16_t>(in[0] | (in[1] << 8));
}
inline void put_u32(unsigned char* out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline void put_u64(unsigned char* out, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline std::uint32_t get_u32(const unsigned char* in) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(in[i]) << (8 * i);
    return v;
}
inline std::uint64_t get_u64(const unsigned char* in) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(in[i]) << (8 * i);
    return v;
}

// In-place conversion of a word array between host order and little-endian
// (its own inverse). A no-op on little-endian hosts, which is every host we
// ship on; the loop keeps big-endian hosts correct.
inline void words_host_to_little(std::uint64_t* words, std::size_t count) {
    if constexpr (std::endian::native == std::endian::little) {
        (void)words;
        (void)count;
    } else {
        for (std::size_t i = 0; i < count; ++i) {
            unsigned char bytes[8];
            put_u64(bytes, words[i]);
            std::memcpy(&words[i], bytes, 8);
        }
    }
}
inline void words_little_to_host(std::uint64_t* words, std::size_t count) {
    if constexpr (std::endian::native == std::endian::little) {
        (void)words;
        (void)count;
    } else {
        for (std::size_t i = 0; i < count; ++i) {
            unsigned char bytes[8];
            std::memcpy(bytes, &words[i], 8);
            words[i] = get_u64(bytes);
        }
    }
}

// RAII wrapper of libxxhash's streaming XXH64 state (seed 0). The state is
// heap-allocated by the library because its layout is only public with
// XXH_STATIC_LINKING_ONLY, which would tie us to one library version.
class Xxh64 {
public:
    Xxh64() : state_(XXH64_createState()) {
        if (!state_) throw std::bad_alloc();
        reset();
    }
    void reset() { XXH64_reset(state_.get(), 0); }
    void update(const void* data, std::size_t size) {
        if (size != 0) XXH64_update(state_.get(), data, size);
    }
    std::uint64_t digest() const { return XXH64_digest(state_.get()); }

private:
    struct Free {
        void operator()(XXH64_state_t* state) const { XXH64_freeState(state); }
    };
    std::unique_ptr<XXH64_state_t, Free> state_;
};

// A key as it appears in messages: quoted, printable ASCII kept, everything
// else (and quotes and backslashes) as \xNN, at most 64 bytes shown, so a
// binary or hostile key can neither break a log line nor flood it.
inline std::string printable_key(std::string_view key) {
    static constexpr std::size_t kMaxShown = 64;
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "'";
    const std::size_t shown = key.size() < kMaxShown ? key.size() : kMaxShown;
    for (std::size_t i = 0; i < shown; ++i) {
        const auto c = static_cast<unsigned char>(key[i]);
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 0xf];
        }
    }
    out += '\'';
    if (shown < key.size()) out += "... (" + std::to_string(key.size()) + " bytes)";
    return out;
}

// strerror() text for an errno value, thread-safe (unlike strerror()).
inline std::string errno_text(int error_number) {
    return std::generic_category().message(error_number);
}

}  // namespace bloomery::persist::format
