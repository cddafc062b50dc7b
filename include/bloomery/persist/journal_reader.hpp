#pragma once
// Reading the journal back (proto/journal.md): replay at start
// (journal_reader.cpp), a replica's stream of records (journal_apply.cpp)
// and `bloomery --check-journal`. Records are redone as they say: nothing is
// decided again.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "bloomery/core/result.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::persist {

// Applies a replication stream (the journal's records as a primary sends
// them, proto/replication.md) to a keyspace, finding filters by the ids the
// primary journaled them under: a replica's link. Records are redone through
// the keyspace's write path, so the replica's own journal (the keyspace's
// mutation log, if any) records them as its own. Not thread-safe: one
// applier per link, called from its thread; the keyspace may be read by
// others meanwhile (the link is the replica's only writer).
class StreamApplier {
public:
    // Indexes the filters now in `keyspace` by id.
    explicit StreamApplier(store::Keyspace& keyspace);
    ~StreamApplier();
    StreamApplier(const StreamApplier&) = delete;
    StreamApplier& operator=(const StreamApplier&) = delete;
    // What apply() did.
    struct Applied {
        std::size_t consumed = 0;  // bytes of the whole records applied
        // Bytes up to the end of the last one that changed data (not a
        // keepalive), if any did.
        std::optional<std::size_t> changes_end;
        // Failed on a record that fails its checksum, does not decode or
        // cannot be applied (`consumed` then stops before it).
        core::Status status;
    };
    // Applies every whole record at the start of `data` (a record cut off
    // at the end waits for more).
    Applied apply(std::string_view data);
    std::uint64_t records() const;  // applied so far

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// What replay_journal found.
struct ReplayStats {
    std::uint64_t id = 0;      // the journal's id (0: none)
    std::uint64_t end = 0;     // offset after the last good record
    std::string last_segment;  // path of the newest segment ("" if none)
    std::uint64_t segments = 0;
    std::uint64_t records = 0;          // records applied
    std::uint64_t skipped = 0;          // records before the snapshot's position
    std::uint64_t truncated_bytes = 0;  // torn tail cut off the last segment
    std::uint64_t max_filter_id = 0;
    double seconds = 0;
};

// What a snapshot covers of the journal: the records of journal `id` before
// `offset`.
struct JournalCoverage {
    std::uint64_t id = 0;
    std::uint64_t offset = 0;
};

// Replays the journal in `dir` into `keyspace`, which was loaded from a
// snapshot covering `snapshot` (none: nothing was loaded, and the one
// journal there is replays whole). Segments of another journal are renamed
// to "*.stale" with a warning. A torn last record of the newest segment is
// cut off with a warning; any other bad record fails with the file, the
// offset and the reason.
core::Result<ReplayStats> replay_journal(const std::string& dir, const std::string& basename,
                                         const std::optional<JournalCoverage>& snapshot,
                                         store::Keyspace& keyspace);

// What `bloomery --check-journal` found (its exit codes: 0, 2, 1).
enum class JournalCheck {
    valid,      // every record good (or made so by --fix)
    torn_tail,  // good but for a last record cut short, as a crash during a write
                // leaves it: the server cuts it off at start, with a warning
                // (in the newest segment; in any other it refuses to start)
    corrupt,    // anything else, or unreadable: the server refuses to start
};
// Whether --check-journal cuts a bad tail (torn or corrupt) off at the
// last good record (--fix).
enum class JournalRepair { none, cut_bad_tail };
struct JournalCheckReport {
    JournalCheck verdict = JournalCheck::corrupt;
    std::string report;   // the segment's records described (empty if unreadable)
    std::string problem;  // where and why, when the verdict is not valid
};
// For `bloomery --check-journal FILE [--fix]`: verifies one segment and
// describes its records.
JournalCheckReport check_journal(const std::string& path, JournalRepair repair);

}  // namespace bloomery::persist
