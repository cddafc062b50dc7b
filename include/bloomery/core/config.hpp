#pragma once
// Server configuration as it was given at start: every limit is a named
// value with a default. Filled from flags, an optional config file and
// BLOOMERY_* environment variables through the option spec
// (core/options.hpp, which names, ranges and documents every field here;
// app/command_line.hpp reads them). Plain data, no Asio, so command handlers
// can read it; what changes at run time lives in core::RuntimeSettings
// (core/runtime_settings.hpp), made from it.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bloomery/core/result.hpp"

namespace bloomery::cluster {
class Topology;
}

namespace bloomery::core {

struct SavePoint {
    std::int64_t seconds;
    std::int64_t changes;
};

// The options that take one of a few words are kept as enums, parsed once
// when the option is read; core/options.hpp holds their words, in the
// order of the enumerators.

// Whether TLS clients must present a certificate signed by the CA.
enum class TlsAuthClients {
    yes,       // required (Redis's default)
    no,        // not asked for
    optional,  // asked for and verified if sent, not required
};

// The layout of filters created without LAYOUT (bloom::Layout's choices).
enum class DefaultLayout {
    automatic,  // "auto": blocked where it costs little more memory, else classic
    blocked,
    classic,
};

// The hash scheme of filters created without SCHEME (bloom::HashScheme's
// choices): bloomery's own, or RedisBloom's, which RedisBloom can load back.
enum class DefaultScheme {
    bloomery,
    redisbloom,
};

// --appendfsync: when a journal record is on disk before its reply leaves
// (persist::FsyncPolicy, persist/journal.hpp).
enum class AppendFsync { always, everysec, no };

// --enable-debug-command: who may run DEBUG (its test-only subcommands):
// nobody, every client, or clients on the loopback interface.
enum class DebugCommand { yes, no, local };

// --loglevel (spdlog's levels).
enum class LogLevel { trace, debug, info, warn, error, critical, off };

// The classes of client-output-buffer-limit, as Redis's (a replica's feed is
// Redis's "slave" class; "master" has no limits of its own).
enum class ClientClass : unsigned { normal = 0, replica = 1, pubsub = 2 };
inline constexpr unsigned kClientClasses = 3;

// One class's output buffer limits, as Redis's: a client whose replies not
// yet written exceed `hard_bytes`, or stay above `soft_bytes` for more than
// `soft_seconds`, is closed. 0 bytes: no such limit.
struct OutputBufferLimit {
    std::uint64_t hard_bytes = 0;
    std::uint64_t soft_bytes = 0;
    std::int64_t soft_seconds = 0;
    friend bool operator==(const OutputBufferLimit&, const OutputBufferLimit&) = default;
};

// client-output-buffer-limit: every class's limits. CONFIG SET changes them
// (in core::RuntimeSettings) while workers read them, so each number is an
// atomic read relaxed (a reader racing a change may pair an old hard limit
// with a new soft one for one check); a copy copies the values.
class OutputBufferLimits {
public:
    // Redis's defaults, but for the normal class's hard limit: 1 GiB instead
    // of none, so that no single reply (KEYS over a large keyspace) can hold
    // unbounded memory.
    OutputBufferLimits();
    OutputBufferLimits(const OutputBufferLimits& other) { copy_from(other); }
    OutputBufferLimits& operator=(const OutputBufferLimits& other) {
        copy_from(other);
        return *this;
    }

