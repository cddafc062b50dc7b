// CONFIG and its subcommands. The configuration is fixed at start; only the
// slow log's two settings (which live in the Slowlog rather than in the
// Config every worker reads without locks), the latency monitor's threshold
// (core/latency_monitor.hpp), the output buffer limits and maxmemory-clients
// (atomics in the Config) change at run time (CONFIG SET), and REPLICAOF
// changes whom this server follows: CONFIG REWRITE writes those into the
// --config file.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bloomery/cluster/topology.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/glob.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/core/file_io.hpp"
#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/core/printable.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

// CONFIG GET shows the replication and thread settings the server holds;
// CONFIG SET and RESETSTAT reach the clients and the statistics.
using ConfigContext = With<uses::Clients, uses::Replication, uses::Stats>;

std::string human_bool(bool b) {
    return b ? "yes" : "no";
}

// CONFIG GET shows a real value exactly, in its shortest form ("1e-09",
// "0.01"), not rounded to six digits.
std::string format_number(double value) {
    return core::format_real(value);
}

std::vector<std::pair<std::string, std::string>> config_table(const ConfigContext& ctx) {
    const core::Config& c = ctx.config;
    // What this server follows now (REPLICAOF changes it at run time).
    const command::ReplicationInfo replication = ctx.server.replication.replication();
    const std::string replicaof = replication.replica ? replication.primary_host + " " +
                                                            std::to_string(replication.primary_port)
                                                      : "";
    return {
        {"bind", c.bind},
        {"port", std::to_string(c.port)},
        {"io-threads", std::to_string(ctx.server.stats.worker_threads())},
        {"threads", std::to_string(ctx.server.stats.worker_threads())},
        {"maxclients", std::to_string(c.max_clients)},
        {"timeout", std::to_string(c.timeout_seconds)},
        {"tls-port", std::to_string(c.tls_port)},
        {"tls-cert-file", c.tls_cert_file},
        {"tls-key-file", c.tls_key_file},
        {"tls-ca-cert-file", c.tls_ca_cert_file},
        {"tls-auth-clients", c.tls_auth_clients == core::TlsAuthClients::no         ? "no"
                             : c.tls_auth_clients == core::TlsAuthClients::optional ? "optional"
                                                                                    : "yes"},
        {"tls-handshake-timeout", format_number(c.tls_handshake_timeout_seconds)},
        {"databases", "1"},
        {"proto-max-bulk-len", std::to_string(c.proto_max_bulk_len)},
        {"proto-max-inline-len", std::to_string(c.proto_max_inline_len)},
        {"proto-max-multibulk-len", std::to_string(c.proto_max_multibulk_len)},
        {"client-query-buffer-limit", std::to_string(c.client_query_buffer_limit)},
        {"client-output-buffer-limit",
         core::format_output_buffer_limits(c.client_output_buffer_limits)},
        {"maxmemory", std::to_string(c.maxmemory)},
        {"maxmemory-clients", c.maxmemory_clients.format()},
        {"maxmemory-policy", "noeviction"},
        {"dir", c.dir},
        {"dbfilename", c.dbfilename},
        {"save", core::format_save_points(c.save_points)},
        {"stop-writes-on-bgsave-error", human_bool(c.stop_writes_on_bgsave_error)},
        {"appendonly", human_bool(c.appendonly)},
        {"appendfsync", c.appendfsync},
        {"appendfilename", c.appendfilename},
        {"auto-aof-rewrite-percentage", std::to_string(c.auto_aof_rewrite_percentage)},
        {"auto-aof-rewrite-min-size", std::to_string(c.auto_aof_rewrite_min_size)},
        {"journal-buffer-limit", std::to_string(c.journal_buffer_limit)},
        {"loglevel", c.log_level},
        {"logfile", c.log_file},
        {"bf-error-rate", format_number(c.default_error_rate)},
        {"bf-initial-size", std::to_string(c.default_capacity)},
        {"bf-expansion-factor", std::to_string(c.default_expansion)},
        {"bf-default-layout", c.default_layout},
        {"max-filter-bytes", std::to_string(c.max_filter_bytes)},
        {"keyspace-shards", std::to_string(c.keyspace_shards)},
        {"lfu-log-factor", std::to_string(store::lfu_log_factor())},
        {"lfu-decay-time", std::to_string(store::lfu_decay_time())},
        {"replicaof", replicaof},
        {"masteruser", c.masteruser},
        {"masterauth", c.masterauth.empty() ? "" : "<redacted>"},
        {"repl-backlog-size", std::to_string(c.repl_backlog_size)},
        {"repl-backlog-ttl", std::to_string(c.repl_backlog_ttl_seconds)},
        {"repl-timeout", std::to_string(c.repl_timeout_seconds)},
        {"repl-ping-replica-period", std::to_string(c.repl_ping_replica_period_seconds)},
        {"replica-serve-stale-data", human_bool(c.replica_serve_stale_data)},
        {"replica-read-only", "yes"},
        {"cluster-enabled", human_bool(c.cluster_enabled)},
        {"cluster-slots", c.cluster ? c.cluster->describe() : ""},
        {"cluster-self", c.cluster ? c.cluster->self().address : ""},
        // Never the password itself: only whether one is set.
        {"requirepass", c.requirepass.empty() ? "" : "<redacted>"},
        {"aclfile", c.aclfile},
        {"protected-mode", human_bool(c.protected_mode)},
        {"unauthenticated-max-multibulk-len", std::to_string(c.unauthenticated_max_multibulk_len)},
        {"unauthenticated-max-bulk-len", std::to_string(c.unauthenticated_max_bulk_len)},
        {"unauthenticated-query-buffer-limit",
         std::to_string(c.unauthenticated_query_buffer_limit)},
        {"shutdown-timeout", std::to_string(c.shutdown_timeout_seconds)},
        {"latency-monitor-threshold", std::to_string(core::latency_threshold_ms())},
        {"slowlog-log-slower-than",
         std::to_string(ctx.slowlog != nullptr ? ctx.slowlog->log_slower_than_us()
                                               : c.slowlog_log_slower_than_us)},
        {"slowlog-max-len",
         std::to_string(ctx.slowlog != nullptr ? ctx.slowlog->max_len() : c.slowlog_max_len)},
        {"metrics-port", std::to_string(c.metrics_port)},
        {"metrics-bind", c.metrics_bind_address()},
        {"metrics-max-connections", std::to_string(c.metrics_max_connections)},
        {"metrics-max-connections-per-client",
         std::to_string(c.metrics_max_connections_per_client)},
        {"metrics-max-request-bytes", std::to_string(c.metrics_max_request_bytes)},
        {"metrics-request-timeout", format_number(c.metrics_request_timeout_seconds)},
    };
}

