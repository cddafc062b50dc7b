// The options of the command line, group by group in --help's order, each
// with its flag, environment variable, default, range and description.

#include <CLI/CLI.hpp>
#include <memory>
#include <stdexcept>
#include <string>

#include "bloomery/core/config.hpp"
#include "config_file.hpp"
#include "option_set.hpp"

namespace bloomery::app {

using core::check_option_value;
using core::find_option_range;
using core::format_real;
using core::format_save_points;
using core::OptionKind;
using core::OptionRange;
using core::range_problem;
using core::size_without_suffix;

namespace {

// The range as the option's first validator: a size loses its suffix here,
// then the number is checked, so what CLI11 converts afterwards is always a
// decimal inside the range (CLI11 alone would read "010" as octal and "-1"
// into an unsigned option as 2^64 - 1).
CLI::Validator range_validator(const OptionRange& range) {
    const std::string bounds =
        range.kind == OptionKind::real
            ? format_real(range.min_real) + " - " + format_real(range.max_real)
            : std::to_string(range.min) + " - " + std::to_string(range.max);
    const std::string description = range.kind == OptionKind::bytes
                                        ? "SIZE in [" + bounds + "] (b, kb, mb, gb)"
                                        : "in [" + bounds + "]";
    return CLI::Validator(
        [range](std::string& value) -> std::string {
            std::string number = value;
            if (range.kind == OptionKind::bytes && !size_without_suffix(value, number)) {
                return range_problem(range, value);
            }
            if (!check_option_value(range, number).empty()) return range_problem(range, value);
            value = number;
            return {};
        },
        description);
}

// Gives every numeric option its range from kOptionRanges. A numeric option
// missing from the table (core/config.cpp) is a mistake, found by the first test
// that parses a command line. (--maxmemory, a text option that also takes a
// percentage, checks its table entry in parse_memory_limit.)
void attach_option_ranges(CLI::App& app) {
    for (CLI::Option* option : app.get_options()) {
        const std::string type = option->get_type_name();
        if (option->get_lnames().empty() ||
            (type.rfind("INT", 0) != 0 && type.rfind("UINT", 0) != 0 &&
             type.rfind("FLOAT", 0) != 0)) {
            continue;
        }
        const OptionRange* range = find_option_range(option->get_lnames().front());
        if (range == nullptr) {
            throw std::logic_error("--" + option->get_lnames().front() +
                                   " is numeric but has no entry in kOptionRanges");
        }
        option->transform(range_validator(*range));
    }
}

}  // namespace

void OptionSet::declare() {
    app.set_version_flag("--version", std::string("bloomery ") + BLOOMERY_VERSION);
    app.set_config("--config", "",
                   "Read settings from this file: 'key = value' or redis.conf's 'key value' "
                   "lines, keys the long flag names, 'include FILE'; an unknown key refuses the "
                   "start");
    app.get_config_ptr()->envname("BLOOMERY_CONFIG");
    app.option_defaults()->always_capture_default();
    add_network();
    add_tls();
    add_limits();
    add_security();
    add_filters();
    add_memory();
    add_persistence();
    add_replication();
    add_cluster();
    add_monitoring();
    add_logging();
    attach_option_ranges(app);
    // Last: the reader takes its keys from the options declared above.
    config_reader = std::make_shared<ConfigFileReader>(app);
    app.config_formatter(config_reader);
}

void OptionSet::add_network() {
    auto* network = "Network";
    app.add_option("--bind", c.bind, "Address to listen on")
        ->envname("BLOOMERY_BIND")
        ->group(network);
    app.add_option("--port", c.port, "TCP port to listen on (0 = no plaintext listener)")
        ->envname("BLOOMERY_PORT")
        ->group(network);
    app.add_option("--threads", c.threads, "Worker threads, one io_context each (0 = one per core)")
        ->envname("BLOOMERY_THREADS")
        ->group(network);
    app.add_option("--maxclients", c.max_clients, "Maximum simultaneous client connections")
        ->envname("BLOOMERY_MAXCLIENTS")
        ->group(network);
    app.add_option("--timeout", c.timeout_seconds,
                   "Close idle clients after this many seconds (0 = never)")
        ->envname("BLOOMERY_TIMEOUT")
        ->group(network);
}

void OptionSet::add_tls() {
    auto* tls = "TLS";
    app.add_option("--tls-port", c.tls_port, "TLS port to listen on (0 = no TLS listener)")
        ->envname("BLOOMERY_TLS_PORT")
        ->group(tls);
    app.add_option("--tls-cert-file", c.tls_cert_file, "Server certificate chain (PEM)")
        ->envname("BLOOMERY_TLS_CERT_FILE")
        ->group(tls);
    app.add_option("--tls-key-file", c.tls_key_file, "Server private key (PEM)")
        ->envname("BLOOMERY_TLS_KEY_FILE")
        ->group(tls);
    app.add_option("--tls-ca-cert-file", c.tls_ca_cert_file,
                   "CA certificates (PEM) that client certificates must chain to")
        ->envname("BLOOMERY_TLS_CA_CERT_FILE")
        ->group(tls);
    tls_auth_clients = "yes";
    app.add_option("--tls-auth-clients", tls_auth_clients,
                   "Client certificates: yes (required), no (not asked for), optional "
                   "(verified if sent)")
        ->envname("BLOOMERY_TLS_AUTH_CLIENTS")
        ->check(CLI::IsMember({"yes", "no", "optional"}))
        ->group(tls);
    app.add_option("--tls-handshake-timeout", c.tls_handshake_timeout_seconds,
                   "Seconds a TLS client has to finish its handshake before it is closed")
        ->envname("BLOOMERY_TLS_HANDSHAKE_TIMEOUT")
        ->group(tls);
}

void OptionSet::add_limits() {
    auto* limits = "Protocol limits";
    app.add_option("--proto-max-bulk-len", c.proto_max_bulk_len,
                   "Largest bulk string a client may send, bytes (suffixes kb, mb, gb)")
        ->envname("BLOOMERY_PROTO_MAX_BULK_LEN")
        ->group(limits);
    app.add_option("--proto-max-inline-len", c.proto_max_inline_len,
                   "Longest inline command line, bytes")
        ->envname("BLOOMERY_PROTO_MAX_INLINE_LEN")
        ->group(limits);
    app.add_option("--proto-max-multibulk-len", c.proto_max_multibulk_len,
                   "Most arguments in one command")
        ->envname("BLOOMERY_PROTO_MAX_MULTIBULK_LEN")
        ->group(limits);
    app.add_option("--client-query-buffer-limit", c.client_query_buffer_limit,
                   "Most unprocessed bytes buffered for one client before it is closed")
        ->envname("BLOOMERY_CLIENT_QUERY_BUFFER_LIMIT")
        ->group(limits);
    output_limits_spec = core::format_output_buffer_limits(c.client_output_buffer_limits);
    app.add_option("--client-output-buffer-limit", output_limits_spec,
                   "Reply bytes a client may have waiting, per class, as Redis's "
                   "'CLASS HARD SOFT SECONDS ...' (classes normal, replica, pubsub; sizes with "
                   "k, kb, m, mb, g, gb; 0: no limit): past HARD, or above SOFT for more than "
                   "SECONDS, the client is closed; one size alone sets normal's HARD; also "
                   "CONFIG SET")
        ->envname("BLOOMERY_CLIENT_OUTPUT_BUFFER_LIMIT")
        ->group(limits);
}

void OptionSet::add_security() {
    auto* security = "Security";
    requirepass_option =
        app.add_option("--requirepass", c.requirepass,
                       "Password of the default user (AUTH PASSWORD); empty: none. Prefer "
                       "BLOOMERY_REQUIREPASS or --requirepass-file: flags show in `ps`")
            ->envname("BLOOMERY_REQUIREPASS")
            ->group(security);
    requirepass_file_option =
        app.add_option("--requirepass-file", requirepass_file,
                       "Read the default user's password from this file, less one trailing "
                       "newline (e.g. a mounted Kubernetes Secret)")
            ->envname("BLOOMERY_REQUIREPASS_FILE")
            ->group(security);
    app.add_option("--aclfile", c.aclfile,
                   "Users, passwords and allowed commands, one 'user NAME rule...' line each")
        ->envname("BLOOMERY_ACLFILE")
        ->group(security);
    protected_mode = c.protected_mode ? "yes" : "no";
    app.add_option("--protected-mode", protected_mode,
                   "yes: while the default user has no password, serve only clients on the "
                   "loopback interface (127.0.0.1, ::1)")
        ->envname("BLOOMERY_PROTECTED_MODE")
        ->check(CLI::IsMember({"yes", "no"}))
        ->group(security);
    app.add_option("--unauthenticated-max-multibulk-len", c.unauthenticated_max_multibulk_len,
                   "Most arguments in one command before the client has authenticated")
        ->envname("BLOOMERY_UNAUTHENTICATED_MAX_MULTIBULK_LEN")
        ->group(security);
    app.add_option("--unauthenticated-max-bulk-len", c.unauthenticated_max_bulk_len,
                   "Largest bulk argument before the client has authenticated, bytes")
        ->envname("BLOOMERY_UNAUTHENTICATED_MAX_BULK_LEN")
        ->group(security);
    app.add_option("--unauthenticated-query-buffer-limit", c.unauthenticated_query_buffer_limit,
                   "Most unprocessed bytes buffered for a client that has not authenticated "
                   "before it is closed")
        ->envname("BLOOMERY_UNAUTHENTICATED_QUERY_BUFFER_LIMIT")
        ->group(security);
}

void OptionSet::add_filters() {
    auto* filters = "Filters";
    app.add_option("--bf-error-rate", c.default_error_rate,
                   "Error rate of filters created implicitly (BF.ADD, BF.MADD, BF.INSERT)")
        ->envname("BLOOMERY_BF_ERROR_RATE")
        ->group(filters);
    app.add_option("--bf-initial-size", c.default_capacity,
                   "Capacity of filters created implicitly")
        ->envname("BLOOMERY_BF_INITIAL_SIZE")
        ->group(filters);
    app.add_option("--bf-expansion-factor", c.default_expansion,
                   "Growth factor of sub-filters of filters created implicitly")
        ->envname("BLOOMERY_BF_EXPANSION_FACTOR")
        ->group(filters);
    app.add_option("--bf-default-layout", c.default_layout,
                   "Layout of filters created without LAYOUT: auto (blocked where that "
                   "costs at most 2 % more bits than RedisBloom, else classic), blocked "
                   "(one cache line per lookup, 4-40 % more bits) or classic")
        ->envname("BLOOMERY_BF_DEFAULT_LAYOUT")
        ->transform(CLI::IsMember({"auto", "blocked", "classic"}, CLI::ignore_case))
        ->group(filters);
    app.add_option("--max-filter-bytes", c.max_filter_bytes,
                   "Largest filter a client may create or grow, all sub-filters' bit arrays "
                   "together, bytes (suffixes kb, mb, gb; 0 = no limit)")
        ->envname("BLOOMERY_MAX_FILTER_BYTES")
        ->group(filters);
    app.add_option("--keyspace-shards", c.keyspace_shards, "Lock shards of the keyspace")
        ->envname("BLOOMERY_KEYSPACE_SHARDS")
        ->group(filters);
    app.add_option("--lfu-log-factor", c.lfu_log_factor,
                   "How slowly a key's use counter (OBJECT FREQ, redis-cli --hotkeys) grows: "
                   "about a million uses reach 255 at 10, as Redis's LFU; also CONFIG SET")
        ->envname("BLOOMERY_LFU_LOG_FACTOR")
        ->group(filters);
    app.add_option("--lfu-decay-time", c.lfu_decay_time_minutes,
                   "Minutes for an unused key's use counter to lose one (0 = never), as "
                   "Redis's LFU; also CONFIG SET")
        ->envname("BLOOMERY_LFU_DECAY_TIME")
        ->group(filters);
}

void OptionSet::add_memory() {
    auto* memory = "Memory";
    maxmemory_spec = "0";
    app.add_option("--maxmemory", maxmemory_spec,
                   "Most bytes held for filters, keys and client buffers before commands that "
                   "allocate answer -OOM: a size (suffixes kb, mb, gb) or a percentage of the "
                   "container's memory limit (cgroup), else of physical memory, e.g. 75%; "
                   "0 = no limit")
        ->envname("BLOOMERY_MAXMEMORY")
        ->group(memory);
    maxmemory_clients_spec = c.maxmemory_clients.format();
    app.add_option("--maxmemory-clients", maxmemory_clients_spec,
                   "Most bytes all clients together may hold (query buffers, arguments, replies; "
                   "replicas not counted) before the ones holding most are closed, largest "
                   "first (CLIENT NO-EVICT on exempts one; INFO evicted_clients counts them): a "
                   "size (k, kb, m, mb, g, gb as Redis; at least 128 KiB is used) or a "
                   "percentage of --maxmemory, e.g. 5%; 0 = no limit; also CONFIG SET")
        ->envname("BLOOMERY_MAXMEMORY_CLIENTS")
        ->group(memory);
}

void OptionSet::add_persistence() {
    auto* persistence = "Persistence";
    app.add_option("--dir", c.dir, "Directory for snapshots (created if missing)")
        ->envname("BLOOMERY_DIR")
        ->group(persistence);
    app.add_option("--dbfilename", c.dbfilename, "Snapshot file name inside --dir")
        ->envname("BLOOMERY_DBFILENAME")
        ->group(persistence);
    save_spec = format_save_points(c.save_points);
    app.add_option("--save", save_spec,
                   "Save points 'SECONDS CHANGES ...': snapshot after SECONDS if at least CHANGES "
                   "writes; \"\" disables periodic snapshots")
        ->envname("BLOOMERY_SAVE")
        ->group(persistence);
    stop_writes = c.stop_writes_on_bgsave_error ? "yes" : "no";
    app.add_option("--stop-writes-on-bgsave-error", stop_writes,
                   "yes: while the last snapshot failed, refuse writes with -MISCONF until one "
                   "succeeds (reads are still served)")
        ->envname("BLOOMERY_STOP_WRITES_ON_BGSAVE_ERROR")
        ->check(CLI::IsMember({"yes", "no"}))
        ->group(persistence);
    app.add_option("--check-snapshot", result.check_snapshot,
                   "Verify a snapshot file, print what it holds, and exit")
        ->group(persistence);
    app.add_option("--import-rdb", result.import_rdb,
                   "Read a Redis RDB file (RDB 8-12, Redis 4.0-7.4) and write its RedisBloom "
                   "Bloom filters of database 0, bits, item counts and TTLs kept, as the snapshot "
                   "in --dir (--dbfilename), then exit; other values are skipped and counted. "
                   "Refuses a data directory that holds a snapshot or journal already. Start the "
                   "server afterwards to serve them")
        ->group(persistence);
    appendonly = c.appendonly ? "yes" : "no";
    app.add_option("--appendonly", appendonly,
                   "yes: journal every change (README \"Durability\"), so adds since the last "
                   "snapshot survive a crash")
        ->envname("BLOOMERY_APPENDONLY")
        ->check(CLI::IsMember({"yes", "no"}))
        ->group(persistence);
    app.add_option("--appendfsync", c.appendfsync,
                   "always: reply after the journal record is on disk (group commit); everysec: "
                   "reply after it is written, fsync once a second; no: reply after it is "
                   "written, fsync left to the OS")
        ->envname("BLOOMERY_APPENDFSYNC")
        ->check(CLI::IsMember({"always", "everysec", "no"}))
        ->group(persistence);
    app.add_option("--appendfilename", c.appendfilename,
                   "Journal segment name inside --dir (files NAME.<offset>)")
        ->envname("BLOOMERY_APPENDFILENAME")
        ->group(persistence);
    app.add_option("--auto-aof-rewrite-percentage", c.auto_aof_rewrite_percentage,
                   "Snapshot (dropping the journal it covers) when the journal grew by this "
                   "percentage since the last one; 0 disables")
        ->envname("BLOOMERY_AUTO_AOF_REWRITE_PERCENTAGE")
        ->group(persistence);
    app.add_option("--auto-aof-rewrite-min-size", c.auto_aof_rewrite_min_size,
                   "...and is at least this large (suffixes kb, mb, gb)")
        ->envname("BLOOMERY_AUTO_AOF_REWRITE_MIN_SIZE")
        ->group(persistence);
    app.add_option("--journal-buffer-limit", c.journal_buffer_limit,
                   "Journal bytes not yet on disk past which writes are refused with -MISCONF "
                   "(a disk slower than the clients)")
        ->envname("BLOOMERY_JOURNAL_BUFFER_LIMIT")
        ->group(persistence);
    app.add_option(
           "--check-journal", result.check_journal,
           "Verify a journal segment, print what it holds, and exit: 0 if good, 2 if only its "
           "last write was torn (a start cuts that off), 1 if corrupt")
        ->group(persistence);
    app.add_flag("--fix", result.fix_journal,
                 "With --check-journal: cut a bad tail off at the last good record")
        ->group(persistence);
}

void OptionSet::add_replication() {
    auto* replication = "Replication";
    app.add_option("--replicaof", replicaof,
                   "HOST PORT (two words, as redis-server takes them, or one quoted): start as a "
                   "replica of that primary (a full copy, then its journal's records as they "
                   "happen; REPLICAOF at run time)")
        ->expected(1, 2)
        ->envname("BLOOMERY_REPLICAOF")
        ->group(replication);
    app.add_option("--masteruser", c.masteruser, "User to AUTH as on the primary")
        ->envname("BLOOMERY_MASTERUSER")
        ->group(replication);
    masterauth_option =
        app.add_option("--masterauth", c.masterauth, "Password to AUTH with on the primary")
            ->envname("BLOOMERY_MASTERAUTH")
            ->group(replication);
    masterauth_file_option =
        app.add_option("--masterauth-file", masterauth_file,
                       "Read --masterauth from this file (a Kubernetes Secret)")
            ->envname("BLOOMERY_MASTERAUTH_FILE")
            ->group(replication);
    app.add_option("--repl-backlog-size", c.repl_backlog_size,
                   "Journal kept for replicas to resume from after a cut, beyond what the last "
                   "snapshot needs (suffixes kb, mb, gb)")
        ->envname("BLOOMERY_REPL_BACKLOG_SIZE")
        ->group(replication);
    app.add_option("--repl-backlog-ttl", c.repl_backlog_ttl_seconds,
                   "Seconds the journal is kept for a replica that disconnected")
        ->envname("BLOOMERY_REPL_BACKLOG_TTL")
        ->group(replication);
    app.add_option("--repl-timeout", c.repl_timeout_seconds,
                   "Seconds without a byte from the primary (or an ack from a replica) before "
                   "the link is dropped and resumed")
        ->envname("BLOOMERY_REPL_TIMEOUT")
        ->group(replication);
    serve_stale = c.replica_serve_stale_data ? "yes" : "no";
    app.add_option("--replica-serve-stale-data", serve_stale,
                   "yes: a replica whose link is down serves the data it has; no: -MASTERDOWN")
        ->envname("BLOOMERY_REPLICA_SERVE_STALE_DATA")
        ->check(CLI::IsMember({"yes", "no"}))
        ->group(replication);
    app.add_option("--repl-ping-replica-period", c.repl_ping_replica_period_seconds,
                   "Seconds between keepalive records sent to replicas")
        ->envname("BLOOMERY_REPL_PING_REPLICA_PERIOD")
        ->group(replication);
    app.add_option("--shutdown-timeout", c.shutdown_timeout_seconds,
                   "Seconds SHUTDOWN and SIGTERM give replicas, once the clients are gone, to "
                   "acknowledge every write (0 = no wait; SHUTDOWN NOW skips it)")
        ->envname("BLOOMERY_SHUTDOWN_TIMEOUT")
        ->group(replication);
}

void OptionSet::add_cluster() {
    auto* cluster_group = "Cluster";
    cluster_enabled = "no";
    app.add_option("--cluster-enabled", cluster_enabled,
                   "yes: Redis Cluster protocol with the static --cluster-slots map (keys of "
                   "other nodes' slots answer -MOVED)")
        ->envname("BLOOMERY_CLUSTER_ENABLED")
        ->check(CLI::IsMember({"yes", "no"}))
        ->group(cluster_group);
    cluster_slots_option =
        app.add_option("--cluster-slots", cluster_slots,
                       "Slot map, the same on every node: RANGE=host:port[|replica:port...],... "
                       "covering slots 0-16383 once, e.g. "
                       "\"0-8191=a:6379,8192-16383=b:6379\"")
            ->envname("BLOOMERY_CLUSTER_SLOTS")
            ->group(cluster_group);
    cluster_self_option =
        app.add_option("--cluster-self", cluster_self,
                       "This node's host:port in --cluster-slots, or auto: the N of a host name "
                       "ending in -N (StatefulSet pod) picks the N-th node (primaries in slot "
                       "order, then replicas)")
            ->envname("BLOOMERY_CLUSTER_SELF")
            ->group(cluster_group);
}

void OptionSet::add_monitoring() {
    auto* monitoring = "Monitoring";
    app.add_option("--metrics-port", c.metrics_port,
                   "HTTP port for /metrics (Prometheus), /healthz and /readyz (0 = off)")
        ->envname("BLOOMERY_METRICS_PORT")
        ->group(monitoring);
    app.add_option("--metrics-bind", c.metrics_bind,
                   "Address of the HTTP listener (default: the same as --bind)")
        ->envname("BLOOMERY_METRICS_BIND")
        ->group(monitoring);
    app.add_option("--metrics-max-connections", c.metrics_max_connections,
                   "Most simultaneous HTTP connections; at the bound a new connection replaces "
                   "the one stalled longest (waiting for its request or for its reply to be "
                   "read)")
        ->envname("BLOOMERY_METRICS_MAX_CONNECTIONS")
        ->group(monitoring);
    app.add_option("--metrics-max-connections-per-client", c.metrics_max_connections_per_client,
                   "Most simultaneous HTTP connections from one client address; at either "
                   "bound a new connection replaces the one stalled longest")
        ->envname("BLOOMERY_METRICS_MAX_CONNECTIONS_PER_CLIENT")
        ->group(monitoring);
    app.add_option("--metrics-max-request-bytes", c.metrics_max_request_bytes,
                   "Largest HTTP request line and headers, bytes; larger requests are refused "
                   "(431) and closed")
        ->envname("BLOOMERY_METRICS_MAX_REQUEST_BYTES")
        ->group(monitoring);
    app.add_option("--metrics-request-timeout", c.metrics_request_timeout_seconds,
                   "Seconds an HTTP client has to send a whole request (and to read the reply) "
                   "before it is closed")
        ->envname("BLOOMERY_METRICS_REQUEST_TIMEOUT")
        ->group(monitoring);
    app.add_option("--latency-monitor-threshold", c.latency_monitor_threshold_ms,
                   "Record events (commands, expiry rounds, snapshots, fsyncs) that took at "
                   "least this many milliseconds for LATENCY (0 = off); also CONFIG SET")
        ->envname("BLOOMERY_LATENCY_MONITOR_THRESHOLD")
        ->group(monitoring);
    app.add_option("--slowlog-log-slower-than", c.slowlog_log_slower_than_us,
                   "Log commands that took at least this many microseconds in SLOWLOG "
                   "(-1 = off, 0 = every command); also CONFIG SET")
        ->envname("BLOOMERY_SLOWLOG_LOG_SLOWER_THAN")
        ->group(monitoring);
    app.add_option("--slowlog-max-len", c.slowlog_max_len,
                   "Most SLOWLOG entries kept (the oldest go first); also CONFIG SET")
        ->envname("BLOOMERY_SLOWLOG_MAX_LEN")
        ->group(monitoring);
    app.add_flag("--test-config", result.test_config,
                 "Check flags, config file and environment (and the files they name) without "
                 "binding or loading; print what is wrong or 'configuration OK'; exit 1 or 0")
        ->group(monitoring);
    app.add_option("--health-check", result.health_check,
                   "HOST:PORT: PING that server over the protocol (with AUTH when a password is "
                   "configured) and exit 0 on PONG, 1 otherwise; for container health checks")
        ->group(monitoring);
    app.add_flag("--health-check-tls", result.health_check_tls,
                 "With --health-check: connect over TLS, verifying the server with "
                 "--tls-ca-cert-file and presenting --tls-cert-file/--tls-key-file if set")
        ->group(monitoring);
    app.add_option("--health-check-timeout", result.health_check_timeout_seconds,
                   "With --health-check: seconds for the whole check (connect, AUTH, PING)")
        ->group(monitoring);
}

void OptionSet::add_logging() {
    auto* logging = "Logging";
    app.add_option("--loglevel", c.log_level, "Log level")
        ->envname("BLOOMERY_LOGLEVEL")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
        ->group(logging);
    app.add_option("--logfile", c.log_file, "Log to this file instead of stderr")
        ->envname("BLOOMERY_LOGFILE")
        ->group(logging);
}

}  // namespace bloomery::app