    OutputBufferLimit get(ClientClass client_class) const;
    void set(ClientClass client_class, const OutputBufferLimit& limit);

private:
    void copy_from(const OutputBufferLimits& other);
    std::atomic<std::uint64_t> hard_[kClientClasses];
    std::atomic<std::uint64_t> soft_[kClientClasses];
    std::atomic<std::int64_t> seconds_[kClientClasses];
};

// Parses client-output-buffer-limit as Redis's CONFIG SET and config file
// take it: groups of "<class> <hard> <soft> <soft-seconds>" (class normal,
// replica or slave, pubsub; sizes in bytes or with Redis's suffixes k, kb,
// m, mb, g, gb), setting only the classes named. bloomery also takes one
// size alone, its earlier form: the normal class's hard limit. Every group
// is checked before any is applied: on error, Redis's reason and no change.
Status parse_output_buffer_limits(std::string_view spec, OutputBufferLimits& limits);
// As CONFIG GET shows it: "normal 1073741824 0 0 slave 268435456 67108864 60
// pubsub 33554432 8388608 60".
std::string format_output_buffer_limits(const OutputBufferLimits& limits);
// Redis's memtoull: digits, then an optional unit (b, k = 1000, kb = 1024,
// m, mb, g, gb; any case). Nothing if `text` is not one or overflows.
std::optional<std::uint64_t> memory_to_bytes(std::string_view text);

// maxmemory-clients (Redis 7): the most bytes all clients together may hold
// (query buffers, arguments, replies, transactions, subscriptions; replicas'
// feeds and a replica's link to its primary are not counted) before the
// clients holding most are closed, largest first (net/server.hpp). A size,
// or a percentage of --maxmemory. CONFIG SET changes it (in
// core::RuntimeSettings) while workers read it: one atomic, so a reader sees
// the old setting or the new one; a copy copies it.
class ClientsMemoryLimit {
public:
    ClientsMemoryLimit() = default;
    ClientsMemoryLimit(const ClientsMemoryLimit& other)
        : setting_(other.setting_.load(std::memory_order_relaxed)) {}
    ClientsMemoryLimit& operator=(const ClientsMemoryLimit& other) {
        setting_.store(other.setting_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        return *this;
    }

    // Takes Redis's forms: 0 (no limit), a size with Redis's units (b, k =
    // 1000, kb = 1024, m, mb, g, gb; at most 2^63 - 1), or a whole
    // percentage of maxmemory from 0% to 100%. On error, Redis's reason
    // ("argument must be a memory or percent value") and no change.
    Status parse(std::string_view text);
    // The limit in bytes, 0 for none: the size, or the percentage of
    // `maxmemory` (none while maxmemory is 0). As Redis, a limit under
    // kMinClientsMemoryLimit is raised to it, so a slip of the setting
    // cannot leave every client unable to talk to the server.
    std::uint64_t bytes(std::uint64_t maxmemory) const;
    // As CONFIG GET shows it: "0", "33554432", "25%".
    std::string format() const;

private:
    // >= 0: bytes; < 0: minus a percentage (Redis's encoding).
    std::atomic<std::int64_t> setting_{0};
};
inline constexpr std::uint64_t kMinClientsMemoryLimit = 128 * 1024;

struct Config {
    // Network
    std::string bind = "127.0.0.1";
    std::uint16_t port = 6379;  // 0: no plaintext listener
    unsigned threads = 0;       // 0: one per core
    std::size_t max_clients = 10000;
    std::int64_t timeout_seconds = 0;  // idle client timeout, 0 = never
    // TLS (TLS 1.2 and later only)
    std::uint16_t tls_port = 0;    // 0: no TLS listener
    std::string tls_cert_file;     // PEM certificate chain
    std::string tls_key_file;      // PEM private key
    std::string tls_ca_cert_file;  // PEM CA bundle that client certificates must chain to
    TlsAuthClients tls_auth_clients = TlsAuthClients::yes;
    double tls_handshake_timeout_seconds = 10;  // a client that has not finished is closed
    // The links this server opens itself. yes: over TLS, the peer's chain
    // verified against tls_ca_cert_file (not its host name, as Redis),
    // presenting tls_client_cert_file (else tls_cert_file) if set.
    bool tls_replication = false;      // a replica's link to its primary
    bool tls_cluster = false;          // MIGRATE's connections to its targets
    std::string tls_client_cert_file;  // PEM chain shown by outgoing links; "": tls_cert_file's
    std::string tls_client_key_file;   // its private key; "": tls_key_file
    // Protocol limits (Redis's defaults)
    std::size_t proto_max_bulk_len = 512ull * 1024 * 1024;
    std::size_t proto_max_inline_len = 64 * 1024;
    std::size_t proto_max_multibulk_len = 1024 * 1024;
    std::size_t client_query_buffer_limit = 1024ull * 1024 * 1024;
    // Per class (OutputBufferLimits), as configured; CONFIG SET changes the
    // server's RuntimeSettings.
    OutputBufferLimits client_output_buffer_limits;
    // Security (README "Security"). requirepass is never logged, and CONFIG
    // GET shows it redacted.
    std::string requirepass;     // the default user's password; empty: none
    std::string aclfile;         // users file (command/acl.hpp); empty: none
    bool protected_mode = true;  // no password: serve loopback clients only
    DebugCommand enable_debug_command = DebugCommand::no;
    // Redis's bounds for a client that has not authenticated yet (when one
    // must): arguments per command, bytes per bulk argument, bytes buffered.
    std::size_t unauthenticated_max_multibulk_len = 10;
    std::size_t unauthenticated_max_bulk_len = 16 * 1024;
    std::size_t unauthenticated_query_buffer_limit = 1024 * 1024;
    // Filters
    double default_error_rate = 0.01;
    std::uint64_t default_capacity = 100;
    std::uint32_t default_expansion = 2;
    DefaultLayout default_layout = DefaultLayout::automatic;
    DefaultScheme default_scheme = DefaultScheme::bloomery;
    std::uint64_t max_filter_bytes = 4ull * 1024 * 1024 * 1024;  // per filter, all layers
    std::size_t keyspace_shards = 64;
    // How keys' use counters grow and fade (OBJECT FREQ, store/key_access.hpp),
    // Redis's LFU defaults. CONFIG SET changes the server's RuntimeSettings.
    std::int64_t lfu_log_factor = 10;
    std::int64_t lfu_decay_time_minutes = 1;
    // Memory
    std::uint64_t maxmemory = 0;  // bytes; 0 = no limit (core/memory.hpp counts what is held)
    ClientsMemoryLimit maxmemory_clients;  // 0: no limit, as Redis; also in RuntimeSettings
    // Persistence
    std::string dir = "./data";
    std::string dbfilename = "dump.bloomery";
    std::vector<SavePoint> save_points = {{3600, 1}, {300, 100}, {60, 10000}};
    bool stop_writes_on_bgsave_error = true;  // -MISCONF while the last snapshot failed
    // Journal (persist/journal.hpp; README "Durability")
    bool appendonly = true;
    AppendFsync appendfsync = AppendFsync::everysec;
    std::string appendfilename = "journal";  // segments are <name>.<offset> in dir
    // A snapshot (which drops the journal it covers) starts once the journal
    // is this much larger than after the last one, and at least min-size.
    std::uint64_t auto_aof_rewrite_percentage = 100;
    std::uint64_t auto_aof_rewrite_min_size = 64ull * 1024 * 1024;
    // Journal bytes not yet durable past which writes are refused (-MISCONF).
    std::uint64_t journal_buffer_limit = 256ull * 1024 * 1024;
    // Replication (net/replication.hpp; README "Replication")
    std::string replicaof_host;  // empty: a primary
    std::uint16_t replicaof_port = 0;
    std::string masteruser;  // AUTH to the primary as this user (empty: the default user)
    std::string masterauth;  // ...with this password (empty: no AUTH); never logged
    // Journal bytes kept for replicas to resume from after a cut, beyond
    // what the last snapshot needs, and how long for a replica that left.
    std::uint64_t repl_backlog_size = 256ull * 1024 * 1024;
    std::int64_t repl_backlog_ttl_seconds = 3600;
    std::int64_t repl_timeout_seconds = 60;              // a link silent this long is dropped
    std::int64_t repl_ping_replica_period_seconds = 10;  // keepalive records to replicas
    // While a replica's link is down, serve the data it has (yes, as Redis)
    // or answer -MASTERDOWN (no). Before its first copy it never serves.
    bool replica_serve_stale_data = true;
    // SHUTDOWN and SIGTERM give replicas this long, once the clients are
    // gone, to acknowledge every write (Redis 7's shutdown-timeout); 0: no wait.
    std::int64_t shutdown_timeout_seconds = 10;
    // A primary refuses writes (-NOREPLICAS) while fewer than this many
    // replicas acknowledged within min_replicas_max_lag_seconds (Redis's
    // min-replicas-to-write / -max-lag; 0 of either: never).
    std::int64_t min_replicas_to_write = 0;
    std::int64_t min_replicas_max_lag_seconds = 10;
    // Cluster (cluster/topology.hpp; README "Cluster"). `cluster` is the
    // parsed --cluster-slots map with this node resolved, set exactly when
    // cluster_enabled; dispatch tests cluster_enabled before every command.
    // The two texts are as given, then, once the map is resolved, as it
    // describes itself (what CONFIG GET shows).
    bool cluster_enabled = false;
    std::string cluster_slots;
    std::string cluster_self;  // "host:port", or "auto"
    std::shared_ptr<const cluster::Topology> cluster;
    // A cluster whose map is kept in etcd (cluster/etcd_map_backend.hpp),
    // instead of the static map: its endpoints ("URL[,URL...]"), the name
    // its keys are kept under, the address other nodes and clients reach
    // this node at (empty: --bind's, or the host name when bound to all
    // addresses, with --port), the node timeout (the lease of a node's
    // liveness key), the file in --dir keeping this node's id, and etcd's
    // own user, password and TLS files.
    std::string cluster_etcd;
    std::string cluster_name = "bloomery";
    std::string cluster_announce;
    std::int64_t cluster_node_timeout_ms = 15000;
    std::string cluster_config_file = "nodes.conf";
    std::string cluster_etcd_user;
    std::string cluster_etcd_password;  // never logged
    std::string cluster_etcd_cacert;
    std::string cluster_etcd_cert;
    std::string cluster_etcd_key;