// What CONFIG SET may change: the slow log's two integers and the latency
// monitor's threshold, within the ranges the command line also checks
// (core::option_ranges, Redis 7's where Redis has them), the output buffer
// limits and maxmemory-clients. Each parses its value first and returns the
// change to make, or the reason it refuses (Redis's text after the
// parameter's name).
using Change = std::function<void(ConfigContext&)>;
struct Settable {
    std::string_view name;
    bool (*check)(ConfigContext& ctx, std::string_view name, std::string_view value, Change& change,
                  std::string& reason);
};

bool check_integer(std::string_view name, std::string_view value, std::int64_t& out,
                   std::string& reason) {
    if (!parse_int64(value, out)) {
        reason = errors::kConfigSetNotInteger;
        return false;
    }
    const core::OptionRange& range = *core::find_option_range(name);
    if (out < range.min || out > range.max) {
        reason = std::string(errors::kConfigSetOutOfRange) + core::describe_range(range);
        return false;
    }
    return true;
}

// An integer setting kept by a process-wide setter.
template <void (*Set)(std::int64_t)>
bool set_global(ConfigContext&, std::string_view name, std::string_view value, Change& change,
                std::string& reason) {
    std::int64_t n = 0;
    if (!check_integer(name, value, n, reason)) return false;
    change = [n](ConfigContext&) { Set(n); };
    return true;
}

