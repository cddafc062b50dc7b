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
#include "bloomery/persist/journal_reader.hpp"
#include "journal_apply.hpp"
#include "journal_format.hpp"
#include "journal_records.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

namespace jf = journal_format;
using format::errno_text;
using format::get_u32;
using format::get_u64;

using journal_apply::Applier;
using journal_apply::apply_record;
using journal_apply::apply_unit;
using journal_apply::Isolation;
using journal_records::decode;
using journal_records::Decoded;
using journal_records::MappedFile;
using journal_records::next_record;
using journal_records::parse_segment_header;
using journal_records::Record;
using journal_records::Scan;
using journal_records::scan_transaction;
using journal_records::SegmentHeader;
using journal_records::Source;

namespace {

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

// Whether the `size` bytes of the file at `path` can be the start of the
// header of segment `start`, as a crash while it was created leaves it:
// the magic, version and reserved word, and the start offset, as far as
// they go.
bool begins_a_header(const std::string& path, std::uint64_t start, std::size_t size) {
    if (size == 0) return true;  // created, nothing written yet
    unsigned char expected[jf::kSegmentHeaderBytes] = {};
    std::memcpy(expected, jf::kMagic, 8);
    format::put_u32(expected + 8, jf::kVersion);
    format::put_u64(expected + 24, start);
    std::string present(size, '\0');
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const ssize_t n = ::read(fd, present.data(), size);
    ::close(fd);
    if (n != static_cast<ssize_t>(size)) return false;
    // Bytes 16-23 (the journal's id) and the checksum could be anything.
    for (std::size_t i = 0; i < size && i < 32; ++i) {
        if (i >= 16 && i < 24) continue;
        if (static_cast<unsigned char>(present[i]) != expected[i]) return false;
    }
    return true;
}

// A crash while a segment was being created can leave the newest one
// shorter than its header (nothing was ever appended to it): drop it. A
// short file whose bytes are not such a start was not written by this
// server: the start is refused, naming it, and the file is left alone.
core::Status drop_unfinished_newest(std::vector<SegmentFile>& segments) {
    if (segments.empty()) return {};
    std::error_code ec;
    const SegmentFile& newest = segments.back();
    const auto size = std::filesystem::file_size(newest.path, ec);
    if (ec || size >= jf::kSegmentHeaderBytes) return {};
    if (!begins_a_header(newest.path, newest.start, static_cast<std::size_t>(size))) {
        return core::Error{newest.path + ": " + std::to_string(size) +
                           " bytes that do not begin a journal segment; not a file this server "
                           "wrote (left as it is): move it out of the data directory"};
    }
    spdlog::warn("journal: {} is {} bytes, a segment cut short while it was created; removing it",
                 newest.path, size);
    std::filesystem::remove(newest.path, ec);
    segments.pop_back();
    return {};
}

// Every segment's header, checked against its name.
core::Status read_headers(std::vector<SegmentFile>& segments) {
    for (SegmentFile& segment : segments) {
        MappedFile file;
        if (core::Status opened = file.open(segment.path); !opened) return opened;
        core::Result<SegmentHeader> header = parse_segment_header(file, segment.path);
        if (!header) return header.failure();
        segment.header = *header;
        if (segment.header.start != segment.start) {
            return core::Error{segment.path + ": header says it starts at offset " +
                               std::to_string(segment.header.start) + ", its name at " +
                               std::to_string(segment.start)};
        }
    }
    return {};
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

// Whether a segment is the newest, which may end in a write a crash cut
// short, or a sealed one, which must be whole.
enum class SegmentRole { sealed, newest };

// The newest segment ends in a torn write (`why`, at file byte `pos`,
// stream offset `offset`): cut off, with a warning.
core::Status cut_torn_tail(const SegmentFile& segment, std::size_t file_size, std::size_t pos,
                           std::uint64_t offset, const std::string& why, ReplayStats& stats) {
    stats.truncated_bytes = file_size - pos;
    spdlog::warn(
        "journal: {}: {} at offset {} (file byte {}); cutting {} bytes off the end "
        "(a crash during a write)",
        segment.path, why, offset, pos, stats.truncated_bytes);
    if (::truncate(segment.path.c_str(), static_cast<off_t>(pos)) != 0) {
        return core::Error{segment.path +
                           ": cannot truncate the torn record: " + errno_text(errno)};
    }
    return {};
}

// Replays one segment: the records at or past `snapshot_position` are
// applied, the others counted as skipped. A torn record ends the newest
// segment (the file is cut there). Returns the stream offset it reached.
core::Result<std::uint64_t> replay_segment(const SegmentFile& segment, SegmentRole role,
                                           std::uint64_t snapshot_position, Applier& applier,
                                           ReplayStats& stats) {
    MappedFile file;
    if (core::Status opened = file.open(segment.path); !opened) return opened.failure();
    const auto failed_at = [&segment](std::uint64_t offset, const std::string& why) {
        return core::Error{segment.path + ": offset " + std::to_string(offset) + ": " + why};
    };
    std::size_t pos = jf::kSegmentHeaderBytes;
    std::vector<std::pair<Record, Decoded>> unit;
    while (pos < file.size()) {
        Record record{};
        std::string why;
        Scan scan = next_record(file, pos, record, why);
        const std::uint64_t offset = segment.start + (pos - jf::kSegmentHeaderBytes);
        Decoded decoded;
        if (scan == Scan::ok) {
            core::Result<Decoded> body = decode(record);
            if (!body) return failed_at(offset, body.error());
            decoded = *body;
        }
        std::size_t unit_end = 0;
        if (scan == Scan::ok && record.type == jf::kMulti) {
            // A transaction is one unit: whole or, at the end of the newest
            // segment, cut off whole.
            scan = scan_transaction(file.data(), file.size(),
                                    pos + jf::kRecordOverhead + record.body_size, decoded.span,
                                    Source::file, unit, unit_end, why);
        }
        if (scan == Scan::torn && role == SegmentRole::newest) {
            const core::Status cut = cut_torn_tail(segment, file.size(), pos, offset, why, stats);
            if (!cut) return cut.failure();
            break;
        }
        if (scan != Scan::ok) {
            return core::Error{segment.path + ": offset " + std::to_string(offset) +
                               " (file byte " + std::to_string(pos) + "): " + why +
                               "; run bloomery --check-journal on it"};
        }
        const bool covered = offset < snapshot_position;
        if (record.type == jf::kMulti) {
            if (covered) {
                stats.skipped += unit.size();
            } else if (const core::Status applied = apply_unit(applier, unit, Isolation::none);
                       !applied) {
                return failed_at(offset, "in a transaction: " + applied.error());
            } else {
                stats.records += unit.size();
            }
            pos = unit_end;
            continue;
        }
        if (covered) {
            ++stats.skipped;
        } else if (const core::Status applied = apply_record(applier, record, decoded); !applied) {
            return failed_at(offset, applied.error());
        } else {
            ++stats.records;
        }
        pos += jf::kRecordOverhead + record.body_size;
    }
    return segment.start + (std::min<std::size_t>(pos, file.size()) - jf::kSegmentHeaderBytes);
}

// Replays the segments of one journal, oldest first, each from where the
// one before it ended.
core::Status replay_segments(const std::vector<SegmentFile>& ours, std::uint64_t snapshot_position,
                             Applier& applier, ReplayStats& stats) {
    std::uint64_t expected_start = ours.front().start;
    for (std::size_t s = 0; s < ours.size(); ++s) {
        const SegmentFile& segment = ours[s];
        const bool last = s + 1 == ours.size();
        // A gap is harmless only below what the snapshot covers (a tail the
        // snapshot already held was lost in a crash, and a new segment began
        // at the snapshot's position).
        if (segment.start != expected_start &&
            !(segment.start > expected_start && segment.start <= snapshot_position)) {
            return core::Error{
                segment.path + ": starts at offset " + std::to_string(segment.start) +
                " but the segment before it ends at " + std::to_string(expected_start)};
        }
        const core::Result<std::uint64_t> end =
            replay_segment(segment, last ? SegmentRole::newest : SegmentRole::sealed,
                           snapshot_position, applier, stats);
        if (!end) return end.failure();
        expected_start = *end;
        ++stats.segments;
        if (last) {
            stats.end = std::max(*end, snapshot_position);
            stats.last_segment = segment.path;
        }
    }
    if (stats.end > expected_start) {
        // The snapshot covers more than the journal holds (its tail was cut
        // off as torn after the snapshot was made): start a new segment.
        stats.last_segment.clear();
    }
    return {};
}

}  // namespace

core::Result<ReplayStats> replay_journal(const std::string& dir, const std::string& basename,
                                         const std::optional<JournalCoverage>& snapshot,
                                         store::Keyspace& keyspace) {
    const auto began = std::chrono::steady_clock::now();
    // Read every header; keep the segments of the snapshot's journal (or,
    // without a snapshot, of the one journal there is).
    std::vector<SegmentFile> segments = list_segments(dir, basename);
    if (core::Status dropped = drop_unfinished_newest(segments); !dropped) return dropped.failure();
    if (core::Status read = read_headers(segments); !read) return read.failure();
    std::uint64_t id = snapshot ? snapshot->id : 0;
    if (!snapshot && !segments.empty()) id = segments.front().header.id;
    const std::uint64_t snapshot_position = snapshot ? snapshot->offset : 0;
    const std::vector<SegmentFile> ours = segments_of(segments, id);
    ReplayStats stats;
    stats.id = id;
    stats.end = snapshot_position;
    if (ours.empty()) return stats;
    if (ours.front().start > snapshot_position) {
        return core::Error{
            ours.front().path + ": the journal starts at offset " +
            std::to_string(ours.front().start) + " but the snapshot covers it only up to " +
            std::to_string(snapshot_position) + "; the records in between are missing"};
    }
    Applier applier(keyspace);
    if (core::Status replayed = replay_segments(ours, snapshot_position, applier, stats);
        !replayed) {
        return replayed.failure();
    }
    stats.max_filter_id = applier.max_id();
    bloom::ScalableFilter::reserve_ids_through(stats.max_filter_id);
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    return stats;
}

namespace {

// What --check-journal's walk over a segment's records found.
struct SegmentWalk {
    std::uint64_t counts[jf::kLastRecordType + 1] = {};
    std::uint64_t adds = 0;
    std::size_t pos = jf::kSegmentHeaderBytes;  // after the last good record (or unit)
    std::string problem;                        // empty: every record good
    bool torn = false;                          // the problem is a torn last write
};

// Walks the records of `file` from its header on, counting them, until the
// end or the first bad one. A transaction is checked and counted whole (and
// with --fix cut whole).
SegmentWalk walk_segment(const MappedFile& file) {
    SegmentWalk walk;
    std::vector<std::pair<Record, Decoded>> unit;
    while (walk.pos < file.size()) {
        Record record{};
        std::string why;
        Scan scan = next_record(file, walk.pos, record, why);
        Decoded decoded;
        if (scan == Scan::ok) {
            core::Result<Decoded> body = decode(record);
            if (!body) {
                walk.problem = body.error();
                break;
            }
            decoded = *body;
        }
        if (scan == Scan::ok && record.type == jf::kExec) {
            walk.problem = "an EXEC record outside a transaction";
            break;
        }
        std::size_t unit_end = 0;
        if (scan == Scan::ok && record.type == jf::kMulti) {
            scan = scan_transaction(file.data(), file.size(), walk.pos + jf::kRecordOverhead + 8,
                                    decoded.span, Source::file, unit, unit_end, why);
        }
        if (scan != Scan::ok) {
            walk.torn = scan == Scan::torn;
            walk.problem = why + (walk.torn ? " (a torn last write)" : "");
            break;
        }
        if (record.type == jf::kMulti) {
            walk.counts[jf::kMulti] += 1;
            walk.counts[jf::kExec] += 1;
            for (const auto& [inner, inner_decoded] : unit) {
                ++walk.counts[inner.type];
                if (inner.type == jf::kAdd) walk.adds += inner_decoded.count;
            }
            walk.pos = unit_end;
            continue;
        }
        ++walk.counts[record.type];
        if (record.type == jf::kAdd) walk.adds += decoded.count;
        walk.pos += jf::kRecordOverhead + record.body_size;
    }
    return walk;
}

}  // namespace

JournalCheckReport check_journal(const std::string& path, JournalRepair repair) {
    JournalCheckReport result;
    MappedFile file;
    if (core::Status opened = file.open(path); !opened) {
        result.problem = opened.error();
        return result;
    }
    const core::Result<SegmentHeader> header = parse_segment_header(file, path);
    if (!header) {
        result.problem = header.error();
        return result;
    }
    std::string& report = result.report;
    report += "journal " + path + "\n";
    report += "format version " + std::to_string(jf::kVersion) + ", journal id " +
              std::to_string(header->id) + ", starts at offset " + std::to_string(header->start) +
              "\n";
    const SegmentWalk walk = walk_segment(file);
    const std::size_t pos = walk.pos;
    for (std::uint8_t type = jf::kCreate; type <= jf::kLastRecordType; ++type) {
        report +=
            std::string(jf::type_name(type)) + " records: " + std::to_string(walk.counts[type]);
        if (type == jf::kAdd) report += " (" + std::to_string(walk.adds) + " items)";
        report += "\n";
    }
    const std::uint64_t good_end = header->start + (pos - jf::kSegmentHeaderBytes);
    report += "valid up to offset " + std::to_string(good_end) + " (file byte " +
              std::to_string(pos) + " of " + std::to_string(file.size()) + ")\n";
    if (walk.problem.empty()) {
        report += "OK\n";
        result.verdict = JournalCheck::valid;
        return result;
    }
    const std::string where = path + ": offset " + std::to_string(good_end) + " (file byte " +
                              std::to_string(pos) + "): " + walk.problem;
    result.verdict = walk.torn ? JournalCheck::torn_tail : JournalCheck::corrupt;
    if (repair == JournalRepair::none) {
        result.problem = where +
                         (walk.torn ? "; a server starting on it cuts the torn write off (if this "
                                      "is its newest segment)"
                                    : "") +
                         "; --fix cuts the file there, losing " +
                         std::to_string(file.size() - pos) + " bytes";
        return result;
    }
    if (::truncate(path.c_str(), static_cast<off_t>(pos)) != 0) {
        result.problem = where + "; cannot truncate: " + errno_text(errno);
        return result;
    }
    report +=
        "fixed: " + where + "; cut " + std::to_string(file.size() - pos) + " bytes off the end\n";
    result.verdict = JournalCheck::valid;
    return result;
}

}  // namespace bloomery::persist
