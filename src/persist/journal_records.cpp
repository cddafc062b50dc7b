#include <xxhash.h>

#include <cstring>
#include <string>

#include "bloomery/bloom/age_header.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "journal_cuckoo.hpp"
#include "journal_format.hpp"
#include "journal_records.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist::journal_records {

namespace jf = journal_format;
using format::get_u32;
using format::get_u64;

core::Result<SegmentHeader> parse_segment_header(const MappedFile& file, const std::string& path) {
    if (file.size() < jf::kSegmentHeaderBytes) {
        return core::Error{path + ": " + std::to_string(file.size()) +
                           " bytes, shorter than a journal header (" +
                           std::to_string(jf::kSegmentHeaderBytes) + ")"};
    }
    const unsigned char* in = file.data();
    if (std::memcmp(in, jf::kMagic, 8) != 0) {
        return core::Error{path + ": not a bloomery journal (bad magic)"};
    }
    if (get_u32(in + 8) != jf::kVersion) {
        return core::Error{path + ": journal format version " + std::to_string(get_u32(in + 8)) +
                           " is not supported (this build reads " + std::to_string(jf::kVersion) +
                           ")"};
    }
    if (get_u64(in + 32) != XXH64(in, 32, 0)) {
        return core::Error{path + ": journal header checksum mismatch"};
    }
    return SegmentHeader{.id = get_u64(in + 16), .start = get_u64(in + 24)};
}

namespace {

// A record's frame at `pos` when it fits in [pos, size): length, type,
// body, checksum. No check of the body.
bool frame_at(const unsigned char* base, std::size_t size, std::size_t pos, Record& out) {
    if (size - pos < jf::kRecordOverhead) return false;
    const std::uint64_t body = get_u32(base + pos);
    if (body > jf::kMaxRecordBody || body > size - pos - jf::kRecordOverhead) return false;
    out = Record{base[pos + 4], base + pos + 5, static_cast<std::size_t>(body), pos};
    return true;
}

bool checksum_ok(const unsigned char* base, const Record& record) {
    const std::size_t pos = record.file_offset;
    return get_u64(base + pos + 5 + record.body_size) == XXH64(base + pos, 5 + record.body_size, 0);
}

// A cursor over a record's body that refuses to read past it.
class Body {
public:
    explicit Body(const Record& record) : at_(record.body), end_(record.body + record.body_size) {}
    bool u8(std::uint8_t& v) {
        if (end_ - at_ < 1) return false;
        v = *at_++;
        return true;
    }
    bool u32(std::uint32_t& v) {
        if (end_ - at_ < 4) return false;
        v = get_u32(at_);
        at_ += 4;
        return true;
    }
    bool u64(std::uint64_t& v) {
        if (end_ - at_ < 8) return false;
        v = get_u64(at_);
        at_ += 8;
        return true;
    }
    bool bytes(std::string_view& v) {
        std::uint32_t n;
        if (!u32(n) || static_cast<std::size_t>(end_ - at_) < n) return false;
        v = std::string_view(reinterpret_cast<const char*>(at_), n);
        at_ += n;
        return true;
    }
    bool done() const { return at_ == end_; }
    std::size_t left() const { return static_cast<std::size_t>(end_ - at_); }

private:
    const unsigned char* at_;
    const unsigned char* end_;
};

// The records of expiring filters; false if the body is not what the type says.
bool decode_age(const Record& record, Body& body, Decoded& d) {
    std::uint64_t v = 0;
    switch (record.type) {
        case jf::kAgeCreate:
            if (!(body.bytes(d.key) && body.u64(v) && body.u64(d.filter_id) && body.bytes(d.data) &&
                  d.data.size() >= bloom::kAgeHeaderBytes + 4)) {
                return false;
            }
            d.deadline = static_cast<std::int64_t>(v);
            break;
        case jf::kAgeAdd:
            if (!(body.u64(d.filter_id) && body.u32(d.count) && d.count != 0 &&
                  body.left() == std::uint64_t{d.count} * jf::kAgeAddEntryBytes)) {
                return false;
            }
            d.adds = record.body + 12;
            return d.filter_id <= bloom::ScalableFilter::kMaxFilterId;
        case jf::kAgeWords:
            if (!(body.u64(d.filter_id) && body.u64(d.generation) && body.u64(d.first_word) &&
                  body.left() != 0 && body.left() % 8 == 0)) {
                return false;
            }
            d.data = std::string_view(reinterpret_cast<const char*>(record.body) + 24,
                                      record.body_size - 24);
            return d.filter_id <= bloom::ScalableFilter::kMaxFilterId;
        default:  // kAgeShift
            if (!(body.u64(d.filter_id) && body.u64(d.generation) && body.u64(d.shifted_ms))) {
                return false;
            }
    }
    return d.filter_id <= bloom::ScalableFilter::kMaxFilterId && body.done();
}

}  // namespace

