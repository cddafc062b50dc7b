#pragma once
// Reading journal segments: the mapped file, its header, each record's frame
// and body (journal_records.cpp). Shared by replay, the replica's stream and
// --check-journal (journal_reader.cpp).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bloomery/core/result.hpp"
#include "mapped_file.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist::journal_records {

using persist::MappedFile;

struct SegmentHeader {
    std::uint64_t id = 0;
    std::uint64_t start = 0;
};

// The header of a segment: magic, version, checksum; or what is wrong with
// it, naming `path`.
core::Result<SegmentHeader> parse_segment_header(const MappedFile& file, const std::string& path);

// One record, as framed; body points into the mapping.
struct Record {
    std::uint8_t type;
    const unsigned char* body;
    std::size_t body_size;
    std::uint64_t file_offset;  // of the record's first byte
};

enum class Scan { ok, torn, corrupt };

// A record's body decoded.
struct Decoded {
    std::string_view key, other, data;
    std::int64_t deadline = 0;
    std::uint64_t filter_id = 0;
    std::int64_t iter = 0;
    std::uint32_t count = 0;
    const unsigned char* adds = nullptr;
    std::uint64_t span = 0;        // MULTI: bytes of the records it holds
    std::uint64_t seq = 0;         // CF-CREATE: the number of the filter's last change
    std::uint64_t generation = 0;  // AGE-SHIFT: the generation shifted to; AGE-WORDS: ORed at
    std::uint64_t first_word = 0;  // AGE-WORDS: where its words go
    std::uint64_t shifted_ms = 0;  // AGE-SHIFT: when
};

// Decodes a record's body by its type; fails if it does not hold what its
// type says.
core::Result<Decoded> decode(const Record& record);

// Reads the record at `pos`. torn: only what a crash can leave, a last
// record the file ends inside of (shorter than its length says) with no
// valid record after it. corrupt: anything else that is not a valid record
// (a bad checksum, a length that runs past the end with records after it,
// zeros where a record should be).
Scan next_record(const unsigned char* base, std::size_t size, std::size_t pos, Record& out,
                 std::string& why);
Scan next_record(const MappedFile& file, std::size_t pos, Record& out, std::string& why);

// Where the bytes come from: a segment file, which ends where a crash cut
// it, or a replica's stream, which more bytes follow.
enum class Source { file, stream };

// The records of the transaction whose MULTI (decoded `span`) ends at `pos`
// in base[0, size): every record in the span, each whole and valid, then
// its EXEC; `end` gets the offset after the EXEC. torn: the data ends
// inside the unit (what a crash leaves: replay cuts it off whole; a
// stream, a replica's, waits for more); corrupt: anything else.
Scan scan_transaction(const unsigned char* base, std::size_t size, std::size_t pos,
                      std::uint64_t span, Source source,
                      std::vector<std::pair<Record, Decoded>>& records, std::size_t& end,
                      std::string& why);

}  // namespace bloomery::persist::journal_records
