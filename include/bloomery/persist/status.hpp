#pragma once
// What the persistence layer reports: how a snapshot attempt ended and the
// state INFO persistence shows. Plain data; the command layer words replies
// from it.

#include <cstdint>
#include <string>

namespace bloomery::persist {

// How a snapshot attempt ended. The command layer words the reply; the
// persistence layer only says what happened.
enum class SaveStatus {
    ok,
    in_progress,  // another save is running
    failed,       // I/O or resource error; `detail` names the file and errno text
};

struct SaveResult {
    SaveStatus status = SaveStatus::ok;
    std::string detail;  // empty unless failed

    bool ok() const { return status == SaveStatus::ok; }
};

// The journal's state for INFO persistence (Redis's aof_* fields).
struct JournalInfo {
    bool enabled = false;
    std::string fsync_policy;
    bool last_write_ok = true;
    std::string last_write_error;
    std::uint64_t current_size = 0;   // bytes of every segment
    std::uint64_t base_size = 0;      // ...after start or the last snapshot's cleanup
    std::uint64_t buffer_length = 0;  // bytes appended and not yet durable
    bool fsync_in_progress = false;
    std::uint64_t delayed_fsync = 0;  // fdatasyncs that took over 2 s
    std::uint64_t fsyncs = 0;
    std::int64_t last_fsync_ms = 0;       // how long the last fdatasync took
    std::int64_t last_fsync_unix_ms = 0;  // when the last one succeeded; 0: never
    std::uint64_t segments = 0;
    std::uint64_t appended_offset = 0;
    std::uint64_t durable_offset = 0;
};

struct PersistenceInfo {
    bool enabled = false;  // a save spec is configured
    bool bgsave_in_progress = false;
    std::uint64_t changes_since_last_save = 0;
    std::int64_t last_save_time = 0;  // unix seconds
    bool last_bgsave_ok = true;
    std::int64_t last_bgsave_time_sec = -1;
    double last_save_duration_seconds = -1;  // of the last attempt, ok or not; -1: none yet
    std::int64_t current_bgsave_time_sec = -1;
    std::uint64_t saves = 0;
    std::uint64_t last_save_bytes = 0;
    std::uint64_t last_save_keys = 0;
    std::string last_error;
    bool loading = false;
    std::uint64_t loaded_keys = 0;  // live when the snapshot was loaded
    // Erased once the journal was replayed, their deadline passed (a primary).
    std::uint64_t loaded_expired_keys = 0;
    double load_seconds = 0;
    std::uint64_t replayed_records = 0;  // journal records applied at start
    JournalInfo journal;                 // enabled = false with --appendonly no
};

}  // namespace bloomery::persist
