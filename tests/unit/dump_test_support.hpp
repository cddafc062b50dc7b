#pragma once
// What the DUMP / RESTORE tests share (dump_test.cpp, key_commands_test.cpp).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/core/crc64.hpp"
#include "bloomery/persist/dump_payload.hpp"

namespace bloomery::testing {

// Every BF.SCANDUMP piece of a filter (header, then chunks).
inline std::vector<std::string> scandump(const bloom::ScalableFilter& filter) {
    std::vector<std::string> pieces;
    for (std::int64_t iter = 0;;) {
        bloom::DumpChunk chunk = bloom::dump_chunk(filter, iter);
        if (chunk.next_iter == 0) break;
        pieces.push_back(std::move(chunk.data));
        iter = chunk.next_iter;
    }
    return pieces;
}

// The payload with its footer made again: a valid version and CRC64 over
// whatever the value now holds, so the value's own checks are reached.
inline std::string refooted(std::string value_bytes) {
    value_bytes.push_back(static_cast<char>(persist::kDumpPayloadVersion & 0xff));
    value_bytes.push_back(static_cast<char>(persist::kDumpPayloadVersion >> 8));
    const std::uint64_t crc = core::crc64(0, value_bytes);
    for (int i = 0; i < 8; ++i) value_bytes.push_back(static_cast<char>(crc >> (8 * i)));
    return value_bytes;
}

}  // namespace bloomery::testing