    bool cluster_in_etcd() const { return cluster_enabled && !cluster_etcd.empty(); }
    std::string cluster_config_path() const { return dir + "/" + cluster_config_file; }
    // Monitoring (README "Monitoring"): the HTTP listener for /metrics,
    // /healthz and /readyz, and the slow log.
    std::uint16_t metrics_port = 0;  // 0: no HTTP listener
    std::string metrics_bind;        // empty: the same address as --bind
    // A hostile HTTP client holds at most one of these slots, its request
    // bytes and the timeout's worth of time.
    std::size_t metrics_max_connections = 16;
    // ...of which one client address holds at most this many, so that no
    // single peer can keep a liveness probe out (net/metrics_server.hpp).
    std::size_t metrics_max_connections_per_client = 8;
    std::size_t metrics_max_request_bytes = 8 * 1024;  // request line and headers
    double metrics_request_timeout_seconds = 5;        // to send a whole request
    // The latency monitor's threshold in ms (core/latency_monitor.hpp): 0, off,
    // as Redis. CONFIG SET changes the server's RuntimeSettings.
    std::int64_t latency_monitor_threshold_ms = 0;
    std::int64_t slowlog_log_slower_than_us = 10000;  // -1: off; 0: every command
    std::size_t slowlog_max_len = 128;
    // Logging
    LogLevel log_level = LogLevel::info;
    std::string log_file;  // empty: stderr
    std::string config_file;

