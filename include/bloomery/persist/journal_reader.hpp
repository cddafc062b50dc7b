#pragma once
// Reading the journal back (proto/journal.md): replay at start
// (journal_reader.cpp), a replica's stream of records (journal_apply.cpp)
// and `bloomery --check-journal`. Records are redone as they say: nothing is
// decided again.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

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
    // Applies every whole record at the start of `data` and sets `consumed`
    // to the bytes they took (a record cut off at the end waits for more).
    // False with `error` on a record that fails its checksum, does not
    // decode or cannot be applied; `consumed` then stops before it.
    bool apply(std::string_view data, std::size_t& consumed, std::string& error);
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

// Replays the journal in `dir` into `keyspace` (loaded from a snapshot that
// covers journal `snapshot_id` up to `snapshot_position`; 0, 0 without
// one). Segments of another journal are renamed to "*.stale" with a warning.
// A torn last record of the newest segment is cut off with a warning; any
// other bad record fails with the file, the offset and the reason.
bool replay_journal(const std::string& dir, const std::string& basename, bool have_snapshot,
                    std::uint64_t snapshot_id, std::uint64_t snapshot_position,
                    store::Keyspace& keyspace, ReplayStats& stats, std::string& error);

// What `bloomery --check-journal` found (its exit codes: 0, 2, 1).
enum class JournalCheck {
    valid,      // every record good (or made so by --fix)
    torn_tail,  // good but for a last record cut short, as a crash during a write
                // leaves it: the server cuts it off at start, with a warning
                // (in the newest segment; in any other it refuses to start)
    corrupt,    // anything else, or unreadable: the server refuses to start
};
// For `bloomery --check-journal FILE [--fix]`: verifies one segment and
// describes its records in `report`. With `fix`, a bad tail (torn or
// corrupt) is cut off at the last good record. `error` says where and why
// when the result is not valid.
JournalCheck check_journal(const std::string& path, bool fix, std::string& report,
                           std::string& error);

}  // namespace bloomery::persist
