#pragma once
// Encoding journal records (proto/journal.md) into blocks of the stream:
// the keyspace records the journal's facade encodes for the keyspace, and
// the framing the appender writes in place (journal_appender.cpp).

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/store/mutation_log.hpp"
#include "journal_format.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist::journal_encode {

// A record body must stay below 2^31 bytes (proto/journal.md): keys are
// bounded by proto-max-bulk-len, but a record that would not fit is refused
// (std::length_error) before anything changes rather than written with a
// wrapped length.
void check_body_size(std::size_t body_bytes);

// One record (u32 body length, type, body, XXH64) at `out`; `encode` writes
// the body's `body_bytes` bytes at the pointer it is given.
template <class Encode>
void encode_record_at(unsigned char* out, std::uint8_t type, std::size_t body_bytes,
                      Encode&& encode) {
    format::put_u32(out, static_cast<std::uint32_t>(body_bytes));
    out[4] = type;
    encode(out + 5);
    format::put_u64(out + 5 + body_bytes, XXH64(out, 5 + body_bytes, 0));
}

// A block holding one record. Throws std::bad_alloc or std::length_error.
template <class Encode>
store::EncodedRecord encode_block(std::uint8_t type, std::size_t body_bytes, Encode&& encode) {
    check_body_size(body_bytes);
    auto block = std::make_unique<store::RecordBlock>();
    block->bytes.resize(journal_format::kRecordOverhead + body_bytes);
    encode_record_at(reinterpret_cast<unsigned char*>(block->bytes.data()), type, body_bytes,
                     encode);
    return block;
}

// u32 length and the bytes at `out`; returns the byte after them.
unsigned char* put_bytes(unsigned char* out, std::string_view bytes);

// The keyspace records of store::MutationLog (see mutation_log.hpp).
store::EncodedRecord created(std::string_view key, const bloom::ScalableFilter& filter,
                             std::int64_t expire_at_ms);
store::EncodedRecord deleted(std::string_view key);
store::EncodedRecord renamed(std::string_view from, std::string_view to);
store::EncodedRecord expiry(std::string_view key, std::int64_t expire_at_ms);
store::EncodedRecord cleared();
store::EncodedRecord chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                           std::string_view data);
// A keepalive for replicas, skipped by replay.
store::EncodedRecord ping();
// An expiring filter linked under `key` (AGE-CREATE).
store::EncodedRecord age_created(std::string_view key, const bloom::AgeFilter& filter,
                                 std::int64_t expire_at_ms);
// The body of an AGE-SHIFT record at `out`.
inline constexpr std::size_t kAgeShiftBodyBytes = 8 + 8 + 8;
inline std::size_t age_words_body_bytes(std::string_view data) {
    return 8 + 8 + 8 + data.size();
}
void put_age_words_body(unsigned char* out, const bloom::AgeFilter& filter,
                        std::uint64_t generation, std::uint64_t first, std::string_view data);
store::EncodedRecord age_words(const bloom::AgeFilter& filter, std::uint64_t generation,
                               std::uint64_t first, std::string_view data);
void put_age_shift_body(unsigned char* out, const bloom::AgeFilter& filter,
                        std::uint64_t generation, std::uint64_t shifted_ms);

// The body of a CHUNK record: its size, and the body at `out`.
std::size_t chunk_body_bytes(std::string_view data);
void put_chunk_body(unsigned char* out, const bloom::ScalableFilter& filter, std::int64_t iter,
                    std::string_view data);

}  // namespace bloomery::persist::journal_encode
