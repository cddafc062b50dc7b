#pragma once
// Private to src/persist: the constants of proto/journal.md shared by the
// journal's writer, its replay and --check-journal. Integers are
// little-endian, encoded byte by byte (snapshot_format.hpp's helpers).

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace bloomery::persist::journal_format {

inline constexpr char kMagic[8] = {'B', 'L', 'O', 'O', 'M', 'J', 'N', 'L'};
inline constexpr std::uint32_t kVersion = 1;
// magic, u32 version, u32 reserved (0), u64 journal id, u64 start offset,
// u64 XXH64 of the 32 bytes before it.
inline constexpr std::size_t kSegmentHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8;
// u32 body length, u8 type, body, u64 XXH64 of length, type and body.
inline constexpr std::size_t kRecordOverhead = 4 + 1 + 8;
// The largest body a reader accepts: a LOADCHUNK of 16 MiB plus its key
// (keys are bounded by proto-max-bulk-len, 512 MiB by default).
inline constexpr std::uint64_t kMaxRecordBody = (1ull << 31) - 1;

// The most bytes of records one transaction (MULTI ... EXEC) may hold: a
// transaction's queue is bounded by client-query-buffer-limit and by 4 GiB,
// and its records by a small multiple of what it queued.
inline constexpr std::uint64_t kMaxTransactionBytes = 1ull << 36;

enum RecordType : std::uint8_t {
    kCreate = 1,    // u32 key length, key, i64 deadline, u64 filter id, u32 n, n bytes of header
    kAdd = 2,       // u64 filter id, u32 n, n x (u8 layer, u64 h1, u64 h2)
    kDelete = 3,    // u32 key length, key
    kRename = 4,    // u32 length, from, u32 length, to
    kExpire = 5,    // u32 key length, key, i64 deadline (0: none)
    kFlushAll = 6,  // empty body
    kChunk = 7,     // u64 filter id, i64 iterator, u32 n, n bytes of chunk
    kPing = 8,      // empty body: a replication keepalive; replay skips it
    kMulti = 9,     // u64 bytes of the transaction's records, which follow it
    kExec = 10,     // empty body: ends the transaction a MULTI began
    kRemove = 11,   // u64 filter id, u32 n, n x (u8 layer, u64 h1, u64 h2): counting deletes
    // u32 key length, key, i64 deadline, u64 filter id, u64 change number,
    // u32 n, n bytes of CF.SCANDUMP header: a Cuckoo filter linked
    kCuckooCreate = 12,
    // u64 filter id, u64 change number, u8 kind, the change (journal_cuckoo.hpp)
    kCuckooChange = 13,
    // u32 key length, key, i64 deadline, u64 filter id, u32 n, n bytes of the
    // expiring filter's header (bloom/age_header.hpp): an expiring filter linked
    kAgeCreate = 14,
    // u64 filter id, u32 n, n x (u64 generation, u64 h1, u64 h2)
    kAgeAdd = 15,
    // u64 filter id, u64 generation, u64 time of the shift (ms): the filter
    // shifted to that generation
    kAgeShift = 16,
    // u64 filter id, u64 generation, u64 first word, then words (8 bytes
    // each, at least one): ORed into an expiring filter at that generation
    kAgeWords = 17,
};
inline constexpr std::uint8_t kLastRecordType = kAgeWords;

inline constexpr std::size_t kAddEntryBytes = 1 + 8 + 8;
inline constexpr std::size_t kAgeAddEntryBytes = 8 + 8 + 8;

inline const char* type_name(std::uint8_t type) {
    switch (type) {
        case kCreate:
            return "CREATE";
        case kAdd:
            return "ADD";
        case kDelete:
            return "DEL";
        case kRename:
            return "RENAME";
        case kExpire:
            return "EXPIRE";
        case kFlushAll:
            return "FLUSHALL";
        case kChunk:
            return "CHUNK";
        case kPing:
            return "PING";
        case kMulti:
            return "MULTI";
        case kExec:
            return "EXEC";
        case kRemove:
            return "REMOVE";
        case kCuckooCreate:
            return "CF-CREATE";
        case kCuckooChange:
            return "CF-CHANGE";
        case kAgeCreate:
            return "AGE-CREATE";
        case kAgeAdd:
            return "AGE-ADD";
        case kAgeShift:
            return "AGE-SHIFT";
        case kAgeWords:
            return "AGE-WORDS";
        default:
            return "unknown";
    }
}

// "<basename>.<20 digits>" naming a start offset that fits 64 bits: true with
// the offset. Anything else (another file, a number that overflows) is not a
// segment.
inline bool parse_segment_name(std::string_view name, std::string_view basename,
                               std::uint64_t& start) {
    if (name.size() != basename.size() + 1 + 20 || name.substr(0, basename.size()) != basename ||
        name[basename.size()] != '.') {
        return false;
    }
    const char* first = name.data() + basename.size() + 1;
    const char* last = name.data() + name.size();
    for (const char* c = first; c != last; ++c) {
        if (*c < '0' || *c > '9') return false;
    }
    const auto [end, ec] = std::from_chars(first, last, start);
    return ec == std::errc() && end == last;
}

// "<basename>.<start offset, 20 digits>": names sort in offset order.
inline std::string segment_name(std::string_view basename, std::uint64_t start) {
    std::string digits = std::to_string(start);
    return std::string(basename) + "." + std::string(20 - digits.size(), '0') + digits;
}

}  // namespace bloomery::persist::journal_format