constexpr Settable kSettable[] = {
    {"slowlog-log-slower-than",
     [](ConfigContext& ctx, std::string_view name, std::string_view value, Change& change,
        std::string& reason) {
         std::int64_t n = 0;
         if (ctx.slowlog == nullptr || !check_integer(name, value, n, reason)) return false;
         change = [n](ConfigContext& c) { c.slowlog->set_log_slower_than_us(n); };
         return true;
     }},
    {"slowlog-max-len",
     [](ConfigContext& ctx, std::string_view name, std::string_view value, Change& change,
        std::string& reason) {
         std::int64_t n = 0;
         if (ctx.slowlog == nullptr || !check_integer(name, value, n, reason)) return false;
         change = [n](ConfigContext& c) { c.slowlog->set_max_len(static_cast<std::size_t>(n)); };
         return true;
     }},
    {"latency-monitor-threshold", set_global<core::set_latency_threshold_ms>},
    {"lfu-log-factor", set_global<store::set_lfu_log_factor>},
    {"lfu-decay-time", set_global<store::set_lfu_decay_time>},
    {"client-output-buffer-limit",
     [](ConfigContext& ctx, std::string_view, std::string_view value, Change& change,
        std::string& reason) {
         // Parsed into a copy, applied class by class when every pair passed.
         auto parsed =
             std::make_shared<core::OutputBufferLimits>(ctx.config.client_output_buffer_limits);
         std::string error;
         if (!core::parse_output_buffer_limits(value, *parsed, error)) {
             reason = "') - " + error;
             return false;
         }
         change = [parsed](ConfigContext& c) {
             for (unsigned i = 0; i < core::kClientClasses; ++i) {
                 const auto client_class = static_cast<core::ClientClass>(i);
                 c.config.client_output_buffer_limits.set(client_class, parsed->get(client_class));
             }
         };
         return true;
     }},
    {"maxmemory-clients",
     [](ConfigContext&, std::string_view, std::string_view value, Change& change,
        std::string& reason) {
         // Checked on a scratch copy; applied with the other pairs, then
         // enforced at once (Redis evicts before its next command).
         std::string error;
         if (!core::ClientsMemoryLimit().parse(value, error)) {
             reason = "') - " + error;
             return false;
         }
         change = [text = std::string(value)](ConfigContext& c) {
             std::string checked;
             c.config.maxmemory_clients.parse(text, checked);
             c.server.clients.evict_clients_over_limit();
         };
         return true;
     }},
};

const Settable* find_settable(std::string_view name) {
    for (const Settable& settable : kSettable) {
        if (iequals(name, settable.name)) return &settable;
    }
    return nullptr;
}

void cmd_config_get(ConfigContext& ctx, Args argv) {
    const auto table = config_table(ctx);
    std::vector<const std::pair<std::string, std::string>*> matched;
    for (const auto& entry : table) {
        for (std::size_t i = 2; i < argv.size(); ++i) {
            if (glob_match(argv[i], entry.first, GlobCase::insensitive)) {
                matched.push_back(&entry);
                break;
            }
        }
    }
    ctx.out.map(matched.size());
    for (const auto* entry : matched) {
        ctx.out.bulk(entry->first);
        ctx.out.bulk(entry->second);
    }
}

void config_set_failed(ConfigContext& ctx, std::string_view name, std::string_view reason) {
    std::string message(errors::kConfigSetFailed);
    message += name;  // one of kSettable's names
    message += reason;
    ctx.out.error(message);
}

