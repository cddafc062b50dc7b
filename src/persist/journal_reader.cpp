// Reading the journal back: replay at start and `bloomery --check-journal`.

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <unordered_map>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/persist/journal.hpp"
#include "journal_format.hpp"
#include "journal_records.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

namespace jf = journal_format;
using format::errno_text;
using format::get_u32;
using format::get_u64;

using journal_records::decode;
using journal_records::Decoded;
using journal_records::MappedFile;
using journal_records::next_record;
using journal_records::parse_segment_header;
using journal_records::Record;
using journal_records::Scan;
using journal_records::SegmentHeader;

namespace {

// Applies records to a keyspace, finding filters by the id they were
// journaled under. Every record is redone as it says (keyspace.hpp's write
// path, which records it again in the keyspace's own log if it has one: a
// replica's journal); nothing is decided again.
class Applier {
public:
    explicit Applier(store::Keyspace& keyspace) : keyspace_(keyspace) {
        const store::KeyspaceView view = keyspace.view(/*for_snapshot=*/false);
        for (std::size_t i = 0; i < view.size(); ++i) {
            const bloom::FilterRef& filter = view.entry(i).filter;
            by_id_[filter->id()] = filter;
            max_id_ = std::max(max_id_, filter->id());
        }
    }
    std::uint64_t max_id() const { return max_id_; }

    // Applies a transaction's records (checked already) as one unit: with
    // `isolated`, inside a keyspace transaction over every shard, so readers
    // never see it half applied and the keyspace's own journal records it
    // as one unit again (a replica); replay at start has no readers.
    bool apply_transaction(const std::vector<std::pair<Record, Decoded>>& records, bool isolated,
                           std::string& why) {
        store::Keyspace::Transaction transaction;
        if (isolated) transaction = keyspace_.begin_transaction({}, true);
        for (const auto& [record, decoded] : records) {
            if (!apply(record.type, decoded, why)) return false;
        }
        return true;
    }

    bool apply(std::uint8_t type, const Decoded& d, std::string& why) {
        switch (type) {
            case jf::kCreate: {
                bloom::DumpHeader header;
                std::string error;
                if (!bloom::parse_header(d.data, header, error)) {
                    why = "CREATE record: " + error;
                    return false;
                }
                bloom::FilterRef filter = bloom::build_filter(header);
                filter->set_id(d.filter_id);
                max_id_ = std::max(max_id_, d.filter_id);
                // A replica promoted later names its new filters past every
                // id it holds.
                bloom::ScalableFilter::reserve_ids_through(d.filter_id);
                forget(d.key);
                keyspace_.put(d.key, filter, d.deadline);
                by_id_[d.filter_id] = std::move(filter);
                return true;
            }
            case jf::kAdd: {
                auto it = by_id_.find(d.filter_id);
                if (it == by_id_.end()) return true;  // deleted before this add landed
                bloom::ScalableFilter& filter = *it->second;
                adds_.resize(d.count);
                for (std::uint32_t i = 0; i < d.count; ++i) {
                    const unsigned char* entry = d.adds + i * jf::kAddEntryBytes;
                    adds_[i] = {entry[0], {get_u64(entry + 1), get_u64(entry + 9)}};
                }
                // Prefetch every item's block or word first, so the cache
                // misses of a large filter overlap (10M adds into a 1 GiB
                // filter replayed at 2.7 µs per add without this).
                const std::size_t layers = filter.num_layers();
                for (const store::Keyspace::RecordedAdd& add : adds_) {
                    if (add.layer < layers) filter.layer(add.layer).prefetch(add.hash);
                }
                if (!keyspace_.redo_adds(filter, adds_)) {
                    why = "ADD record: a layer beyond what the filter can grow to";
                    return false;
                }
                return true;
            }
            case jf::kDelete:
                forget(d.key);
                keyspace_.erase(d.key);
                return true;
            case jf::kRename:
                if (d.key != d.other) forget(d.other);
                keyspace_.rename(d.key, d.other);
                return true;
            case jf::kExpire:
                if (d.deadline != 0 && d.deadline <= store::now_ms()) forget(d.key);
                keyspace_.set_expiry(d.key, d.deadline);
                return true;
            case jf::kFlushAll:
                by_id_.clear();
                keyspace_.clear();
                return true;
            case jf::kPing:
                return true;
            case jf::kMulti:
            case jf::kExec:
                why = std::string(jf::type_name(type)) + " record outside its place";
                return false;
            case jf::kChunk: {
                auto it = by_id_.find(d.filter_id);
                if (it == by_id_.end()) return true;
                // A server writes only chunks it checked; one that does not
                // fit comes from a journal of an older version, which
                // recorded chunks before checking them (and applied none).
                std::string error;
                keyspace_.redo_chunk(*it->second, d.iter, d.data, error);
                return true;
            }
            default:
                why = "unknown record type";
                return false;
        }
    }

private:
    // The filter under `key` leaves the keyspace: adds journaled for it
    // later (they raced the change) go nowhere, as they did.
    void forget(std::string_view key) {
        if (auto entry = keyspace_.get(key)) by_id_.erase(entry->filter->id());
    }

