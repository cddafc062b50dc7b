#pragma once
// Snapshots: the whole keyspace in one file, written while clients keep adding,
// read back at start. The format is specified byte by byte in proto/snapshot.md.
//
// Guarantees:
// - A snapshot on disk is either the previous complete file or the new complete
//   file, never a mix: the writer streams into a temporary file in the same
//   directory, fsyncs it, renames it over the target and fsyncs the directory.
// - Every add acknowledged before save_snapshot() was called is in the file
//   (bits only go 0 -> 1, so copying live words while others add is safe).
// - The loader inserts nothing unless the whole file verified: magic, version,
//   every field's range, every record checksum and the whole-file checksum.
//
// Thread safety: all functions may run concurrently with any Keyspace traffic.
// Two saves to the same path may run at once (each has its own temporary file;
// the last rename wins), but the server is expected to serialize them.
// None of these functions throws: every failure is returned as a
// human-readable reason (lower case, no trailing period) naming the file.

#include <cstdint>
#include <functional>
#include <string>

#include "bloomery/core/result.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::persist {

// The on-disk format this build writes, and the oldest it still reads.
// Version 2 added the layout (a byte per filter and per layer); version 3 the
// journal position the snapshot covers and each filter's journal id;
// version 4 each filter's hash scheme (and a RedisBloom-scheme filter's own
// fields); version 5 a layer's words as runs of non-zero words, not every
// word. Versions 1 (every filter classic) to 4 still load (1 to 3 as
// bloomery's scheme).
inline constexpr std::uint32_t kSnapshotFormatVersion = 5;
inline constexpr std::uint32_t kOldestSnapshotFormatVersion = 1;
inline constexpr char kSnapshotMagic[8] = {'B', 'L', 'O', 'O', 'M', 'E', 'R', 'Y'};

struct SaveStats {
    std::uint64_t keys = 0;            // filter records written
    std::uint64_t bytes = 0;           // size of the new file
    double seconds = 0;                // wall time of the whole save, fsyncs included
    std::uint64_t journal_id = 0;      // the journal attached to the keyspace (0: none)
    std::uint64_t journal_offset = 0;  // records before this offset are in the file
};

// Writes every live key of `keyspace` to `path`.
//
// Streams into "<path>.tmp-<pid>-<n>" with a fixed ~2 MiB of buffers (filter
// words are copied 1 MiB at a time, so memory does not double for big filters),
// fsyncs it, renames it over `path` and fsyncs the directory. The set of keys
// is taken at one instant (Keyspace::view(): every shard locked together while
// references are copied), so a key renamed, deleted or re-created during the
// save is in the file exactly once, as it was at that instant; no keyspace
// lock is held while filter words are copied and written.
//
// On failure (missing directory, EACCES, ENOSPC, EIO, EFBIG from RLIMIT_FSIZE
// with SIGXFSZ ignored, ...) the temporary file is removed, the file at `path`
// is untouched, and the reason names the file and the errno text. One
// exception: if only the final directory fsync fails, the new file is already
// in place (renamed) but may not survive a power loss; that is reported as a
// failure too.
core::Result<SaveStats> save_snapshot(const store::Keyspace& keyspace, const std::string& path);

// Takes `size` bytes of a streamed snapshot; false: the receiver is gone
// (the stream stops with an error).
using SnapshotSink = std::function<bool(const unsigned char* data, std::size_t size)>;

// Told the journal position a streamed snapshot covers, once its keys are
// chosen and before any byte goes to the sink (a replica's stream starts
// there).
using SnapshotPositionListener = std::function<void(std::uint64_t journal_offset)>;

// The snapshot save_snapshot() would write, handed to `sink` in pieces of
// about 2 MiB instead of a file: a replica's full synchronization, with no
// temporary file on this server's disk. `name` names the receiver in errors.
core::Result<SaveStats> stream_snapshot(const store::Keyspace& keyspace, const SnapshotSink& sink,
                                        const SnapshotPositionListener& on_position,
                                        const std::string& name);

struct LoadStats {
    std::uint64_t keys = 0;           // keys inserted into the keyspace
    std::uint64_t bytes = 0;          // size of the file read
    std::uint64_t past_deadline = 0;  // keys loaded whose deadline had passed
    double seconds = 0;
    std::uint64_t journal_id = 0;  // what the file covers of which journal (0, 0: none)
    std::uint64_t journal_offset = 0;
};

// Reads the snapshot at `path` into `keyspace`, which should be empty (a key
// already present under the same name is replaced).
//
// All-or-nothing: every record is parsed and verified into a temporary list
// first; the keyspace is touched only after the trailer checksum matched.
// Keys whose deadline has passed are verified but not loaded (counted in
// `expired_skipped`). Every field is checked against the bounds every path
// shares (bloom/bounds.hpp, in their stored-filter form), and no size is
// trusted before it is checked against the bytes remaining in the file, so a
// hostile file cannot make the loader allocate more than the file's own size.
// --max-filter-bytes is deliberately not applied: it bounds what clients may
// create, and a server restarted with a lower value must still load its data.
//
// A failure reads like "PATH: record 3 (key 'foo') at offset 1234: record
// checksum mismatch" (records count from 1; offsets are byte offsets of the
// offending field from the start of the file).
core::Result<LoadStats> load_snapshot(const std::string& path, store::Keyspace& keyspace);

// What check_snapshot() found.
struct SnapshotCheck {
    // One line per item: format version, creation time, then per key its
    // name, expiry, options, layers, capacity, items and bytes, then totals;
    // on failure, what was read up to the problem.
    std::string report;
    // Failed: the reason, worded as for load_snapshot().
    core::Status verdict;
};
// Verifies the snapshot at `path` without loading it (no filter is
// allocated) and describes it. For `bloomery --check-snapshot FILE`, like
// redis-check-rdb.
SnapshotCheck check_snapshot(const std::string& path);

}  // namespace bloomery::persist