void cmd_config_set(ConfigContext& ctx, Args argv) {
    if (argv.size() % 2 != 0) {
        reply_wrong_arity(ctx, "config|set");
        return;
    }
    // Every pair is checked before any is applied, so a bad one changes
    // nothing (as Redis).
    std::vector<std::pair<const Settable*, Change>> changes;
    for (std::size_t i = 2; i + 1 < argv.size(); i += 2) {
        const Settable* settable = find_settable(argv[i]);
        if (settable == nullptr) {
            // The rest of the configuration is read without locks by every
            // worker thread, so it is fixed at start; changing it needs a
            // restart with new flags or file.
            std::string message = "ERR CONFIG SET is not supported by bloomery for '";
            core::append_printable(message, argv[i]);
            message += "': restart with the new value";
            ctx.out.error(message);
            return;
        }
        for (const auto& change : changes) {
            if (change.first == settable) {
                config_set_failed(ctx, settable->name, errors::kConfigSetDuplicate);
                return;
            }
        }
        Change change;
        std::string reason;
        if (!settable->check(ctx, settable->name, argv[i + 1], change, reason)) {
            if (reason.empty()) {
                std::string message = "ERR CONFIG SET is not supported by bloomery for '";
                message += settable->name;
                message += "' here";
                ctx.out.error(message);
            } else {
                config_set_failed(ctx, settable->name, reason);
            }
            return;
        }
        changes.emplace_back(settable, std::move(change));
    }
    for (const auto& [settable, change] : changes) change(ctx);
    ctx.out.ok();
}

// ---- CONFIG REWRITE ----
//
// Rewrites the --config file so that a restart keeps what was changed at run
// time: CONFIG SET's settings and REPLICAOF (a replica promoted by Sentinel
// restarts as the primary it became). As Redis does, each such setting
// replaces its line in place (the first, if there are several; the others
// go), is appended under a "# Generated by CONFIG REWRITE" line when the
// file lacks it and its value is not the default, and a replicaof line goes
// when this server follows nobody. Every other line, comment and blank line
// is kept as written (settings fixed at start are not written: their flags
// and environment stay where they were given). The new file replaces the old
// one atomically (written beside it, fsynced, renamed, the directory fsynced).

// A setting's line in the file's syntax (`key = "value"`, quoted for CLI11).
std::string config_line(std::string_view name, std::string_view value) {
    std::string line(name);
    line += " = \"";
    for (char c : value) {
        if (c == '"' || c == '\\') line += '\\';
        line += c;
    }
    line += '"';
    return line;
}

// The setting a line of the file sets ("key = value" or "key value"), or "".
std::string_view line_key(std::string_view line) {
    std::size_t start = 0;
    while (start < line.size() && (line[start] == ' ' || line[start] == '\t')) ++start;
    std::size_t end = start;
    while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) ||
                                 line[end] == '-' || line[end] == '_')) {
        ++end;
    }
    if (end == start || end == line.size()) return {};
    std::size_t next = end;
    while (next < line.size() && (line[next] == ' ' || line[next] == '\t')) ++next;
    if (next == end && line[next] != '=') return {};
    return line.substr(start, end - start);
}

