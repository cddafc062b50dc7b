#pragma once
// What commands need from the running server, as a few small interfaces the
// command layer owns and the network layer implements, each in the part of
// net::Server whose business it is (ClientBook, ServerStatistics,
// PersistenceAdapter, ShutdownCoordinator, ReplicationController, Migrator;
// fakes in unit tests): its clients, its statistics, persistence, shutdown,
// replication and MIGRATE's connections. A command reaches only those its
// handler's signature names (With<uses::...>, context.hpp). Nothing here
// knows of Asio, RESP or sockets.

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "bloomery/cluster/cluster_state.hpp"
#include "bloomery/core/command_stats.hpp"
#include "bloomery/persist/status.hpp"

namespace bloomery::persist {
class JournalHealth;
}

namespace bloomery::command {

class PubSub;

enum class ShutdownMode { default_save, save, nosave };

// SHUTDOWN's options (Redis 7): whether to save, NOW (no wait for replicas)
// and FORCE (stop even if the final save fails).
struct ShutdownOptions {
    ShutdownMode mode = ShutdownMode::default_save;
    bool now = false;
    bool force = false;
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
    std::uint64_t net_repl_output_bytes = 0;  // of net_output_bytes, sent to replicas
    std::uint64_t reads_processed = 0;
    std::uint64_t writes_processed = 0;
    std::uint64_t error_replies = 0;
    std::uint64_t query_buffer_limit_disconnections = 0;
    std::uint64_t output_buffer_limit_disconnections = 0;
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
    // The history a promoted replica held (its old primary's id and the
    // offset it had reached there), which a replica at that point resumes.
    std::string replid2;
    std::int64_t second_offset = -1;
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
    bool link_tls = false;  // the link to the primary is TLS (--tls-replication)
    std::int64_t last_io_seconds_ago = -1;
    std::int64_t link_down_since_seconds = -1;  // -1 while up
    bool sync_in_progress = false;
    std::uint64_t sync_received_bytes = 0;
    std::uint64_t link_received_bytes = 0;  // every byte read from the primary
    std::uint64_t read_offset = 0;          // received (applied: `offset`)
    std::string last_error;                 // why the link last failed ("" if never)
};

// ReplicaGate::replication_flags bits: asked before every command, so they are
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

// The clients of this server: CLIENT LIST / KILL and INFO clients.
class ClientDirectory {
public:
    virtual ~ClientDirectory() = default;
    virtual std::size_t connected_clients() = 0;
    // Clients waiting for a deferred reply (WAIT, SAVE): INFO's blocked_clients.
    virtual std::int64_t blocked_clients() = 0;
    // The largest query buffer (bytes received, not yet run) and the largest
    // output buffer (reply bytes not yet written) among the clients now:
    // INFO's client_recent_max_input_buffer / _output_buffer. O(clients).
    virtual std::pair<std::size_t, std::size_t> largest_buffers() { return {0, 0}; }
    // One line per client in CLIENT LIST format; only the clients whose id is
    // in `ids` unless it is empty.
    virtual std::string client_list(std::span<const std::int64_t> ids) = 0;
    // Asks the connection with this id (or "ip:port") to close; false if none.
    virtual bool kill_client(std::int64_t id) = 0;
    virtual bool kill_client(std::string_view address) = 0;
    // maxmemory-clients: clients closed for it since start or the last
    // reset_evicted_clients() (INFO evicted_clients, CONFIG RESETSTAT).
    virtual std::uint64_t evicted_clients() { return 0; }
    virtual void reset_evicted_clients() {}
    // Closes clients, largest first, while all together hold at least
    // maxmemory-clients (CONFIG SET lowered it). Any thread.
    virtual void evict_clients_over_limit() {}
};

// Counters and facts about the process: INFO, CONFIG RESETSTAT.
class ServerStats {
public:
    virtual ~ServerStats() = default;
    virtual StatsTotals stats() = 0;
    // Resets what stats() and command_stats() count (CONFIG RESETSTAT).
    virtual void reset_stats() = 0;
    // Every worker thread's per-command counters summed, indexed by command
    // id (CommandSpec::id; kMaxCommandIds entries, or none where nothing is
    // counted). Safe from any thread; O(commands x threads).
    virtual std::vector<core::CommandTotals> command_stats() { return {}; }
    // Error replies by prefix since start or CONFIG RESETSTAT, sorted
    // (core/error_stats.hpp: error_stats_sum). Safe from any thread.
    virtual std::vector<std::pair<std::string, std::uint64_t>> error_stats() { return {}; }
    virtual std::int64_t start_time_ms() = 0;
    virtual unsigned worker_threads() = 0;
};

// Snapshots and the journal: SAVE, BGSAVE, INFO persistence, and the checks
// before every write.
class Persistence {
public:
    virtual ~Persistence() = default;
    // save_async() snapshots off the caller's thread and calls `done` exactly
    // once, on any thread (on the caller's, before returning, when it cannot
    // start: in_progress), once the file is durable or the save failed.
    // bgsave() returns at once.
    virtual void save_async(std::function<void(persist::SaveResult)> done) = 0;
    virtual persist::SaveResult bgsave() = 0;
    virtual persist::PersistenceInfo persistence() = 0;
    // True while snapshots are configured and the last attempt failed (Redis's
    // condition for -MISCONF). Lock-free: asked before every write command.
    virtual bool snapshot_failing() = 0;
    // What commands see of the journal (persist/journal_health.hpp), or null
    // when it is off: they refuse writes while it fails. (Their records
    // reach it through the keyspace, store/mutation_log.hpp.)
    virtual const persist::JournalHealth* journal() { return nullptr; }
};

// SHUTDOWN.
class Shutdown {
public:
    virtual ~Shutdown() = default;
    // Saves as `options.mode` says, off the caller's thread, then stops the
    // server (replicas get up to --shutdown-timeout to acknowledge every
    // write first, unless `options.now`). Returns at once. `failed` is called
    // once, on any thread, only if the server keeps running: the save failed
    // (without `options.force`) or SHUTDOWN ABORT came first; it is never
    // called when the server stops (the connection just closes).
    virtual void begin_shutdown(const ShutdownOptions& options, std::function<void()> failed) = 0;
    // SHUTDOWN ABORT: cancels a SHUTDOWN that has not stopped the server yet.
    // Calls `done` once, on any thread: true if one was cancelled.
    virtual void abort_shutdown(std::function<void(bool cancelled)> done) = 0;
};

// Replication (net/replication.hpp): INFO replication, ROLE, REPLICAOF, WAIT.
// The defaults describe a lone primary that cannot change role (unit-test
// fakes).
class Replication {
public:
    virtual ~Replication() = default;
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
    // thread. With `count` 0 that is at once, on the caller's thread.
    virtual void wait_for_replicas(std::int64_t count, std::int64_t timeout_ms,
                                   std::function<void(std::int64_t acked)> done) {
        (void)count;
        (void)timeout_ms;
        done(0);
    }
};

// MIGRATE: the exchange with the target server, run by the network layer
// (net/migrator.hpp) so the worker thread does not wait for it.
struct MigrateRequest {
    std::string host;
    std::uint16_t port = 0;
    std::int64_t timeout_ms = 1000;  // for the connect, and for each write and each reply
    std::int64_t db = 0;             // SELECTed unless the cached connection has it already
    bool auth = false;               // AUTH first: AUTH [username] password
    std::string username;            // AUTH2's (empty: AUTH password)
    std::string password;
    std::size_t keys = 0;
    // Writes key `index`'s RESTORE (or RESTORE-ASKING) command, in RESP, into
    // `command` (empty when called) just before it is sent, keys in order
    // (and again from the first after a retry); false: nothing to send for
    // it (the key went or expired meanwhile). Called on the network layer's
    // thread.
    std::function<bool(std::size_t index, std::string& command)> restore_command;
};

struct MigrateResult {
    // An I/O error or timeout that ended the exchange (Redis's IOERR).
    enum class Failure { none, connect, write, read };
    Failure failure = Failure::none;
    // The target's first error reply (to AUTH, SELECT or a RESTORE), the
    // line without its '-'; empty if none.
    std::string target_error;
    // The keys the target took (their RESTORE answered without an error,
    // after AUTH and SELECT did), by index, in order: those the source may
    // delete.
    std::vector<std::size_t> accepted;
};

class Migration {
public:
    virtual ~Migration() = default;
    // Runs `request` off the caller's thread and calls `done` once, on any
    // thread. Connections are cached per host:port, as Redis caches them (up
    // to 64, each closed after 10 s unused); a cached one that fails before
    // the first RESTORE is answered is replaced once, unless it timed out.
    // The default (unit-test fakes) cannot connect.
    virtual void migrate(MigrateRequest request, std::function<void(MigrateResult)> done) {
        (void)request;
        MigrateResult result;
        result.failure = MigrateResult::Failure::connect;
        done(std::move(result));
    }
};

// How data commands are answered on a replica: the kReplication* bits,
// written by the replication link, read before every command.
class ReplicaGate {
public:
    std::atomic<std::uint8_t> replication_flags{0};
    // Replicas online whose last acknowledgement is at most
    // min-replicas-max-lag seconds old, counted by the primary every 100 ms:
    // what min-replicas-to-write is checked against before every write.
    std::atomic<std::int64_t> good_replicas{0};
};

// The server as commands see it: one reference per interface. Built from any
// object implementing them all (the network layer's Server, a test's fake).
struct Services {
    ClientDirectory& clients;
    ServerStats& stats;
    Persistence& persistence;
    Shutdown& shutdown;
    Replication& replication;
    ReplicaGate& gate;
    PubSub& pubsub;  // the server's channels and their subscribers
    Migration& migration;
    // The cluster map and its changes (cluster/cluster_state.hpp); outside
    // cluster mode, a map of this node alone that nothing reads.
    cluster::ClusterState& cluster;

    template <typename Server>
    requires(!std::is_same_v<std::remove_cvref_t<Server>, Services>)
        Services(Server& server)  // NOLINT(google-explicit-constructor): Context{..., server, ...}
        : clients(server),
          stats(server),
          persistence(server),
          shutdown(server),
          replication(server),
          gate(server),
          pubsub(server.pubsub()),
          migration(server),
          cluster(server.cluster_state()) {}
};

}  // namespace bloomery::command