    store::Keyspace& keyspace_;
    std::vector<store::Keyspace::RecordedAdd> adds_;
    std::unordered_map<std::uint64_t, bloom::FilterRef> by_id_;
    std::uint64_t max_id_ = 0;
};

struct SegmentFile {
    std::uint64_t start;
    std::string path;
    SegmentHeader header;
};

// Segment files in `dir` named "<basename>.<20 digits>", oldest first. A
// name whose number does not fit 64 bits is no segment of ours: left alone.
std::vector<SegmentFile> list_segments(const std::string& dir, const std::string& basename) {
    std::vector<SegmentFile> out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        std::uint64_t start = 0;
        if (!jf::parse_segment_name(name, basename, start)) {
            if (name.rfind(basename + ".", 0) == 0 && name.size() == basename.size() + 21) {
                spdlog::warn("journal: ignoring {}: not a segment name this server writes",
                             entry.path().string());
            }
            continue;
        }
        out.push_back({start, entry.path().string(), {}});
    }
    std::sort(out.begin(), out.end(),
              [](const SegmentFile& a, const SegmentFile& b) { return a.start < b.start; });
    return out;
}

// A crash while a segment was being created can leave the newest one
// shorter than its header (nothing was ever appended to it): drop it.
void drop_unfinished_newest(std::vector<SegmentFile>& segments) {
    if (segments.empty()) return;
    std::error_code ec;
    const SegmentFile& newest = segments.back();
    const auto size = std::filesystem::file_size(newest.path, ec);
    if (!ec && size < jf::kSegmentHeaderBytes) {
        spdlog::warn(
            "journal: {} is {} bytes, a segment cut short while it was created; "
            "removing it",
            newest.path, size);
        std::filesystem::remove(newest.path, ec);
        segments.pop_back();
    }
}

// Every segment's header, checked against its name.
bool read_headers(std::vector<SegmentFile>& segments, std::string& error) {
    for (SegmentFile& segment : segments) {
        MappedFile file;
        if (!file.open(segment.path, error) ||
            !parse_segment_header(file, segment.path, segment.header, error)) {
            return false;
        }
        if (segment.header.start != segment.start) {
            error = segment.path + ": header says it starts at offset " +
                    std::to_string(segment.header.start) + ", its name at " +
                    std::to_string(segment.start);
            return false;
        }
    }
    return true;
}

// The segments of journal `id`. Those of another history (written before
// the snapshot was made without a journal, or by another server) are
// renamed aside, never replayed.
std::vector<SegmentFile> segments_of(std::vector<SegmentFile>& segments, std::uint64_t id) {
    std::vector<SegmentFile> ours;
    for (SegmentFile& segment : segments) {
        if (segment.header.id == id) {
            ours.push_back(std::move(segment));
            continue;
        }
        const std::string aside = segment.path + ".stale";
        std::error_code ec;
        std::filesystem::rename(segment.path, aside, ec);
        spdlog::warn(
            "journal: {} belongs to another journal than the snapshot's; renamed to {} and not "
            "loaded",
            segment.path, aside);
    }
    return ours;
}

// Applies one decoded record; false with `why` if it cannot be (out of
// memory counts as such).
bool apply_record(Applier& applier, const Record& record, const Decoded& decoded,
                  std::string& why) {
    try {
        return applier.apply(record.type, decoded, why);
    } catch (const std::bad_alloc&) {
        why = std::string("out of memory applying a ") + jf::type_name(record.type) + " record";
    } catch (const std::length_error&) {
        why = std::string("out of memory applying a ") + jf::type_name(record.type) + " record";
    }
    return false;
}

