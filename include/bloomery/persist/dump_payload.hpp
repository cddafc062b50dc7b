#pragma once
// DUMP / RESTORE payloads (proto/dump.md): one filter, serialized as a
// snapshot stores it, in Redis's DUMP shape:
//
//   payload = value  u16 version  u64 crc64
//   value   = u8 type (0x01, a Bloom filter), then the filter's fields of a
//             snapshot record (proto/snapshot.md, from error_rate through the
//             last layer's words): options, hash scheme, every layer's
//             geometry, item count and bits (as runs of non-zero words
//             since version 0xBF02, every word before);
//             or u8 type 0x02 (a Cuckoo filter), its 38-byte CF.SCANDUMP
//             header, then every sub-filter's slots, oldest first
//
// Integers little-endian; crc64 is core/crc64.hpp's (Redis's) over every
// byte before it. The version is bloomery's own (kDumpPayloadVersion, or
// kDumpPayloadWholeVersion from earlier builds): Redis refuses it (above any
// RDB version), and bloomery refuses every other, so a payload from Redis,
// or from a bloomery that encodes differently, is answered "DUMP payload
// version or checksum are wrong", as Redis answers a payload it cannot read.
//
// Thread safety: every function may run beside concurrent adds to the
// filter it encodes (bits only go 0 -> 1; the layer count is read once by
// the caller).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/core/result.hpp"
#include "bloomery/cuckoo/cuckoo_filter.hpp"

namespace bloomery::persist {

// 0xBF marks bloomery, the low byte is the encoding's version: 2, a Bloom
// filter's layers as runs of non-zero words (what this build writes).
inline constexpr std::uint16_t kDumpPayloadVersion = 0xBF02;
// 1: every word of every layer (still read). Cuckoo payloads, whose
// encoding did not change, are still written with it.
inline constexpr std::uint16_t kDumpPayloadWholeVersion = 0xBF01;
// The value's type byte, as a snapshot's filter record type.
inline constexpr std::uint8_t kDumpTypeBloom = 0x01;
inline constexpr std::uint8_t kDumpTypeCuckoo = 0x02;
// u16 version and u64 CRC64 after the value.
inline constexpr std::size_t kDumpFooterBytes = 2 + 8;

// Appends the payload of `filter`'s first `num_layers` layers (num_layers <=
// filter.num_layers(), read once by the caller) to `out`, its size known
// only once written (the runs of a filter being added to). The item counts
// are read before any word (an add racing the dump may have set bits it
// does not count, never the reverse). Returns false, `out` as it was, if the
// payload would pass `max_bytes`; it then stops there. Throws
// std::bad_alloc.
bool append_dump_payload(const bloom::ScalableFilter& filter, std::size_t num_layers,
                         std::string& out, std::uint64_t max_bytes = UINT64_MAX);

// Redis's verifyDumpPayload: at least the footer, a version this build
// reads, and the checksum. False: "DUMP payload version or checksum are
// wrong".
bool verify_dump_payload(std::string_view payload);

// A verified payload's value, parsed and checked against the bounds every
// path shares (bloom/bounds.hpp, as BF.LOADCHUNK's header): its options and
// layers, and where each layer's words lie in the payload.
struct DumpValue {
    bloom::FilterOptions options;
    std::vector<bloom::LayerGeometry> layers;
    std::vector<std::uint64_t> items;  // per layer
    // Per layer, in the payload: its runs (runs), or its bits/8 bytes.
    std::vector<std::string_view> layer_words;
    bool runs = true;  // kDumpPayloadVersion; false: kDumpPayloadWholeVersion
};

// Parses the value of a payload verify_dump_payload() accepted. Fails (the
// reason is for logs and tests; clients are told "Bad data format", as
// Redis tells them) if anything is malformed or out of bounds: an unknown
// type, a field out of range, a length past the end, bytes left over.
// Allocates nothing beyond the description.
core::Result<DumpValue> parse_dump_value(std::string_view payload);

// The filter a parsed value describes, bits and counts included, with a fresh
// id; its bytes reserved against `maxmemory` (0: no limit) before they are
// allocated: an empty reference if they would pass it. Throws std::bad_alloc.
// The caller checks --max-filter-bytes first (bloom::filter_bytes).
bloom::FilterRef build_dump_filter(const DumpValue& value, std::uint64_t maxmemory = 0);

// ---- Cuckoo filters ----
// The payload of a Cuckoo filter (a copy its caller took under the
// filter's lock). Throws std::bad_alloc.
std::string cuckoo_dump_payload(const cuckoo::CuckooFilter& filter);
// The type byte of a payload verify_dump_payload() accepted (0: empty).
std::uint8_t dump_value_type(std::string_view payload);
// The Cuckoo filter of a verified payload of type kDumpTypeCuckoo: its
// header as CF.LOADCHUNK checks one, slots of exactly the header's size,
// at most `max_bytes` of them. Fails (the reason for logs; clients get
// "Bad data format") with nothing allocated beyond the check.
core::Result<cuckoo::CuckooFilter> parse_dump_cuckoo(std::string_view payload,
                                                     std::uint64_t max_bytes);

}  // namespace bloomery::persist