bool rewrite_config(const ConfigContext& ctx, std::string& error) {
    const std::string& path = ctx.config.config_file;
    std::vector<std::string> lines;
    {
        std::ifstream in(path);
        if (!in) {
            error = "Rewriting config file: " + std::string(std::strerror(errno));
            return false;
        }
        for (std::string line; std::getline(in, line);) lines.push_back(line);
    }
    // What may have changed at run time, now and by default.
    std::vector<std::pair<std::string, std::string>> settings;
    const core::Config defaults;
    for (const auto& [name, value] : config_table(ctx)) {
        if (name == "replicaof" || find_settable(name) != nullptr)
            settings.emplace_back(name, value);
    }
    const auto default_of = [&](std::string_view name) -> std::string {
        if (name == "slowlog-log-slower-than") {
            return std::to_string(defaults.slowlog_log_slower_than_us);
        }
        if (name == "slowlog-max-len") return std::to_string(defaults.slowlog_max_len);
        if (name == "latency-monitor-threshold") {
            return std::to_string(defaults.latency_monitor_threshold_ms);
        }
        if (name == "client-output-buffer-limit") {
            return core::format_output_buffer_limits(defaults.client_output_buffer_limits);
        }
        if (name == "lfu-log-factor") return std::to_string(defaults.lfu_log_factor);
        if (name == "lfu-decay-time") return std::to_string(defaults.lfu_decay_time_minutes);
        if (name == "maxmemory-clients") return defaults.maxmemory_clients.format();
        return {};  // replicaof: none
    };
    std::vector<std::string> appended;
    for (const auto& [name, value] : settings) {
        bool placed = false;
        for (std::size_t i = 0; i < lines.size(); ++i) {
            if (!iequals(line_key(lines[i]), name)) continue;
            if (placed || (name == "replicaof" && value.empty())) {
                lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
                --i;
                continue;
            }
            lines[i] = config_line(name, value);
            placed = true;
        }
        if (!placed && value != default_of(name)) appended.push_back(config_line(name, value));
    }
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    if (!appended.empty()) {
        const std::string_view signature = "# Generated by CONFIG REWRITE";
        if (std::find(lines.begin(), lines.end(), signature) == lines.end()) {
            text += std::string(signature) + "\n";
        }
        for (const std::string& line : appended) text += line + "\n";
    }
    const std::string temporary = path + ".rewrite-" + std::to_string(::getpid());
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        error = "Rewriting config file: " + std::string(std::strerror(errno));
        return false;
    }
    const int written = core::write_all(fd, text.data(), text.size());
    const bool synced = written == 0 && ::fsync(fd) == 0;
    const int saved_errno = written != 0 ? written : errno;
    ::close(fd);
    if (!synced || ::rename(temporary.c_str(), path.c_str()) != 0) {
        const int failure = synced ? errno : saved_errno;
        ::unlink(temporary.c_str());
        error = "Rewriting config file: " + std::string(std::strerror(failure));
        return false;
    }
    std::string directory_error;
    const auto slash = path.find_last_of('/');
    core::fsync_directory(slash == std::string::npos ? "." : path.substr(0, slash + 1),
                          directory_error);
    return true;
}

void cmd_config_rewrite(ConfigContext& ctx, Args) {
    if (ctx.config.config_file.empty()) {
        ctx.out.error(errors::kNoConfigFile);
        return;
    }
    std::string error;
    if (!rewrite_config(ctx, error)) {
        ctx.out.error("ERR " + error);
        return;
    }
    ctx.out.ok();
}

void cmd_config_resetstat(ConfigContext& ctx, Args) {
    ctx.server.stats.reset_stats();
    ctx.server.clients.reset_evicted_clients();
    ctx.out.ok();
}

void cmd_config_help(Context& ctx, Args) {
    reply_help(
        ctx, {"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "GET <pattern>",
              "    Return parameters matching the glob-like <pattern>.", "SET <directive> <value>",
              "    Set the configuration <directive> to <value> (slowlog-log-slower-than,",
              "    slowlog-max-len, latency-monitor-threshold, client-output-buffer-limit,",
              "    lfu-log-factor, lfu-decay-time, maxmemory-clients; the rest is fixed at",
              "    start).", "RESETSTAT", "    Reset statistics reported by the INFO command.",
              "REWRITE", "    Rewrite the configuration file with what changed at run time.",
              "HELP", "    Print this help."});
}
}  // namespace

void register_config_commands(Registry& registry) {
    registry.register_handler<cmd_config_get>("config|get");
    registry.register_handler<cmd_config_set>("config|set");
    registry.register_handler<cmd_config_resetstat>("config|resetstat");
    registry.register_handler<cmd_config_rewrite>("config|rewrite");
    registry.register_handler<cmd_config_help>("config|help");
}

}  // namespace bloomery::command
