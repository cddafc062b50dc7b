#pragma once
// Private to src/persist: the journal's records of Cuckoo filters
// (proto/journal.md, "Cuckoo filters"): CF-CREATE, a filter linked, and
// CF-CHANGE, one numbered change (store::CuckooChange) in one of four kinds:
//
//   insert  (1): u16 sub-filters after it, u8 fingerprint, u16 filter and
//                u64 offset of the slot it took, u32 n, n relocations of
//                (u8 fingerprint, u16 filter, u64 offset from, u16 filter,
//                u64 offset to)
//   remove  (2): u16 filter, u64 offset of the slot it cleared, u8 whether
//                it then compacted
//   compact (3): nothing (CF.COMPACT)
//   chunk   (4): i64 CF.LOADCHUNK iterator, u32 n, n bytes

#include <cstdint>
#include <string_view>

#include "bloomery/core/result.hpp"
#include "bloomery/cuckoo/cuckoo_filter.hpp"
#include "bloomery/store/mutation_log.hpp"

namespace bloomery::persist::journal_cuckoo {

store::EncodedRecord created(std::string_view key, const cuckoo::CuckooFilter& filter,
                             std::uint64_t id, std::uint64_t seq, std::int64_t expire_at_ms);
// A block with room for a CF-CHANGE of at most `max_moves` relocations or
// `data_bytes` bytes of chunk; sealed (written) by seal(), which cannot
// fail for a change within that room.
store::EncodedRecord reserve(std::size_t max_moves, std::size_t data_bytes);
void seal(store::RecordBlock& block, std::uint64_t id, std::uint64_t seq,
          const store::CuckooChange& change) noexcept;

// A CF-CHANGE record's body, decoded: the change points into `storage`
// and the record's bytes.
struct ParsedChange {
    std::uint64_t id = 0;
    std::uint64_t seq = 0;
    store::CuckooChange change;
    cuckoo::InsertRecord insert;
    cuckoo::DeleteRecord remove;
};
// Checks a body's shape (journal_records' decode) without keeping it.
bool well_formed(std::string_view body);
// Fails if the body does not hold what its kind says.
core::Status parse(std::string_view body, ParsedChange& out);

}  // namespace bloomery::persist::journal_cuckoo