    std::string snapshot_path() const { return dir + "/" + dbfilename; }
    const std::string& metrics_bind_address() const {
        return metrics_bind.empty() ? bind : metrics_bind;
    }
};

// The largest --slowlog-max-len (and CONFIG SET slowlog-max-len): an entry
// holds at most 32 arguments of 128 bytes, about 4.5 KB, so the log stays
// under about 450 MB at this bound (counted in used_memory).
inline constexpr std::size_t kSlowlogMaxLenLimit = 100000;

// Consistency checks over parsed values (ports, TLS settings, file names, the
// metrics listener): every problem found, each "--option: what is wrong";
// empty if none. No I/O. app::parse_command_line runs them (and checks the
// cluster map against --replicaof itself); a new option's check belongs in
// the list in config.cpp.
std::vector<std::string> check_config_values(const Config& config);

// Parses a Redis-style save spec ("3600 1 300 100", "" to disable).
Result<std::vector<SavePoint>> parse_save_spec(std::string_view spec);
// The inverse, as CONFIG GET save shows it: "3600 1 300 100", "" when disabled.
std::string format_save_points(const std::vector<SavePoint>& points);
// --maxmemory: a size ("512mb", "0") or a percentage of the memory available
// to the process ("75%": of the cgroup limit when in a container, else of
// physical memory), in bytes.
Result<std::uint64_t> parse_memory_limit(std::string_view spec);
// The memory this process may use: its container's cgroup limit when there
// is one, else the machine's physical memory. Reads /sys: not for hot paths.
std::uint64_t memory_available();
// This machine's name: $HOSTNAME when set (Kubernetes sets it to the pod's
// name; tests set it too), else the kernel's. `--cluster-self auto` reads
// its ordinal from it.
std::string host_name();
// Whether --replicaof names this very server: its --port (its --tls-port
// with --tls-replication), and its --bind
// address or host_name()'s first label (a StatefulSet passes "--replicaof
// bloomery-0.<service> 6379" to every pod; pod 0 serves as the primary).
bool replicaof_names_self(const Config& config);
// --replicaof: "HOST PORT" (or "HOST:PORT").
struct PrimaryAddress {
    std::string host;
    std::uint16_t port = 0;
};
Result<PrimaryAddress> parse_replicaof(std::string_view spec);

}  // namespace bloomery::core
