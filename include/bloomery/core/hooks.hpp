#pragma once
// What the layers above the data need from the running server, as plain data
// and one interface: the command layer calls ServerHooks, the network layer
// implements it, and persistence reports its state as PersistenceInfo and its
// outcomes as SaveResult. Nothing here knows of Asio, RESP or files, so every
// layer can include it without depending on another.

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/core/command_stats.hpp"

namespace bloomery::persist {
class Journal;
}

namespace bloomery::core {

enum class ShutdownMode { default_save, save, nosave };

// SHUTDOWN's options (Redis 7): whether to save, NOW (no wait for replicas)
// and FORCE (stop even if the final save fails).
struct ShutdownOptions {
    ShutdownMode mode = ShutdownMode::default_save;
    bool now = false;
    bool force = false;
};

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
    std::uint64_t loaded_keys = 0;
    double load_seconds = 0;
    std::uint64_t replayed_records = 0;  // journal records applied at start
    JournalInfo journal;                 // enabled = false with --appendonly no
};

struct StatsTotals {
    std::uint64_t commands = 0;
    std::uint64_t connections_received = 0;
    std::uint64_t rejected_connections = 0;
    std::uint64_t changes = 0;
    std::uint64_t keyspace_hits = 0;
    std::uint64_t keyspace_misses = 0;
    std::uint64_t expired_keys = 0;
    std::uint64_t protocol_errors = 0;
    std::uint64_t net_input_bytes = 0;
    std::uint64_t net_output_bytes = 0;
    std::uint64_t error_replies = 0;
    double instantaneous_ops_per_sec = 0;
};

// One replica as its primary sees it (INFO replication's slaveN line).
struct ReplicaInfo {
    std::string ip;
    std::uint16_t port = 0;        // its REPLCONF listening-port (0: not said)
    std::string state;             // wait_bgsave (snapshot being sent) or online
    std::uint64_t offset = 0;      // the stream offset it acknowledged
    std::int64_t lag_seconds = 0;  // since its last acknowledgement
};

// INFO replication and ROLE (net/replication.hpp; proto/replication.md).
struct ReplicationInfo {
    bool replica = false;  // role: slave (true) or master
    // The replication stream: its id (a primary's, or on a replica the
    // primary's it follows) and the offset this server has reached in it.
    std::string replid;
    std::uint64_t offset = 0;
    // Primary side.
    std::vector<ReplicaInfo> replicas;
    bool backlog_active = false;  // journal segments are there to resume from
    std::uint64_t backlog_first_offset = 0;
    std::uint64_t backlog_bytes = 0;
    std::uint64_t full_syncs = 0;
    std::uint64_t partial_syncs_ok = 0;
    std::uint64_t partial_syncs_err = 0;
    // Replica side.
    std::string primary_host;
    std::uint16_t primary_port = 0;
    bool link_up = false;
    std::int64_t last_io_seconds_ago = -1;
    std::int64_t link_down_since_seconds = -1;  // -1 while up
    bool sync_in_progress = false;
    std::uint64_t sync_received_bytes = 0;
    std::uint64_t read_offset = 0;  // received (applied: `offset`)
    std::string last_error;         // why the link last failed ("" if never)
};

// ServerHooks::replication_flags bits: asked before every command, so they are
// one relaxed load of a member, not a virtual call.
inline constexpr std::uint8_t kReplicationReplica = 1;  // writes answer -READONLY
inline constexpr std::uint8_t kReplicationLoading = 2;  // data commands answer -LOADING
// The link to the primary is down: with --replica-serve-stale-data no, data
// commands answer -MASTERDOWN.
inline constexpr std::uint8_t kReplicationStale = 4;
// No copy of the primary yet since this server became its replica: data
// commands answer -MASTERDOWN whatever the setting (an empty or old data set
// would answer 0 for items the primary holds: false negatives), and /readyz
// says 503.
inline constexpr std::uint8_t kReplicationUnsynced = 8;