core::Result<Decoded> decode(const Record& record) {
    Decoded d;
    Body body(record);
    std::uint64_t v = 0;
    bool ok = false;
    switch (record.type) {
        case jf::kCreate:
            ok = body.bytes(d.key) && body.u64(v) && body.u64(d.filter_id) && body.bytes(d.data) &&
                 d.filter_id <= bloom::ScalableFilter::kMaxFilterId;
            d.deadline = static_cast<std::int64_t>(v);
            break;
        case jf::kAdd:
        case jf::kRemove:
            ok = body.u64(d.filter_id) && body.u32(d.count) && d.count != 0 &&
                 d.filter_id <= bloom::ScalableFilter::kMaxFilterId &&
                 body.left() == std::uint64_t{d.count} * jf::kAddEntryBytes;
            if (ok) {
                d.adds = record.body + 12;
                return d;
            }
            break;
        case jf::kDelete:
            ok = body.bytes(d.key);
            break;
        case jf::kRename:
            ok = body.bytes(d.key) && body.bytes(d.other);
            break;
        case jf::kExpire:
            ok = body.bytes(d.key) && body.u64(v);
            d.deadline = static_cast<std::int64_t>(v);
            break;
        case jf::kFlushAll:
        case jf::kPing:
        case jf::kExec:
            ok = true;
            break;
        case jf::kMulti:
            ok = body.u64(d.span);
            break;
        case jf::kChunk:
            ok = body.u64(d.filter_id) && body.u64(v) && body.bytes(d.data) &&
                 d.filter_id <= bloom::ScalableFilter::kMaxFilterId;
            d.iter = static_cast<std::int64_t>(v);
            break;
        case jf::kCuckooCreate:
            ok = body.bytes(d.key) && body.u64(v) && body.u64(d.filter_id) && body.u64(d.seq) &&
                 body.bytes(d.data) && d.filter_id <= bloom::ScalableFilter::kMaxFilterId &&
                 d.data.size() == cuckoo::kHeaderBytes;
            d.deadline = static_cast<std::int64_t>(v);
            break;
        case jf::kAgeCreate:
        case jf::kAgeAdd:
        case jf::kAgeShift:
        case jf::kAgeWords:
            if (decode_age(record, body, d)) return d;
            break;
        case jf::kCuckooChange:
            // The whole body; the applier parses it (journal_cuckoo.hpp).
            d.data = std::string_view(reinterpret_cast<const char*>(record.body), record.body_size);
            if (journal_cuckoo::well_formed(d.data)) return d;
            break;
        default:
            return core::Error{"unknown record type " + std::to_string(record.type)};
    }
    if (!ok || !body.done()) {
        return core::Error{std::string("malformed ") + jf::type_name(record.type) + " record"};
    }
    return d;
}

namespace {

// Whether a whole, valid record (its body decodes and its checksum holds)
// starts anywhere in (from, size): a crash leaves nothing valid after the
// record it cut short.
bool valid_record_after(const unsigned char* base, std::size_t size, std::size_t from) {
    for (std::size_t q = from + 1; q + jf::kRecordOverhead <= size; ++q) {
        Record record{};
        if (!frame_at(base, size, q, record)) continue;
        // Cheap checks first (type, lengths inside the body), the hash last.
        if (decode(record).ok() && checksum_ok(base, record)) return true;
    }
    return false;
}

}  // namespace

