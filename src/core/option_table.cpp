// The option spec's table (core/options.hpp): every option, group by group
// in --help's order. A new option is one entry here; the command line, the
// config file, the environment, docs/options.md and CONFIG GET / SET /
// REWRITE take it from this entry.
//
// Ranges: Redis's bounds (config.c) where Redis has the option, so a value
// Redis takes is taken here and one it refuses is refused; bloomery's own
// options say why theirs.

#include <limits>

#include "bloomery/core/options.hpp"
#include "option_access.hpp"

namespace bloomery::core {

namespace {

using namespace option_access;

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();  // Redis's int options
constexpr std::int64_t kLongMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kKb = 1024;
constexpr std::int64_t kMb = 1024 * kKb;

constexpr std::string_view kNetwork = "Network";
constexpr std::string_view kTls = "TLS";
constexpr std::string_view kLimits = "Protocol limits";
constexpr std::string_view kSecurity = "Security";
constexpr std::string_view kFilters = "Filters";
constexpr std::string_view kMemory = "Memory";
constexpr std::string_view kPersistence = "Persistence";
constexpr std::string_view kReplication = "Replication";
constexpr std::string_view kCluster = "Cluster";
constexpr std::string_view kMonitoring = "Monitoring";
constexpr std::string_view kLogging = "Logging";

// ---- Options whose text is more than one value ----

Status read_output_buffer_limits(const OptionSpec&, Config& config, std::string_view text) {
    return parse_output_buffer_limits(text, config.client_output_buffer_limits);
}

std::string show_output_buffer_limits(const OptionValues& values) {
    return format_output_buffer_limits(values.runtime.client_output_buffer_limits());
}

// Parsed into a copy, applied class by class when every group passed.
Status set_output_buffer_limits(const OptionSpec&, RuntimeSettings& settings, std::string_view text,
                                SetMode mode) {
    OutputBufferLimits parsed = settings.client_output_buffer_limits();
    if (Status status = parse_output_buffer_limits(text, parsed); !status) return status;
    if (mode == SetMode::apply) settings.client_output_buffer_limits() = parsed;
    return {};
}

Status read_maxmemory(const OptionSpec&, Config& config, std::string_view text) {
    const Result<std::uint64_t> bytes = parse_memory_limit(text);
    if (!bytes) return bytes.failure();
    config.maxmemory = *bytes;
    return {};
}

Status read_maxmemory_clients(const OptionSpec& spec, Config& config, std::string_view text) {
    if (!config.maxmemory_clients.parse(text)) {
        return Error{range_problem(spec, text, ", or a percentage of --maxmemory from 0% to 100%")};
    }
    return {};
}

std::string show_maxmemory_clients(const OptionValues& values) {
    return values.runtime.maxmemory_clients().format();
}

// Checked on a scratch copy, then applied.
Status set_maxmemory_clients(const OptionSpec&, RuntimeSettings& settings, std::string_view text,
                             SetMode mode) {
    ClientsMemoryLimit parsed;
    if (Status status = parsed.parse(text); !status) return status;
    if (mode == SetMode::apply) settings.maxmemory_clients() = parsed;
    return {};
}

Status read_save(const OptionSpec&, Config& config, std::string_view text) {
    Result<std::vector<SavePoint>> points = parse_save_spec(text);
    if (!points) return points.failure();
    config.save_points = std::move(*points);
    return {};
}

std::string show_save(const OptionValues& values) {
    return format_save_points(values.config.save_points);
}

// "HOST PORT"; empty: none (a primary).
Status read_replicaof(const OptionSpec&, Config& config, std::string_view text) {
    if (text.empty()) {
        config.replicaof_host.clear();
        config.replicaof_port = 0;
        return {};
    }
    Result<PrimaryAddress> primary = parse_replicaof(text);
    if (!primary) return primary.failure();
    config.replicaof_host = std::move(primary->host);
    config.replicaof_port = primary->port;
    return {};
}

// Whom this server follows now: REPLICAOF changes it at run time.
std::string show_replicaof(const OptionValues& values) {
    return values.replicaof;
}

std::string show_threads(const OptionValues& values) {
    return std::to_string(values.worker_threads);
}

std::string show_metrics_bind(const OptionValues& values) {
    return values.config.metrics_bind_address();
}

// ---- The settings CONFIG SET changes ----

constexpr auto get_lfu_log_factor = [](const RuntimeSettings& s) { return s.lfu().log_factor(); };
constexpr auto set_lfu_log_factor = [](RuntimeSettings& s, std::int64_t n) {
    s.lfu().set_log_factor(n);
};
constexpr auto get_lfu_decay = [](const RuntimeSettings& s) { return s.lfu().decay_minutes(); };
constexpr auto set_lfu_decay = [](RuntimeSettings& s, std::int64_t n) {
    s.lfu().set_decay_minutes(n);
};

// A RuntimeSettings value read and written through its own two members.
template <auto Getter>
constexpr auto get_member = [](const RuntimeSettings& s) { return (s.*Getter)(); };
template <auto Setter>
constexpr auto set_member = [](RuntimeSettings& s, std::int64_t n) { (s.*Setter)(n); };

constexpr auto get_slowlog_max_len = [](const RuntimeSettings& s) { return s.slowlog_max_len(); };
constexpr auto set_slowlog_max_len = [](RuntimeSettings& s, std::int64_t n) {
    s.set_slowlog_max_len(static_cast<std::size_t>(n));
};

// ---- Names CONFIG GET answers for Redis's clients, which no option sets ----

template <const std::string_view& Answer>
std::string show_fixed(const OptionValues&) {
    return std::string(Answer);
}
constexpr std::string_view kOneDatabase = "1";
constexpr std::string_view kNoEviction = "noeviction";
constexpr std::string_view kReadOnly = "yes";

constexpr OptionSpec answer_only(std::string_view name, OptionShower show) {
    return {.name = name, .use = OptionUse::config_get, .show = show};
}

constexpr OptionSpec kOptions[] = {
    // ---- Network ----
    text<&Config::bind>("bind", kNetwork, "Address to listen on"),
    integer<&Config::port>("port", kNetwork, 0, 65535,
                           "TCP port to listen on (0 = no plaintext listener)"),
    [] {
        // CONFIG GET shows the threads serving now, under Redis's name too.
        OptionSpec spec = integer<&Config::threads>(
            "threads", kNetwork, 0, 256, "Worker threads, one io_context each (0 = one per core)");
        spec.redis_alias = "io-threads";
        spec.show = &show_threads;
        return spec;
    }(),
    integer<&Config::max_clients>("maxclients", kNetwork, 1, std::numeric_limits<unsigned>::max(),
                                  "Maximum simultaneous client connections"),
    integer<&Config::timeout_seconds>("timeout", kNetwork, 0, kIntMax,
                                      "Close idle clients after this many seconds (0 = never)"),

    // ---- TLS ----
    integer<&Config::tls_port>("tls-port", kTls, 0, 65535,
                               "TLS port to listen on (0 = no TLS listener)"),
    text<&Config::tls_cert_file>("tls-cert-file", kTls, "Server certificate chain (PEM)"),
    text<&Config::tls_key_file>("tls-key-file", kTls, "Server private key (PEM)"),
    text<&Config::tls_ca_cert_file>("tls-ca-cert-file", kTls,
                                    "CA certificates (PEM) that client certificates must chain to"),
    choice<&Config::tls_auth_clients, kTlsAuthClientsWords>(
        "tls-auth-clients", kTls,
        "Client certificates: yes (required), no (not asked for), optional (verified if sent)"),
    real<&Config::tls_handshake_timeout_seconds>(
        "tls-handshake-timeout", kTls, 0.001, 3600,
        "Seconds a TLS client has to finish its handshake before it is closed"),
    choice<&Config::tls_replication, kYesNoWords>(
        "tls-replication", kTls,
        "yes: a replica connects to its primary over TLS (to the primary's TLS port), verifying "
        "its certificate chain with --tls-ca-cert-file"),
    choice<&Config::tls_cluster, kYesNoWords>(
        "tls-cluster", kTls,
        "yes: MIGRATE connects to its target over TLS, verifying its certificate chain with "
        "--tls-ca-cert-file"),
    text<&Config::tls_client_cert_file>(
        "tls-client-cert-file", kTls,
        "Certificate chain (PEM) the replication and MIGRATE links present (default: "
        "--tls-cert-file)"),
    text<&Config::tls_client_key_file>("tls-client-key-file", kTls,
                                       "Private key (PEM) of --tls-client-cert-file"),

    // ---- Protocol limits ----
    // Redis's lower bound. The upper one is bloomery's: a journal record
    // holds up to two keys (RENAME's) and must stay under 2^31 bytes.
    bytes<&Config::proto_max_bulk_len>(
        "proto-max-bulk-len", kLimits, kMb, 512 * kMb,
        "Largest bulk string a client may send, bytes (suffixes kb, mb, gb)"),
    // An inline command is at most one line of arguments: the bulk bound.
    bytes<&Config::proto_max_inline_len>("proto-max-inline-len", kLimits, kKb, 512 * kMb,
                                         "Longest inline command line, bytes"),
    // Redis refuses more than INT_MAX.
    integer<&Config::proto_max_multibulk_len>("proto-max-multibulk-len", kLimits, 1, kIntMax,
                                              "Most arguments in one command"),
    bytes<&Config::client_query_buffer_limit>(
        "client-query-buffer-limit", kLimits, kMb, kLongMax,
        "Most unprocessed bytes buffered for one client before it is closed"),
    run_time({.name = "client-output-buffer-limit",
              .group = kLimits,
              .help = "Reply bytes a client may have waiting, per class, as Redis's 'CLASS HARD "
                      "SOFT SECONDS ...' (classes normal, replica, pubsub; sizes with k, kb, m, "
                      "mb, g, gb; 0: no limit): past HARD, or above SOFT for more than SECONDS, "
                      "the client is closed; one size alone sets normal's HARD; also CONFIG SET",
              .kind = OptionKind::words,
              .use = kSetting | OptionUse::adds_up,
              .read = &read_output_buffer_limits},
             &show_output_buffer_limits, &set_output_buffer_limits),

    // ---- Security ----
    [] {
        OptionSpec spec = text<&Config::requirepass>(
            "requirepass", kSecurity,
            "Password of the default user (AUTH PASSWORD); empty: none. Prefer "
            "BLOOMERY_REQUIREPASS or --requirepass-file: flags show in `ps`");
        spec.show = &show_redacted<&Config::requirepass>;
        return spec;
    }(),
    with_use(command_line_only("requirepass-file", kSecurity, OptionKind::text,
                               "Read the default user's password from this file, less one "
                               "trailing newline (e.g. a mounted Kubernetes Secret)"),
             OptionUse::environment),
    text<&Config::aclfile>(
        "aclfile", kSecurity,
        "Users, passwords and allowed commands, one 'user NAME rule...' line each"),
    choice<&Config::protected_mode, kYesNoWords>(
        "protected-mode", kSecurity,
        "yes: while the default user has no password, serve only clients on the loopback "
        "interface (127.0.0.1, ::1)"),
    choice<&Config::enable_debug_command, kDebugCommandWords>(
        "enable-debug-command", kSecurity,
        "Who may run DEBUG, whose subcommands are for tests (JUMP-CLOCK moves the clock): "
        "no one, every client (yes), or clients on the loopback interface (local)"),
    // AUTH needs its three arguments (AUTH user password).
    integer<&Config::unauthenticated_max_multibulk_len>(
        "unauthenticated-max-multibulk-len", kSecurity, 3, 1 << 20,
        "Most arguments in one command before the client has authenticated"),
    // Room for a user name or a password; at most what an authenticated
    // client may send.
    bytes<&Config::unauthenticated_max_bulk_len>(
        "unauthenticated-max-bulk-len", kSecurity, kKb, 512 * kMb,
        "Largest bulk argument before the client has authenticated, bytes"),
    // At least one argument of the default unauthenticated-max-bulk-len.
    bytes<&Config::unauthenticated_query_buffer_limit>(
        "unauthenticated-query-buffer-limit", kSecurity, 16 * kKb, kLongMax,
        "Most unprocessed bytes buffered for a client that has not authenticated before it is "
        "closed"),

    // ---- Filters ----
    // bloom/bounds.hpp's bounds, as BF.RESERVE's.
    real<&Config::default_error_rate>(
        "bf-error-rate", kFilters, 1e-15, 0.999999,
        "Error rate of filters created implicitly (BF.ADD, BF.MADD, BF.INSERT)"),
    integer<&Config::default_capacity>("bf-initial-size", kFilters, 1, std::int64_t{1} << 40,
                                       "Capacity of filters created implicitly"),
    integer<&Config::default_expansion>(  // RedisBloom's bound
        "bf-expansion-factor", kFilters, 1, 32768,
        "Growth factor of sub-filters of filters created implicitly"),
    with_use(choice<&Config::default_layout, kLayoutWords>(
                 "bf-default-layout", kFilters,
                 "Layout of filters created without LAYOUT: auto (blocks of 1 to 8 cache lines "
                 "where that costs at most 2 % more bits than RedisBloom, else classic), blocked "
                 "(one cache line per lookup, 4-40 % more bits) or classic"),
             OptionUse::any_case),
    with_use(choice<&Config::default_scheme, kSchemeWords>(
                 "bf-scheme", kFilters,
                 "Hash scheme of filters created without SCHEME: bloomery, or redisbloom "
                 "(RedisBloom 2.4's hashing and sizing, classic layout; RedisBloom can load them)"),
             OptionUse::any_case),
    bytes<&Config::max_filter_bytes>(  // 0: no limit
        "max-filter-bytes", kFilters, 0, kLongMax,
        "Largest filter a client may create or grow, all sub-filters' bit arrays together, "
        "bytes (suffixes kb, mb, gb; 0 = no limit)"),
    integer<&Config::keyspace_shards>("keyspace-shards", kFilters, 1, 65536,
                                      "Lock shards of the keyspace"),
    // Redis's bounds.
    run_time(integer<&Config::lfu_log_factor>(
                 "lfu-log-factor", kFilters, 0, kIntMax,
                 "How slowly a key's use counter (OBJECT FREQ, redis-cli --hotkeys) grows: about "
                 "a million uses reach 255 at 10, as Redis's LFU; also CONFIG SET"),
             &show_runtime<get_lfu_log_factor>, &set_whole<set_lfu_log_factor>),
    run_time(integer<&Config::lfu_decay_time_minutes>(
                 "lfu-decay-time", kFilters, 0, kIntMax,
                 "Minutes for an unused key's use counter to lose one (0 = never), as Redis's "
                 "LFU; also CONFIG SET"),
             &show_runtime<get_lfu_decay>, &set_whole<set_lfu_decay>),

    // ---- Memory ----
    // Redis takes up to 2^64 - 1; 2^63 - 1 (8 EiB) keeps every size a signed
    // 64-bit number.
    {.name = "maxmemory",
     .group = kMemory,
     .help = "Most bytes held for filters, keys and client buffers before commands that allocate "
             "answer -OOM: a size (suffixes kb, mb, gb) or a percentage of the container's "
             "memory limit (cgroup), else of physical memory, e.g. 75%; 0 = no limit",
     .kind = OptionKind::bytes,
     .max = kLongMax,
     .read = &read_maxmemory,
     .show = &show_whole<&Config::maxmemory>},
    // Redis's bounds for the size form (its percentage form: 0% to 100%).
    run_time({.name = "maxmemory-clients",
              .group = kMemory,
              .help = "Most bytes all clients together may hold (query buffers, arguments, "
                      "replies; replicas not counted) before the ones holding most are closed, "
                      "largest first (CLIENT NO-EVICT on exempts one; INFO evicted_clients counts "
                      "them): a size (k, kb, m, mb, g, gb as Redis; at least 128 KiB is used) or "
                      "a percentage of --maxmemory, e.g. 5%; 0 = no limit; also CONFIG SET",
              .kind = OptionKind::bytes,
              .max = kLongMax,
              .read = &read_maxmemory_clients},
             &show_maxmemory_clients, &set_maxmemory_clients),

    // ---- Persistence ----
    text<&Config::dir>("dir", kPersistence, "Directory for snapshots (created if missing)"),
    text<&Config::dbfilename>("dbfilename", kPersistence, "Snapshot file name inside --dir"),
    {.name = "save",
     .group = kPersistence,
     .help = "Save points 'SECONDS CHANGES ...': snapshot after SECONDS if at least CHANGES "
             "writes; \"\" disables periodic snapshots",
     .kind = OptionKind::words,
     .use = kSetting | OptionUse::adds_up,
     .read = &read_save,
     .show = &show_save},
    choice<&Config::stop_writes_on_bgsave_error, kYesNoWords>(
        "stop-writes-on-bgsave-error", kPersistence,
        "yes: while the last snapshot failed, refuse writes with -MISCONF until one succeeds "
        "(reads are still served)"),
    command_line_only("check-snapshot", kPersistence, OptionKind::text,
                      "Verify a snapshot file, print what it holds, and exit"),
    command_line_only(
        "import-rdb", kPersistence, OptionKind::text,
        "Read a Redis RDB file (RDB 8-12, Redis 4.0-7.4) and write its RedisBloom Bloom and Cuckoo "
        "filters "
        "of database 0, bits, item counts and TTLs kept, as the snapshot in --dir "
        "(--dbfilename), then exit; other values are skipped and counted. Refuses a data "
        "directory that holds a snapshot or journal already. Start the server afterwards to "
        "serve them"),
    choice<&Config::appendonly, kYesNoWords>(
        "appendonly", kPersistence,
        "yes: journal every change (README \"Durability\"), so adds since the last snapshot "
        "survive a crash"),
    choice<&Config::appendfsync, kAppendFsyncWords>(
        "appendfsync", kPersistence,
        "always: reply after the journal record is on disk (group commit); everysec: reply "
        "after it is written, fsync once a second; no: reply after it is written, fsync left to "
        "the OS"),
    text<&Config::appendfilename>("appendfilename", kPersistence,
                                  "Journal segment name inside --dir (files NAME.<offset>)"),
    integer<&Config::auto_aof_rewrite_percentage>(
        "auto-aof-rewrite-percentage", kPersistence, 0, kIntMax,
        "Snapshot (dropping the journal it covers) when the last snapshot's bytes plus the "
        "journal's grew by this percentage since that snapshot, as Redis's AOF; 0 disables"),
    bytes<&Config::auto_aof_rewrite_min_size>(
        "auto-aof-rewrite-min-size", kPersistence, 0, kLongMax,
        "...and snapshot plus journal are at least this large (suffixes kb, mb, gb)"),
    // A disk slower than the clients holds at most this much in memory.
    bytes<&Config::journal_buffer_limit>(
        "journal-buffer-limit", kPersistence, kMb, std::int64_t{1} << 40,
        "Journal bytes not yet on disk past which writes are refused with -MISCONF (a disk "
        "slower than the clients)"),
    command_line_only("check-journal", kPersistence, OptionKind::text,
                      "Verify a journal segment, print what it holds, and exit: 0 if good, 2 if "
                      "only its last write was torn (a start cuts that off), 1 if corrupt"),
    command_line_only("fix", kPersistence, OptionKind::flag,
                      "With --check-journal: cut a bad tail off at the last good record"),

    // ---- Replication ----
    // Not CONFIG SET: REPLICAOF changes it, and CONFIG REWRITE keeps it.
    {.name = "replicaof",
     .group = kReplication,
     .help = "HOST PORT (two words, as redis-server takes them, or one quoted): start as a "
             "replica of that primary (a full copy, then its journal's records as they happen; "
             "REPLICAOF at run time)",
     .kind = OptionKind::words,
     .use = kSetting | OptionUse::two_words | OptionUse::rewrite,
     .read = &read_replicaof,
     .show = &show_replicaof},
    text<&Config::masteruser>("masteruser", kReplication, "User to AUTH as on the primary"),
    [] {
        OptionSpec spec = text<&Config::masterauth>("masterauth", kReplication,
                                                    "Password to AUTH with on the primary");
        spec.show = &show_redacted<&Config::masterauth>;
        return spec;
    }(),
    with_use(command_line_only("masterauth-file", kReplication, OptionKind::text,
                               "Read --masterauth from this file (a Kubernetes Secret)"),
             OptionUse::environment),
    bytes<&Config::repl_backlog_size>(
        "repl-backlog-size", kReplication, 1, kLongMax,
        "Journal kept for replicas to resume from after a cut, beyond what the last snapshot "
        "needs (suffixes kb, mb, gb)"),
    // Redis takes up to LONG_MAX; the TTL is compared in milliseconds here.
    integer<&Config::repl_backlog_ttl_seconds>(
        "repl-backlog-ttl", kReplication, 0, kLongMax / 1000,
        "Seconds the journal is kept for a replica that disconnected"),
    integer<&Config::repl_timeout_seconds>(
        "repl-timeout", kReplication, 1, kIntMax,
        "Seconds without a byte from the primary (or an ack from a replica) before the link is "
        "dropped and resumed"),
    choice<&Config::replica_serve_stale_data, kYesNoWords>(
        "replica-serve-stale-data", kReplication,
        "yes: a replica whose link is down serves the data it has; no: -MASTERDOWN"),
    integer<&Config::repl_ping_replica_period_seconds>(
        "repl-ping-replica-period", kReplication, 1, kIntMax,
        "Seconds between keepalive records sent to replicas"),
    // Redis's bounds; also under Redis's older names (min-slaves-*).
    also_named(run_time(integer<&Config::min_replicas_to_write>(
                            "min-replicas-to-write", kReplication, 0, kIntMax,
                            "A primary refuses writes (-NOREPLICAS) while fewer replicas than "
                            "this acknowledged within --min-replicas-max-lag seconds (0 = never); "
                            "also CONFIG SET"),
                        &show_runtime<get_member<&RuntimeSettings::min_replicas_to_write>>,
                        &set_whole<set_member<&RuntimeSettings::set_min_replicas_to_write>>),
               "min-slaves-to-write"),
    also_named(run_time(integer<&Config::min_replicas_max_lag_seconds>(
                            "min-replicas-max-lag", kReplication, 0, kIntMax,
                            "Seconds since its last acknowledgement within which a replica "
                            "counts for --min-replicas-to-write (0 = never refuse); also CONFIG "
                            "SET"),
                        &show_runtime<get_member<&RuntimeSettings::min_replicas_max_lag_seconds>>,
                        &set_whole<set_member<&RuntimeSettings::set_min_replicas_max_lag_seconds>>),
               "min-slaves-max-lag"),
    // Redis's bounds.
    integer<&Config::shutdown_timeout_seconds>(
        "shutdown-timeout", kReplication, 0, kIntMax,
        "Seconds SHUTDOWN and SIGTERM give replicas, once the clients are gone, to acknowledge "
        "every write (0 = no wait; SHUTDOWN NOW skips it)"),

    // ---- Cluster ----
    choice<&Config::cluster_enabled, kYesNoWords>(
        "cluster-enabled", kCluster,
        "yes: Redis Cluster protocol, with the map in etcd (--cluster-etcd) or the static "
        "--cluster-slots map (keys of other nodes' slots answer -MOVED)"),
    text<&Config::cluster_slots>(
        "cluster-slots", kCluster,
        "Slot map, the same on every node: RANGE=host:port[|replica:port...],... covering "
        "slots 0-16383 once, e.g. \"0-8191=a:6379,8192-16383=b:6379\""),
    text<&Config::cluster_self>(
        "cluster-self", kCluster,
        "This node's host:port in --cluster-slots, or auto: the N of a host name ending in -N "
        "(StatefulSet pod) picks the N-th node (primaries in slot order, then replicas)"),
    text<&Config::cluster_etcd>(
        "cluster-etcd", kCluster,
        "Keep the cluster's map in etcd, at these endpoints (URL[,URL...], http:// or "
        "https://), instead of --cluster-slots: nodes meet, take slots, fail over and move "
        "slots through it (redis-cli --cluster create, add-node, reshard, ...)"),
    text<&Config::cluster_name>("cluster-name", kCluster,
                                "The cluster's name: its keys in etcd are under "
                                "/bloomery/NAME/ (letters, digits, '.', '_', '-')"),
    with_use(text<&Config::cluster_announce>(
                 "cluster-announce", kCluster,
                 "HOST:PORT other nodes and clients reach this node at (default: --bind's "
                 "address, or this machine's name when bound to every address, and --port)"),
             OptionUse::derived_default),
    // Redis's bounds.
    integer<&Config::cluster_node_timeout_ms>(
        "cluster-node-timeout", kCluster, 1, kLongMax / 2,
        "Milliseconds a node may be unreachable before it is failed over: its liveness "
        "lease in etcd (rounded up to whole seconds)"),
    text<&Config::cluster_config_file>(
        "cluster-config-file", kCluster,
        "File in --dir keeping this node's id (made at the first start with --cluster-etcd)"),
    text<&Config::cluster_etcd_user>("cluster-etcd-user", kCluster,
                                     "User to authenticate to etcd as (empty: none)"),
    [] {
        OptionSpec spec = text<&Config::cluster_etcd_password>("cluster-etcd-password", kCluster,
                                                               "Password of --cluster-etcd-user");
        spec.show = &show_redacted<&Config::cluster_etcd_password>;
        return spec;
    }(),
    with_use(command_line_only("cluster-etcd-password-file", kCluster, OptionKind::text,
                               "Read --cluster-etcd-password from this file (a Kubernetes "
                               "Secret)"),
             OptionUse::environment),
    text<&Config::cluster_etcd_cacert>(
        "cluster-etcd-cacert", kCluster,
        "CA certificates (PEM) etcd's certificate is verified against (https endpoints; "
        "empty: the system's)"),
    text<&Config::cluster_etcd_cert>("cluster-etcd-cert", kCluster,
                                     "This node's client certificate (PEM) for etcd"),
    text<&Config::cluster_etcd_key>("cluster-etcd-key", kCluster,
                                    "The private key (PEM) of --cluster-etcd-cert"),

    // ---- Monitoring ----
    integer<&Config::metrics_port>(
        "metrics-port", kMonitoring, 0, 65535,
        "HTTP port for /metrics (Prometheus), /healthz and /readyz (0 = off)"),
    [] {
        // CONFIG GET shows the address in use.
        OptionSpec spec =
            with_use(text<&Config::metrics_bind>(
                         "metrics-bind", kMonitoring,
                         "Address of the HTTP listener (default: the same as --bind)"),
                     OptionUse::derived_default);
        spec.show = &show_metrics_bind;
        return spec;
    }(),
    // A hostile HTTP client holds at most one slot and this many bytes.
    integer<&Config::metrics_max_connections>(
        "metrics-max-connections", kMonitoring, 1, 1024,
        "Most simultaneous HTTP connections; at the bound a new connection replaces the one "
        "stalled longest (waiting for its request or for its reply to be read)"),
    integer<&Config::metrics_max_connections_per_client>(
        "metrics-max-connections-per-client", kMonitoring, 1, 1024,
        "Most simultaneous HTTP connections from one client address; at either bound a new "
        "connection replaces the one stalled longest"),
    bytes<&Config::metrics_max_request_bytes>(
        "metrics-max-request-bytes", kMonitoring, 512, kMb,
        "Largest HTTP request line and headers, bytes; larger requests are refused (431) and "
        "closed"),
    real<&Config::metrics_request_timeout_seconds>(
        "metrics-request-timeout", kMonitoring, 0.01, 3600,
        "Seconds an HTTP client has to send a whole request (and to read the reply) before it "
        "is closed"),
    // Redis's bounds.
    run_time(integer<&Config::latency_monitor_threshold_ms>(
                 "latency-monitor-threshold", kMonitoring, 0, kLongMax,
                 "Record events (commands, expiry rounds, snapshots, fsyncs) that took at least "
                 "this many milliseconds for LATENCY (0 = off); also CONFIG SET"),
             &show_runtime<get_member<&RuntimeSettings::latency_monitor_threshold_ms>>,
             &set_whole<set_member<&RuntimeSettings::set_latency_monitor_threshold_ms>>),
    // -1: off, as Redis 7.
    run_time(integer<&Config::slowlog_log_slower_than_us>(
                 "slowlog-log-slower-than", kMonitoring, -1, kLongMax,
                 "Log commands that took at least this many microseconds in SLOWLOG (-1 = off, "
                 "0 = every command); also CONFIG SET"),
             &show_runtime<get_member<&RuntimeSettings::slowlog_log_slower_than_us>>,
             &set_whole<set_member<&RuntimeSettings::set_slowlog_log_slower_than_us>>),
    // Bounded for memory (see kSlowlogMaxLenLimit); Redis takes up to LONG_MAX.
    run_time(integer<&Config::slowlog_max_len>(
                 "slowlog-max-len", kMonitoring, 0, static_cast<std::int64_t>(kSlowlogMaxLenLimit),
                 "Most SLOWLOG entries kept (the oldest go first); also CONFIG SET"),
             &show_runtime<get_slowlog_max_len>, &set_whole<set_slowlog_max_len>),
    command_line_only("test-config", kMonitoring, OptionKind::flag,
                      "Check flags, config file and environment (and the files they name) "
                      "without binding or loading; print what is wrong or 'configuration OK'; "
                      "exit 1 or 0"),
    command_line_only("health-check", kMonitoring, OptionKind::text,
                      "HOST:PORT: PING that server over the protocol (with AUTH when a password "
                      "is configured) and exit 0 on PONG, 1 otherwise; for container health "
                      "checks"),
    command_line_only("health-check-tls", kMonitoring, OptionKind::flag,
                      "With --health-check: connect over TLS, verifying the server with "
                      "--tls-ca-cert-file and presenting --tls-cert-file/--tls-key-file if set"),
    [] {
        OptionSpec spec = command_line_only(
            "health-check-timeout", kMonitoring, OptionKind::real,
            "With --health-check: seconds for the whole check (connect, AUTH, PING)");
        spec.min_real = 0.01;
        spec.max_real = 3600;
        spec.default_text = "2";
        return spec;
    }(),

    // ---- Logging ----
    choice<&Config::log_level, kLogLevelWords>("loglevel", kLogging, "Log level"),
    text<&Config::log_file>("logfile", kLogging, "Log to this file instead of stderr"),

    // ---- CONFIG GET only ----
    answer_only("databases", &show_fixed<kOneDatabase>),
    answer_only("maxmemory-policy", &show_fixed<kNoEviction>),
    answer_only("replica-read-only", &show_fixed<kReadOnly>),
};

}  // namespace

std::span<const OptionSpec> option_specs() {
    return kOptions;
}

}  // namespace bloomery::core