// Implemented by the network layer (and by fakes in unit tests).
class ServerHooks {
public:
    // kReplication* bits, written by the replication layer.
    std::atomic<std::uint8_t> replication_flags{0};
    // Clients waiting for a deferred reply (WAIT, SAVE): INFO's
    // blocked_clients. The network layer adds one when a connection blocks
    // and takes it away when it unblocks or closes while blocked; blocking is
    // rare, so one shared counter costs nothing on the per-command path.
    std::atomic<std::int64_t> blocked_clients{0};

    virtual ~ServerHooks() = default;
    virtual std::size_t connected_clients() = 0;
    // One line per client in CLIENT LIST format; only the clients whose id is
    // in `ids` unless it is empty.
    virtual std::string client_list(std::span<const std::int64_t> ids) = 0;
    // Asks the connection with this id (or "ip:port") to close; false if none.
    virtual bool kill_client(std::int64_t id) = 0;
    virtual bool kill_client(std::string_view address) = 0;
    virtual StatsTotals stats() = 0;
    // Resets what stats() and command_stats() count (CONFIG RESETSTAT).
    virtual void reset_stats() = 0;
    // Every worker thread's per-command counters summed, indexed by command
    // id (CommandSpec::id; kMaxCommandIds entries, or none where nothing is
    // counted). Safe from any thread; O(commands x threads).
    virtual std::vector<CommandTotals> command_stats() { return {}; }
    // Persistence. save_async() snapshots off the caller's thread and calls
    // `done` exactly once, on any thread (on the caller's, before returning,
    // when it cannot start: in_progress), once the file is durable or the save
    // failed. bgsave() returns at once.
    virtual void save_async(std::function<void(SaveResult)> done) = 0;
    virtual SaveResult bgsave() = 0;
    virtual PersistenceInfo persistence() = 0;
    // True while snapshots are configured and the last attempt failed (Redis's
    // condition for -MISCONF). Lock-free: asked before every write command.
    virtual bool snapshot_failing() = 0;
    // The journal (persist/journal.hpp), or null when it is off. Commands
    // log to it (adds, LOADCHUNK data) and refuse writes while it fails.
    virtual persist::Journal* journal() { return nullptr; }
    // SHUTDOWN: saves as `options.mode` says, off the caller's thread, then
    // stops the server (replicas get up to --shutdown-timeout to acknowledge
    // every write first, unless `options.now`). Returns at once. `failed` is
    // called once, on any thread, only if the server keeps running: the save
    // failed (without `options.force`) or SHUTDOWN ABORT came first; it is
    // never called when the server stops (the connection just closes).
    virtual void begin_shutdown(const ShutdownOptions& options, std::function<void()> failed) = 0;
    // SHUTDOWN ABORT: cancels a SHUTDOWN that has not stopped the server yet.
    // Calls `done` once, on any thread: true if one was cancelled.
    virtual void abort_shutdown(std::function<void(bool cancelled)> done) = 0;
    virtual std::int64_t start_time_ms() = 0;
    virtual unsigned worker_threads() = 0;

    // Replication (net/replication.hpp). The defaults describe a lone
    // primary that cannot change role (unit-test fakes).
    virtual ReplicationInfo replication() { return {}; }
    // REPLICAOF host port (port 0 with host "": REPLICAOF NO ONE). Calls
    // `done` once, on any thread, with "" or the reason it cannot (an error
    // text without "-"); never waits for the link it replaces to stop (that
    // can take as long as a snapshot load): after NO ONE, `done` comes once
    // it has, when writes are taken.
    virtual void replicaof(std::string_view host, std::uint16_t port,
                           std::function<void(std::string error)> done) {
        (void)host;
        (void)port;
        done("ERR replication is not available here");
    }
    // WAIT: calls `done` once with how many replicas acknowledged every
    // record appended before the call (at once if `count` already did, else
    // when they do or `timeout_ms` passes; 0 waits without limit), on any
    // thread.
    virtual void wait_for_replicas(std::int64_t count, std::int64_t timeout_ms,
                                   std::function<void(std::int64_t acked)> done) {
        (void)count;
        (void)timeout_ms;
        done(0);
    }
};

}  // namespace bloomery::core