// The records of the transaction whose MULTI (`multi`, decoded `span`) ends
// at `pos` in base[0, size): every record in the span, each whole and
// valid, then its EXEC. torn: the data ends inside the unit (what a crash
// leaves: replay cuts it off whole, a replica waits for more); corrupt:
// anything else.
Scan scan_transaction(const unsigned char* base, std::size_t size, std::size_t pos,
                      std::uint64_t span, bool stream,
                      std::vector<std::pair<Record, Decoded>>& records, std::size_t& end,
                      std::string& why) {
    records.clear();
    if (span > jf::kMaxTransactionBytes) {
        why = "a transaction of " + std::to_string(span) + " bytes, above the limit";
        return Scan::corrupt;
    }
    if (stream && span + jf::kRecordOverhead > size - pos) {
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
                if (scan == Scan::corrupt) why = "inside a transaction: " + why;
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
            why = "inside a transaction: " + why;
            return Scan::corrupt;
        }
        Decoded decoded;
        if (!decode(record, decoded, why)) {
            why = "inside a transaction: " + why;
            return Scan::corrupt;
        }
        if (record.type == jf::kMulti || record.type == jf::kExec) {
            why = std::string("a ") + jf::type_name(record.type) + " record inside a transaction";
            return Scan::corrupt;
        }
        records.emplace_back(record, decoded);
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

// apply_record for a transaction's records.
bool apply_unit(Applier& applier, const std::vector<std::pair<Record, Decoded>>& unit,
                bool isolated, std::string& why) {
    try {
        return applier.apply_transaction(unit, isolated, why);
    } catch (const std::bad_alloc&) {
        why = "out of memory applying a transaction";
    } catch (const std::length_error&) {
        why = "out of memory applying a transaction";
    }
    return false;
}

// Replays one segment: the records at or past `snapshot_position` are
// applied, the others counted as skipped. A torn record ends the last
// segment (the file is cut there). `end` gets the stream offset it reached.
bool replay_segment(const SegmentFile& segment, bool last, std::uint64_t snapshot_position,
                    Applier& applier, ReplayStats& stats, std::uint64_t& end, std::string& error) {
    MappedFile file;
    if (!file.open(segment.path, error)) return false;
    std::size_t pos = jf::kSegmentHeaderBytes;
    std::vector<std::pair<Record, Decoded>> unit;
    while (pos < file.size()) {
        Record record{};
        std::string why;
        Scan scan = next_record(file, pos, record, why);
        const std::uint64_t offset = segment.start + (pos - jf::kSegmentHeaderBytes);
        Decoded decoded;
        std::size_t unit_end = 0;
        if (scan == Scan::ok && record.type == jf::kMulti) {
            // A transaction is one unit: whole or, at the end of the newest
            // segment, cut off whole.
            if (!decode(record, decoded, why)) {
                error = segment.path + ": offset " + std::to_string(offset) + ": " + why;
                return false;
            }
            scan = scan_transaction(file.data(), file.size(),
                                    pos + jf::kRecordOverhead + record.body_size, decoded.span,
                                    false, unit, unit_end, why);
        }
        if (scan == Scan::torn && last) {
            stats.truncated_bytes = file.size() - pos;
            spdlog::warn(
                "journal: {}: {} at offset {} (file byte {}); cutting {} bytes off the end "
                "(a crash during a write)",
                segment.path, why, offset, pos, stats.truncated_bytes);
            if (::truncate(segment.path.c_str(), static_cast<off_t>(pos)) != 0) {
                error = segment.path + ": cannot truncate the torn record: " + errno_text(errno);
                return false;
            }
            break;
        }
        if (scan != Scan::ok) {
            error = segment.path + ": offset " + std::to_string(offset) + " (file byte " +
                    std::to_string(pos) + "): " + why + "; run bloomery --check-journal on it";
            return false;
        }
        if (record.type == jf::kMulti) {
            if (offset >= snapshot_position) {
                if (!apply_unit(applier, unit, false, why)) {
                    error = segment.path + ": offset " + std::to_string(offset) +
                            ": in a transaction: " + why;
                    return false;
                }
                stats.records += unit.size();
            } else {
                stats.skipped += unit.size();
            }
            pos = unit_end;
            continue;
        }
        if (!decode(record, decoded, why)) {
            error = segment.path + ": offset " + std::to_string(offset) + ": " + why;
            return false;
        }
        if (offset >= snapshot_position) {
            if (!apply_record(applier, record, decoded, why)) {
                error = segment.path + ": offset " + std::to_string(offset) + ": " + why;
                return false;
            }
            ++stats.records;
        } else {
            ++stats.skipped;
        }
        pos += jf::kRecordOverhead + record.body_size;
    }
    end = segment.start + (std::min<std::size_t>(pos, file.size()) - jf::kSegmentHeaderBytes);
    return true;
}

}  // namespace

