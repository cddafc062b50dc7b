// The journal's Cuckoo filter records, encoded and decoded as
// journal_cuckoo.hpp lays them out.

#include "journal_cuckoo.hpp"

#include <algorithm>

#include "journal_encode.hpp"

namespace bloomery::persist::journal_cuckoo {

namespace jf = journal_format;
using format::get_u16;
using format::get_u32;
using format::get_u64;
using format::put_u16;
using format::put_u32;
using format::put_u64;
using Kind = store::CuckooChange::Kind;

namespace {

constexpr std::size_t kChangeHeader = 8 + 8 + 1;  // id, change number, kind
constexpr std::size_t kSlotBytes = 2 + 8;
constexpr std::size_t kInsertBytes = 2 + 1 + kSlotBytes + 4;
constexpr std::size_t kMoveBytes = 1 + 2 * kSlotBytes;
constexpr std::size_t kRemoveBytes = kSlotBytes + 1;
constexpr std::size_t kChunkBytes = 8 + 4;
// Room a sealed record may keep unused (seal()).
constexpr std::size_t kKeepUnused = 4096;

std::size_t body_bytes(const store::CuckooChange& change) {
    switch (change.kind) {
        case Kind::insert:
            return kChangeHeader + kInsertBytes + kMoveBytes * change.insert->relocations.size();
        case Kind::remove:
            return kChangeHeader + kRemoveBytes;
        case Kind::compact:
            return kChangeHeader;
        case Kind::chunk:
            return kChangeHeader + kChunkBytes + change.data.size();
    }
    return kChangeHeader;
}

unsigned char* put_slot(unsigned char* out, const cuckoo::SlotRef& slot) {
    put_u16(out, slot.filter);
    put_u64(out + 2, slot.offset);
    return out + kSlotBytes;
}

cuckoo::SlotRef get_slot(const unsigned char* in) {
    return cuckoo::SlotRef{get_u16(in), get_u64(in + 2)};
}

void put_change(unsigned char* out, const store::CuckooChange& change) {
    switch (change.kind) {
        case Kind::insert: {
            const cuckoo::InsertRecord& r = *change.insert;
            put_u16(out, r.filters);
            out[2] = r.fingerprint;
            out = put_slot(out + 3, r.placed);
            put_u32(out, static_cast<std::uint32_t>(r.relocations.size()));
            out += 4;
            for (const cuckoo::FingerprintMove& m : r.relocations) {
                out[0] = m.fingerprint;
                out = put_slot(put_slot(out + 1, m.from), m.to);
            }
            return;
        }
        case Kind::remove:
            out = put_slot(out, change.remove->cleared);
            out[0] = change.remove->compacted ? 1 : 0;
            return;
        case Kind::compact:
            return;
        case Kind::chunk:
            put_u64(out, static_cast<std::uint64_t>(change.pos));
            journal_encode::put_bytes(out + 8, change.data);
            return;
    }
}

}  // namespace

store::EncodedRecord created(std::string_view key, const cuckoo::CuckooFilter& filter,
                             std::uint64_t id, std::uint64_t seq, std::int64_t expire_at_ms) {
    const std::string header = filter.header();
    return journal_encode::encode_block(
        jf::kCuckooCreate, 4 + key.size() + 8 + 8 + 8 + 4 + header.size(), [&](unsigned char* out) {
            out = journal_encode::put_bytes(out, key);
            put_u64(out, static_cast<std::uint64_t>(expire_at_ms));
            put_u64(out + 8, id);
            put_u64(out + 16, seq);
            journal_encode::put_bytes(out + 24, header);
        });
}

store::EncodedRecord reserve(std::size_t max_moves, std::size_t data_bytes) {
    const std::size_t most = kChangeHeader + std::max({kInsertBytes + kMoveBytes * max_moves,
                                                       kRemoveBytes, kChunkBytes + data_bytes});
    journal_encode::check_body_size(most);
    auto block = std::make_unique<store::RecordBlock>();
    block->bytes.reserve(jf::kRecordOverhead + most);
    return block;
}

void seal(store::RecordBlock& block, std::uint64_t id, std::uint64_t seq,
          const store::CuckooChange& change) noexcept {
    const std::size_t body = body_bytes(change);
    // Within the room reserve() made: no allocation.
    block.bytes.resize(jf::kRecordOverhead + body);
    journal_encode::encode_record_at(reinterpret_cast<unsigned char*>(block.bytes.data()),
                                     jf::kCuckooChange, body, [&](unsigned char* out) {
                                         put_u64(out, id);
                                         put_u64(out + 8, seq);
                                         out[16] = static_cast<std::uint8_t>(change.kind);
                                         put_change(out + kChangeHeader, change);
                                     });
    // A filter of many relocations per insert reserves far more than most
    // changes take: give the rest back rather than hold it in the stream
    // (a failure to, which cannot lose the record, keeps the room).
    if (block.bytes.capacity() - block.bytes.size() > kKeepUnused) {
        try {
            block.bytes.shrink_to_fit();
        } catch (...) {
        }
    }
}

namespace {

// The kind's part of a body, checked for size; false if malformed.
bool parse_kind(const unsigned char* in, std::size_t size, Kind kind, ParsedChange& out) {
    switch (kind) {
        case Kind::insert: {
            if (size < kInsertBytes) return false;
            cuckoo::InsertRecord& r = out.insert;
            r.status = cuckoo::InsertStatus::inserted;
            r.filters = get_u16(in);
            r.fingerprint = in[2];
            r.placed = get_slot(in + 3);
            const std::uint32_t moves = get_u32(in + 3 + kSlotBytes);
            if (size != kInsertBytes + std::uint64_t{moves} * kMoveBytes) return false;
            r.relocations.resize(moves);
            const unsigned char* at = in + kInsertBytes;
            for (cuckoo::FingerprintMove& m : r.relocations) {
                m.fingerprint = at[0];
                m.from = get_slot(at + 1);
                m.to = get_slot(at + 1 + kSlotBytes);
                at += kMoveBytes;
            }
            out.change.insert = &r;
            return true;
        }
        case Kind::remove:
            if (size != kRemoveBytes || in[kSlotBytes] > 1) return false;
            out.remove = cuckoo::DeleteRecord{true, get_slot(in), in[kSlotBytes] == 1};
            out.change.remove = &out.remove;
            return true;
        case Kind::compact:
            return size == 0;
        case Kind::chunk: {
            if (size < kChunkBytes) return false;
            out.change.pos = static_cast<std::int64_t>(get_u64(in));
            const std::uint32_t n = get_u32(in + 8);
            if (size != kChunkBytes + n) return false;
            out.change.data = std::string_view(reinterpret_cast<const char*>(in + kChunkBytes), n);
            return true;
        }
    }
    return false;
}

}  // namespace

core::Status parse(std::string_view body, ParsedChange& out) {
    const auto* in = reinterpret_cast<const unsigned char*>(body.data());
    if (body.size() < kChangeHeader) return core::Error{"malformed CF-CHANGE record"};
    out.id = get_u64(in);
    out.seq = get_u64(in + 8);
    const std::uint8_t kind = in[16];
    out.change = store::CuckooChange{};
    if (kind < static_cast<std::uint8_t>(Kind::insert) ||
        kind > static_cast<std::uint8_t>(Kind::chunk)) {
        return core::Error{"CF-CHANGE record of unknown kind " + std::to_string(kind)};
    }
    out.change.kind = static_cast<Kind>(kind);
    if (!parse_kind(in + kChangeHeader, body.size() - kChangeHeader, out.change.kind, out)) {
        return core::Error{"malformed CF-CHANGE record"};
    }
    return {};
}

bool well_formed(std::string_view body) {
    ParsedChange scratch;
    return parse(body, scratch).ok();
}

}  // namespace bloomery::persist::journal_cuckoo
