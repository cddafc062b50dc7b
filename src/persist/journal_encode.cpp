// The journal's keyspace records, encoded as proto/journal.md lays them out.

#include "journal_encode.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "bloomery/bloom/age_header.hpp"
#include "bloomery/bloom/dump.hpp"

namespace bloomery::persist::journal_encode {

namespace jf = journal_format;
using format::put_u32;
using format::put_u64;

void check_body_size(std::size_t body_bytes) {
    if (body_bytes > jf::kMaxRecordBody) throw std::length_error("journal record too large");
}

unsigned char* put_bytes(unsigned char* out, std::string_view bytes) {
    put_u32(out, static_cast<std::uint32_t>(bytes.size()));
    if (!bytes.empty()) std::memcpy(out + 4, bytes.data(), bytes.size());
    return out + 4 + bytes.size();
}

store::EncodedRecord created(std::string_view key, const bloom::ScalableFilter& filter,
                             std::int64_t expire_at_ms) {
    const std::string header = bloom::encode_header(filter);
    return encode_block(jf::kCreate, 4 + key.size() + 8 + 8 + 4 + header.size(),
                        [&](unsigned char* out) {
                            out = put_bytes(out, key);
                            put_u64(out, static_cast<std::uint64_t>(expire_at_ms));
                            put_u64(out + 8, filter.id());
                            put_bytes(out + 16, header);
                        });
}

store::EncodedRecord deleted(std::string_view key) {
    return encode_block(jf::kDelete, 4 + key.size(),
                        [&](unsigned char* out) { put_bytes(out, key); });
}

store::EncodedRecord renamed(std::string_view from, std::string_view to) {
    return encode_block(jf::kRename, 8 + from.size() + to.size(),
                        [&](unsigned char* out) { put_bytes(put_bytes(out, from), to); });
}

store::EncodedRecord expiry(std::string_view key, std::int64_t expire_at_ms) {
    return encode_block(jf::kExpire, 4 + key.size() + 8, [&](unsigned char* out) {
        put_u64(put_bytes(out, key), static_cast<std::uint64_t>(expire_at_ms));
    });
}

store::EncodedRecord cleared() {
    return encode_block(jf::kFlushAll, 0, [](unsigned char*) {});
}

std::size_t chunk_body_bytes(std::string_view data) {
    return 8 + 8 + 4 + data.size();
}

void put_chunk_body(unsigned char* out, const bloom::ScalableFilter& filter, std::int64_t iter,
                    std::string_view data) {
    put_u64(out, filter.id());
    put_u64(out + 8, static_cast<std::uint64_t>(iter));
    put_bytes(out + 16, data);
}

store::EncodedRecord chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                           std::string_view data) {
    return encode_block(jf::kChunk, chunk_body_bytes(data),
                        [&](unsigned char* out) { put_chunk_body(out, filter, iter, data); });
}

store::EncodedRecord age_created(std::string_view key, const bloom::AgeFilter& filter,
                                 std::int64_t expire_at_ms) {
    const std::string header = bloom::encode_age_dump_header(filter);
    return encode_block(jf::kAgeCreate, 4 + key.size() + 8 + 8 + 4 + header.size(),
                        [&](unsigned char* out) {
                            out = put_bytes(out, key);
                            put_u64(out, static_cast<std::uint64_t>(expire_at_ms));
                            put_u64(out + 8, filter.id());
                            put_bytes(out + 16, header);
                        });
}

void put_age_shift_body(unsigned char* out, const bloom::AgeFilter& filter,
                        std::uint64_t generation, std::uint64_t shifted_ms) {
    put_u64(out, filter.id());
    put_u64(out + 8, generation);
    put_u64(out + 16, shifted_ms);
}

void put_age_words_body(unsigned char* out, const bloom::AgeFilter& filter,
                        std::uint64_t generation, std::uint64_t first, std::string_view data) {
    put_u64(out, filter.id());
    put_u64(out + 8, generation);
    put_u64(out + 16, first);
    std::memcpy(out + 24, data.data(), data.size());
}

store::EncodedRecord age_words(const bloom::AgeFilter& filter, std::uint64_t generation,
                               std::uint64_t first, std::string_view data) {
    return encode_block(jf::kAgeWords, age_words_body_bytes(data), [&](unsigned char* out) {
        put_age_words_body(out, filter, generation, first, data);
    });
}

store::EncodedRecord ping() {
    return encode_block(jf::kPing, 0, [](unsigned char*) {});
}

}  // namespace bloomery::persist::journal_encode