Scan next_record(const unsigned char* base, std::size_t size, std::size_t pos, Record& out,
                 std::string& why) {
    const std::size_t left = size - pos;
    if (!frame_at(base, size, pos, out)) {
        const bool header_cut = left < jf::kRecordOverhead;
        if (!header_cut && get_u32(base + pos) > jf::kMaxRecordBody) {
            why = "a record length of " + std::to_string(get_u32(base + pos)) +
                  " bytes, above the limit";
            return Scan::corrupt;
        }
        if (valid_record_after(base, size, pos)) {
            why = header_cut ? "a record header cut short before valid records"
                             : "a record length that runs past the end of the file, with "
                               "valid records after it";
            return Scan::corrupt;
        }
        why = header_cut ? "the file ends inside a record header"
                         : "the file ends inside a record of " +
                               std::to_string(get_u32(base + pos)) + " bytes";
        return Scan::torn;
    }
    if (!checksum_ok(base, out)) {
        why = "record checksum mismatch";
        return Scan::corrupt;
    }
    return Scan::ok;
}

Scan next_record(const MappedFile& file, std::size_t pos, Record& out, std::string& why) {
    return next_record(file.data(), file.size(), pos, out, why);
}

Scan scan_transaction(const unsigned char* base, std::size_t size, std::size_t pos,
                      std::uint64_t span, Source source,
                      std::vector<std::pair<Record, Decoded>>& records, std::size_t& end,
                      std::string& why) {
    records.clear();
    if (span > jf::kMaxTransactionBytes) {
        why = "a transaction of " + std::to_string(span) + " bytes, above the limit";
        return Scan::corrupt;
    }
    if (source == Source::stream && span + jf::kRecordOverhead > size - pos) {
        // A stream is cut anywhere; the unit is checked once it is all here.
        why = "the data ends inside a transaction";
        return Scan::torn;
    }
    if (span > size - pos) {
        // Not all there; whatever is there must still be records.
        std::size_t at = pos;
        while (at < size) {
            Record record{};
            const Scan scan = next_record(base, size, at, record, why);
            if (scan != Scan::ok) {
                if (scan == Scan::corrupt) why.insert(0, "inside a transaction: ");
                return scan;
            }
            at += jf::kRecordOverhead + record.body_size;
        }
        why = "the data ends inside a transaction";
        return Scan::torn;
    }
    const std::size_t span_end = pos + static_cast<std::size_t>(span);
    std::size_t at = pos;
    while (at < span_end) {
        Record record{};
        // Within the span only: a record may not run past it.
        const Scan scan = next_record(base, span_end, at, record, why);
        if (scan != Scan::ok) {
            why.insert(0, "inside a transaction: ");
            return Scan::corrupt;
        }
        core::Result<Decoded> decoded = decode(record);
        if (!decoded) {
            why = "inside a transaction: " + decoded.error();
            return Scan::corrupt;
        }
        if (record.type == jf::kMulti || record.type == jf::kExec) {
            why = std::string("a ") + jf::type_name(record.type) + " record inside a transaction";
            return Scan::corrupt;
        }
        records.emplace_back(record, *decoded);
        at += jf::kRecordOverhead + record.body_size;
    }
    Record exec{};
    const Scan scan = next_record(base, size, span_end, exec, why);
    if (scan == Scan::torn) {
        why = "the data ends inside a transaction's EXEC record";
        return Scan::torn;
    }
    if (scan != Scan::ok || exec.type != jf::kExec || exec.body_size != 0) {
        why = scan != Scan::ok ? "a transaction's EXEC record: " + why
                               : std::string("a transaction ends with a ") +
                                     jf::type_name(exec.type) + " record, not EXEC";
        return Scan::corrupt;
    }
    end = span_end + jf::kRecordOverhead;
    return Scan::ok;
}

}  // namespace bloomery::persist::journal_records