bool replay_journal(const std::string& dir, const std::string& basename, bool have_snapshot,
                    std::uint64_t snapshot_id, std::uint64_t snapshot_position,
                    store::Keyspace& keyspace, ReplayStats& stats, std::string& error) {
    const auto began = std::chrono::steady_clock::now();
    // Read every header; keep the segments of the snapshot's journal (or,
    // without a snapshot, of the one journal there is).
    std::vector<SegmentFile> segments = list_segments(dir, basename);
    drop_unfinished_newest(segments);
    if (!read_headers(segments, error)) return false;
    std::uint64_t id = snapshot_id;
    if (!have_snapshot && !segments.empty()) id = segments.front().header.id;
    const std::vector<SegmentFile> ours = segments_of(segments, id);
    stats = ReplayStats{};
    stats.id = id;
    stats.end = snapshot_position;
    if (ours.empty()) {
        stats.seconds = 0;
        return true;
    }
    if (ours.front().start > snapshot_position) {
        error = ours.front().path + ": the journal starts at offset " +
                std::to_string(ours.front().start) + " but the snapshot covers it only up to " +
                std::to_string(snapshot_position) + "; the records in between are missing";
        return false;
    }
    Applier applier(keyspace);
    std::uint64_t expected_start = ours.front().start;
    for (std::size_t s = 0; s < ours.size(); ++s) {
        const SegmentFile& segment = ours[s];
        const bool last = s + 1 == ours.size();
        // A gap is harmless only below what the snapshot covers (a tail the
        // snapshot already held was lost in a crash, and a new segment began
        // at the snapshot's position).
        if (segment.start != expected_start &&
            !(segment.start > expected_start && segment.start <= snapshot_position)) {
            error = segment.path + ": starts at offset " + std::to_string(segment.start) +
                    " but the segment before it ends at " + std::to_string(expected_start);
            return false;
        }
        std::uint64_t end = 0;
        if (!replay_segment(segment, last, snapshot_position, applier, stats, end, error)) {
            return false;
        }
        expected_start = end;
        ++stats.segments;
        if (last) {
            stats.end = std::max(end, snapshot_position);
            stats.last_segment = segment.path;
        }
    }
    if (stats.end > expected_start) {
        // The snapshot covers more than the journal holds (its tail was cut
        // off as torn after the snapshot was made): start a new segment.
        stats.last_segment.clear();
    }
    stats.max_filter_id = applier.max_id();
    bloom::ScalableFilter::reserve_ids_through(stats.max_filter_id);
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    return true;
}

struct StreamApplier::Impl {
    explicit Impl(store::Keyspace& keyspace) : applier(keyspace) {}
    Applier applier;
    std::uint64_t records = 0;
    std::vector<std::pair<Record, Decoded>> unit;  // a transaction's records
};

StreamApplier::StreamApplier(store::Keyspace& keyspace) : impl_(std::make_unique<Impl>(keyspace)) {}

StreamApplier::~StreamApplier() = default;

std::uint64_t StreamApplier::records() const {
    return impl_->records;
}

bool StreamApplier::apply(std::string_view data, std::size_t& consumed, std::string& error) {
    const auto* base = reinterpret_cast<const unsigned char*>(data.data());
    consumed = 0;
    while (consumed < data.size()) {
        const std::size_t left = data.size() - consumed;
        // Wait for the whole record: a stream ends mid-record all the time.
        if (left < jf::kRecordOverhead) return true;
        const std::uint64_t body = get_u32(base + consumed);
        if (body > jf::kMaxRecordBody) {
            error = "replication stream: a record of " + std::to_string(body) + " bytes";
            return false;
        }
        if (left < jf::kRecordOverhead + body) return true;
        Record record{};
        std::string why;
        // Whole, so anything but ok (a bad checksum, zeros) is corruption.
        const std::size_t end = consumed + jf::kRecordOverhead + static_cast<std::size_t>(body);
        const Scan scan = next_record(base, end, consumed, record, why);
        if (scan != Scan::ok) {
            error = "replication stream: " + why;
            return false;
        }
        Decoded decoded;
        if (!decode(record, decoded, why)) {
            error = "replication stream: " + why;
            return false;
        }
        if (record.type == jf::kMulti) {
            // Applied once the whole unit is here (the bytes wait, unconsumed).
            std::size_t unit_end = 0;
            const Scan unit_scan = scan_transaction(base, data.size(), end, decoded.span, true,
                                                    impl_->unit, unit_end, why);
            if (unit_scan == Scan::torn) return true;
            if (unit_scan != Scan::ok) {
                error = "replication stream: " + why;
                return false;
            }
            if (!apply_unit(impl_->applier, impl_->unit, true, why)) {
                error = "replication stream: in a transaction: " + why;
                return false;
            }
            impl_->records += impl_->unit.size();
            consumed = unit_end;
            continue;
        }
        bool applied = false;
        try {
            applied = impl_->applier.apply(record.type, decoded, why);
        } catch (const std::exception&) {
            why = std::string("out of memory applying a ") + jf::type_name(record.type) + " record";
        }
        if (!applied) {
            error = std::string("replication stream: ") + why;
            return false;
        }
        ++impl_->records;
        consumed = end;
    }
    return true;
}

bool check_journal(const std::string& path, bool fix, std::string& report, std::string& error) {
    MappedFile file;
    SegmentHeader header;
    if (!file.open(path, error) || !parse_segment_header(file, path, header, error)) return false;
    report += "journal " + path + "\n";
    report += "format version " + std::to_string(jf::kVersion) + ", journal id " +
              std::to_string(header.id) + ", starts at offset " + std::to_string(header.start) +
              "\n";
    std::uint64_t counts[jf::kLastRecordType + 1] = {};
    std::uint64_t adds = 0;
    std::size_t pos = jf::kSegmentHeaderBytes;
    std::string problem;
    std::vector<std::pair<Record, Decoded>> unit;
    while (pos < file.size()) {
        Record record{};
        std::string why;
        const Scan scan = next_record(file, pos, record, why);
        Decoded decoded;
        if (scan == Scan::ok && !decode(record, decoded, why)) {
            problem = why;
        } else if (scan != Scan::ok) {
            problem = why + (scan == Scan::torn ? " (a torn last write)" : "");
        } else if (record.type == jf::kExec) {
            problem = "an EXEC record outside a transaction";
        } else if (record.type == jf::kMulti) {
            // A transaction is checked, counted and, with --fix, cut whole.
            std::size_t unit_end = 0;
            const Scan unit_scan =
                scan_transaction(file.data(), file.size(), pos + jf::kRecordOverhead + 8,
                                 decoded.span, false, unit, unit_end, why);
            if (unit_scan != Scan::ok) {
                problem = why + (unit_scan == Scan::torn ? " (a torn last write)" : "");
            } else {
                counts[jf::kMulti] += 1;
                counts[jf::kExec] += 1;
                for (const auto& [inner, inner_decoded] : unit) {
                    ++counts[inner.type];
                    if (inner.type == jf::kAdd) adds += inner_decoded.count;
                }
                pos = unit_end;
                continue;
            }
        }
        if (!problem.empty()) break;
        ++counts[record.type];
        if (record.type == jf::kAdd) adds += decoded.count;
        pos += jf::kRecordOverhead + record.body_size;
    }
    for (std::uint8_t type = jf::kCreate; type <= jf::kLastRecordType; ++type) {
        report += std::string(jf::type_name(type)) + " records: " + std::to_string(counts[type]);
        if (type == jf::kAdd) report += " (" + std::to_string(adds) + " items)";
        report += "\n";
    }
    const std::uint64_t good_end = header.start + (pos - jf::kSegmentHeaderBytes);
    report += "valid up to offset " + std::to_string(good_end) + " (file byte " +
              std::to_string(pos) + " of " + std::to_string(file.size()) + ")\n";
    if (problem.empty()) {
        report += "OK\n";
        return true;
    }
    const std::string where = path + ": offset " + std::to_string(good_end) + " (file byte " +
                              std::to_string(pos) + "): " + problem;
    if (!fix) {
        error = where + "; --fix cuts the file there, losing " + std::to_string(file.size() - pos) +
                " bytes";
        return false;
    }
    if (::truncate(path.c_str(), static_cast<off_t>(pos)) != 0) {
        error = where + "; cannot truncate: " + errno_text(errno);
        return false;
    }
    report +=
        "fixed: " + where + "; cut " + std::to_string(file.size() - pos) + " bytes off the end\n";
    return true;
}

}  // namespace bloomery::persist
