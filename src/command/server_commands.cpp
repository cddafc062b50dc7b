// Connection and server commands: PING, ECHO, QUIT, HELLO, SELECT, TIME,
// CLIENT, CONFIG, INFO, COMMAND, SAVE, BGSAVE, LASTSAVE, SHUTDOWN.

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <string>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "families.hpp"
#include "glob.hpp"

namespace bloomery::command {

// The Redis version we announce in HELLO and INFO: clients gate features on
// it (redis-py, go-redis and redis-cli expect 6+ for HELLO/RESP3 and 7 for
// COMMAND DOCS). bloomery's own version is reported beside it.
constexpr std::string_view kRedisCompatVersion = "7.2.0";

std::string format_client_line(const ClientState& client, std::int64_t now_ms,
                               std::size_t query_buffer_bytes, std::size_t output_buffer_bytes) {
    std::string name, lib_name, lib_version;
    {
        std::lock_guard lock(client.mutex);
        name = client.name_;
        lib_name = client.lib_name_;
        lib_version = client.lib_version_;
    }
    const char* last_command = client.last_command.load(std::memory_order_relaxed);
    const std::int64_t age = (now_ms - client.created_ms) / 1000;
    const std::int64_t idle =
        (now_ms - client.last_interaction_ms.load(std::memory_order_relaxed)) / 1000;
    std::string line;
    line.reserve(320);
    auto field = [&](std::string_view key, std::string_view value) {
        if (!line.empty()) line.push_back(' ');
        line.append(key);
        line.push_back('=');
        line.append(value);
    };
    field("id", std::to_string(client.id));
    field("addr", client.address);
    field("laddr", client.local_address);
    field("fd", "-1");
    field("name", name);
    field("age", std::to_string(age));
    field("idle", std::to_string(idle));
    field("flags", "N");
    field("db", "0");
    field("sub", "0");
    field("psub", "0");
    field("ssub", "0");
    field("multi", "-1");
    field("qbuf", std::to_string(query_buffer_bytes));
    field("qbuf-free", "0");
    field("argv-mem", "0");
    field("multi-mem", "0");
    field("obl", "0");
    field("oll", "0");
    field("omem", std::to_string(output_buffer_bytes));
    field("tot-mem", std::to_string(query_buffer_bytes + output_buffer_bytes));
    field("events", "r");
    field("cmd", last_command ? last_command : "NULL");
    field("user", "default");
    field("redir", "-1");
    field("resp", std::to_string(client.protocol.load(std::memory_order_relaxed)));
    field("lib-name", lib_name);
    field("lib-ver", lib_version);
    return line;
}

namespace {

void cmd_ping(Context& ctx, Args argv) {
    if (argv.size() > 2) {
        reply_wrong_arity(ctx, "ping");
    } else if (argv.size() == 2) {
        ctx.out.bulk(argv[1]);
    } else {
        ctx.out.simple("PONG");
    }
}

void cmd_echo(Context& ctx, Args argv) {
    ctx.out.bulk(argv[1]);
}

void cmd_quit(Context& ctx, Args) {
    ctx.out.ok();
    ctx.client.close_after_reply = true;
}

void cmd_select(Context& ctx, Args argv) {
    std::int64_t index;
    if (!parse_int64(argv[1], index)) {
        ctx.out.error(errors::kNotInteger);
    } else if (index != 0) {
        ctx.out.error(errors::kDbIndexOutOfRange);
    } else {
        ctx.out.ok();
    }
}

// Names may not contain spaces or control characters (CLIENT LIST is
// space-separated), as in Redis.
bool valid_client_name(std::string_view name) {
    for (char c : name) {
        if (c < '!' || c > '~') return false;
    }
    return true;
}

void cmd_hello(Context& ctx, Args argv) {
    std::size_t i = 1;
    if (argv.size() >= 2) {
        std::int64_t version;
        if (!parse_int64(argv[1], version)) {
            ctx.out.error("ERR Protocol version is not an integer or out of range");
            return;
        }
        if (version != 2 && version != 3) {
            ctx.out.error(errors::kProtocolVersion);
            return;
        }
        i = 2;
        std::string_view new_name;
        bool set_name = false;
        for (; i < argv.size(); ++i) {
            if (iequals(argv[i], "AUTH") && i + 2 < argv.size()) {
                i += 2;  // no ACLs: the default user has no password, as a fresh Redis
            } else if (iequals(argv[i], "SETNAME") && i + 1 < argv.size()) {
                new_name = argv[++i];
                set_name = true;
                if (!valid_client_name(new_name)) {
                    ctx.out.error(
                        "ERR Client names cannot contain spaces, newlines or special characters.");
                    return;
                }
            } else {
                std::string message = "ERR Syntax error in HELLO option '";
                for (char c : argv[i].substr(0, 64)) message.push_back(c < ' ' ? ' ' : c);
                message += "'";
                ctx.out.error(message);
                return;
            }
        }
        if (set_name) ctx.client.set_name(new_name);
        ctx.client.protocol.store(static_cast<int>(version), std::memory_order_relaxed);
        ctx.out.set_protocol(static_cast<int>(version));
    }
    ctx.out.map(7);
    ctx.out.bulk("server");
    ctx.out.bulk("redis");
    ctx.out.bulk("version");
    ctx.out.bulk(kRedisCompatVersion);
    ctx.out.bulk("proto");
    ctx.out.integer(ctx.out.protocol());
    ctx.out.bulk("id");
    ctx.out.integer(ctx.client.id);
    ctx.out.bulk("mode");
    ctx.out.bulk("standalone");
    ctx.out.bulk("role");
    ctx.out.bulk("master");
    ctx.out.bulk("modules");
    ctx.out.array(0);
}

void cmd_time(Context& ctx, Args) {
    using namespace std::chrono;
    const auto now = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
    ctx.out.array(2);
    ctx.out.bulk(std::to_string(now / 1000000));
    ctx.out.bulk(std::to_string(now % 1000000));
}

void reply_help(Context& ctx, std::initializer_list<std::string_view> lines) {
    ctx.out.array(lines.size());
    for (std::string_view line : lines) ctx.out.simple(line);
}

// ---- CLIENT ----

void cmd_client_id(Context& ctx, Args) {
    ctx.out.integer(ctx.client.id);
}

void cmd_client_setname(Context& ctx, Args argv) {
    if (!valid_client_name(argv[2])) {
        ctx.out.error("ERR Client names cannot contain spaces, newlines or special characters.");
        return;
    }
    ctx.client.set_name(argv[2]);
    ctx.out.ok();
}

void cmd_client_getname(Context& ctx, Args) {
    const std::string name = ctx.client.name();
    if (name.empty()) {
        ctx.out.null();
    } else {
        ctx.out.bulk(name);
    }
}

void cmd_client_list(Context& ctx, Args argv) {
    if (argv.size() > 2) {
        // CLIENT LIST TYPE normal|... and CLIENT LIST ID id...: every bloomery
        // client is "normal"; ID filters are applied to the full list.
        if (iequals(argv[2], "TYPE") && argv.size() == 4) {
            if (!iequals(argv[3], "normal")) {
                ctx.out.verbatim("");
                return;
            }
        } else if (iequals(argv[2], "ID") && argv.size() >= 4) {
            std::vector<std::int64_t> ids(argv.size() - 3);
            for (std::size_t i = 3; i < argv.size(); ++i) {
                if (!parse_int64(argv[i], ids[i - 3])) {
                    ctx.out.error("ERR Invalid client ID");
                    return;
                }
            }
            ctx.out.verbatim(ctx.server.client_list(ids));
            return;
        } else {
            ctx.out.error(errors::kSyntax);
            return;
        }
    }
    ctx.out.verbatim(ctx.server.client_list({}));
}

void cmd_client_info(Context& ctx, Args) {
    ctx.out.verbatim(format_client_line(ctx.client, store::now_ms(), 0, 0) + "\n");
}

void cmd_client_setinfo(Context& ctx, Args argv) {
    if (!valid_client_name(argv[3])) {
        ctx.out.error(
            "ERR lib-name and lib-ver cannot contain spaces, newlines or special characters.");
        return;
    }
    if (iequals(argv[2], "LIB-NAME")) {
        ctx.client.set_library(argv[3], {});
    } else if (iequals(argv[2], "LIB-VER")) {
        ctx.client.set_library({}, argv[3]);
    } else {
        std::string message = "ERR Unrecognized option '";
        for (char c : argv[2].substr(0, 64)) message.push_back(c < ' ' ? ' ' : c);
        ctx.out.error(message + "'");
        return;
    }
    ctx.out.ok();
}

void cmd_client_kill(Context& ctx, Args argv) {
    if (argv.size() == 3) {  // old form: CLIENT KILL ip:port
        if (ctx.server.kill_client(argv[2])) {
            ctx.out.ok();
        } else {
            ctx.out.error("ERR No such client");
        }
        return;
    }
    std::int64_t killed = 0;
    for (std::size_t i = 2; i < argv.size(); i += 2) {
        if (i + 1 >= argv.size()) {
            ctx.out.error(errors::kSyntax);
            return;
        }
        if (iequals(argv[i], "ID")) {
            std::int64_t id;
            if (!parse_int64(argv[i + 1], id)) {
                ctx.out.error(errors::kNotInteger);
                return;
            }
            killed += ctx.server.kill_client(id) ? 1 : 0;
        } else if (iequals(argv[i], "ADDR")) {
            killed += ctx.server.kill_client(argv[i + 1]) ? 1 : 0;
        } else {
            ctx.out.error(errors::kSyntax);
            return;
        }
    }
    ctx.out.integer(killed);
}

void cmd_client_help(Context& ctx, Args) {
    reply_help(
        ctx,
        {"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "ID",
         "    Return the ID of the current connection.", "SETNAME <name>",
         "    Assign the name <name> to the current connection.", "GETNAME",
         "    Return the name of the current connection.", "LIST [TYPE normal] [ID id ...]",
         "    Return information about client connections.", "INFO",
         "    Return information about the current client connection.",
         "SETINFO <LIB-NAME|LIB-VER> <value>", "    Record the client library's name or version.",
         "KILL <ip:port> | ID <id> | ADDR <ip:port>", "    Kill connections.", "HELP",
         "    Print this help."});
}

// ---- CONFIG ----

std::string human_bool(bool b) {
    return b ? "yes" : "no";
}

std::vector<std::pair<std::string, std::string>> config_table(const Context& ctx) {
    const net::Config& c = ctx.config;
    return {
        {"bind", c.bind},
        {"port", std::to_string(c.port)},
        {"io-threads", std::to_string(ctx.server.worker_threads())},
        {"threads", std::to_string(ctx.server.worker_threads())},
        {"maxclients", std::to_string(c.max_clients)},
        {"timeout", std::to_string(c.timeout_seconds)},
        {"databases", "1"},
        {"proto-max-bulk-len", std::to_string(c.proto_max_bulk_len)},
        {"proto-max-inline-len", std::to_string(c.proto_max_inline_len)},
        {"proto-max-multibulk-len", std::to_string(c.proto_max_multibulk_len)},
        {"client-query-buffer-limit", std::to_string(c.client_query_buffer_limit)},
        {"client-output-buffer-limit", std::to_string(c.client_output_buffer_limit)},
        {"maxmemory", "0"},
        {"dir", c.dir},
        {"dbfilename", c.dbfilename},
        {"save", net::format_save_points(c.save_points)},
        {"appendonly", "no"},
        {"loglevel", c.log_level},
        {"logfile", c.log_file},
        {"bf-error-rate", std::to_string(c.default_error_rate)},
        {"bf-initial-size", std::to_string(c.default_capacity)},
        {"bf-expansion-factor", std::to_string(c.default_expansion)},
        {"max-filter-bytes", std::to_string(c.max_filter_bytes)},
        {"keyspace-shards", std::to_string(c.keyspace_shards)},
        {"cluster-enabled", human_bool(false)},
    };
}

void cmd_config_get(Context& ctx, Args argv) {
    const auto table = config_table(ctx);
    std::vector<const std::pair<std::string, std::string>*> matched;
    for (const auto& entry : table) {
        for (std::size_t i = 2; i < argv.size(); ++i) {
            if (glob_match(argv[i], entry.first, true)) {
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

void cmd_config_set(Context& ctx, Args argv) {
    // The configuration is read without locks by every worker thread, so it is
    // fixed at start; changing it needs a restart with new flags or file.
    std::string message = "ERR CONFIG SET is not supported by bloomery for '";
    for (char c : argv[2].substr(0, 64)) message.push_back(c < ' ' ? ' ' : c);
    message += "': restart with the new value";
    ctx.out.error(message);
}

void cmd_config_resetstat(Context& ctx, Args) {
    ctx.server.reset_stats();
    ctx.out.ok();
}

void cmd_config_help(Context& ctx, Args) {
    reply_help(ctx, {"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                     "GET <pattern>", "    Return parameters matching the glob-like <pattern>.",
                     "RESETSTAT", "    Reset statistics reported by the INFO command.", "HELP",
                     "    Print this help."});
}

// ---- INFO ----

std::string human_bytes(std::uint64_t bytes) {
    const char* units[] = {"B", "K", "M", "G", "T"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024 && unit < 4) {
        value /= 1024;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text, unit == 0 ? "%.0f%s" : "%.2f%s", value, units[unit]);
    return text;
}

std::uint64_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    std::uint64_t pages_total = 0, pages_resident = 0;
    statm >> pages_total >> pages_resident;
    return pages_resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

const std::string& run_id() {
    static const std::string id = [] {
        std::random_device device;
        std::mt19937_64 generator(device());
        std::string hex;
        const char* digits = "0123456789abcdef";
        for (int i = 0; i < 40; ++i) hex.push_back(digits[generator() % 16]);
        return hex;
    }();
    return id;
}

void line(std::string& out, std::string_view field, const std::string& value) {
    out.append(field);
    out.push_back(':');
    out.append(value);
    out.append("\r\n");
}

template <class Number>
void line(std::string& out, std::string_view field, Number value) {
    line(out, field, std::to_string(value));
}

void info_server(Context& ctx, std::string& out) {
    struct utsname name {};
    uname(&name);
    const std::int64_t now = store::now_ms();
    const std::int64_t uptime = (now - ctx.server.start_time_ms()) / 1000;
    out.append("# Server\r\n");
    line(out, "redis_version", std::string(kRedisCompatVersion));
    line(out, "bloomery_version", std::string(BLOOMERY_VERSION));
    line(out, "redis_mode", std::string("standalone"));
    line(out, "os", std::string(name.sysname) + " " + name.release + " " + name.machine);
    line(out, "arch_bits", static_cast<int>(sizeof(void*) * 8));
    line(out, "multiplexing_api", std::string("epoll"));
    line(out, "process_id", static_cast<long long>(getpid()));
    line(out, "run_id", run_id());
    line(out, "tcp_port", ctx.config.port);
    line(out, "server_time_usec", now * 1000);
    line(out, "uptime_in_seconds", uptime);
    line(out, "uptime_in_days", uptime / 86400);
    line(out, "hz", 10);
    line(out, "io_threads_active", ctx.server.worker_threads() > 1 ? 1 : 0);
    line(out, "bloomery_threads", ctx.server.worker_threads());
    line(out, "config_file", ctx.config.config_file);
}

void info_clients(Context& ctx, std::string& out) {
    out.append("# Clients\r\n");
    line(out, "connected_clients", ctx.server.connected_clients());
    line(out, "maxclients", ctx.config.max_clients);
    line(out, "blocked_clients", 0);
}

void info_memory(Context& ctx, std::string& out) {
    const std::uint64_t used = ctx.keyspace.memory_bytes();
    const std::uint64_t rss = resident_bytes();
    const std::uint64_t total = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                                static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
    out.append("# Memory\r\n");
    line(out, "used_memory", used);
    line(out, "used_memory_human", human_bytes(used));
    line(out, "used_memory_rss", rss);
    line(out, "used_memory_rss_human", human_bytes(rss));
    line(out, "total_system_memory", total);
    line(out, "total_system_memory_human", human_bytes(total));
    line(out, "maxmemory", 0);
    line(out, "mem_allocator", std::string("libc"));
}

void info_persistence(Context& ctx, std::string& out) {
    const PersistenceInfo p = ctx.server.persistence();
    out.append("# Persistence\r\n");
    line(out, "loading", p.loading ? 1 : 0);
    line(out, "rdb_changes_since_last_save", p.changes_since_last_save);
    line(out, "rdb_bgsave_in_progress", p.bgsave_in_progress ? 1 : 0);
    line(out, "rdb_last_save_time", p.last_save_time);
    line(out, "rdb_last_bgsave_status", std::string(p.last_bgsave_ok ? "ok" : "err"));
    line(out, "rdb_last_bgsave_time_sec", p.last_bgsave_time_sec);
    line(out, "rdb_current_bgsave_time_sec", p.current_bgsave_time_sec);
    line(out, "rdb_saves", p.saves);
    line(out, "rdb_last_cow_size", 0);
    line(out, "rdb_last_load_keys_loaded", p.loaded_keys);
    line(out, "rdb_last_save_bytes", p.last_save_bytes);
    line(out, "rdb_last_save_keys", p.last_save_keys);
    line(out, "rdb_saves_enabled", p.enabled ? 1 : 0);
    std::string error = p.last_error;
    for (char& c : error) {
        if (c == '\r' || c == '\n') c = ' ';
    }
    line(out, "rdb_last_error", error);
    line(out, "aof_enabled", 0);
}

void info_stats(Context& ctx, std::string& out) {
    const StatsTotals s = ctx.server.stats();
    char ops[32];
    std::snprintf(ops, sizeof ops, "%.0f", s.instantaneous_ops_per_sec);
    out.append("# Stats\r\n");
    line(out, "total_connections_received", s.connections_received);
    line(out, "total_commands_processed", s.commands);
    line(out, "instantaneous_ops_per_sec", std::string(ops));
    line(out, "total_net_input_bytes", s.net_input_bytes);
    line(out, "total_net_output_bytes", s.net_output_bytes);
    line(out, "rejected_connections", s.rejected_connections);
    line(out, "expired_keys", s.expired_keys);
    line(out, "keyspace_hits", s.keyspace_hits);
    line(out, "keyspace_misses", s.keyspace_misses);
    line(out, "total_error_replies", s.error_replies);
    line(out, "protocol_errors", s.protocol_errors);
}

void info_cpu(Context&, std::string& out) {
    struct rusage usage {};
    getrusage(RUSAGE_SELF, &usage);
    char text[64];
    out.append("# CPU\r\n");
    std::snprintf(text, sizeof text, "%ld.%06ld", static_cast<long>(usage.ru_stime.tv_sec),
                  static_cast<long>(usage.ru_stime.tv_usec));
    line(out, "used_cpu_sys", std::string(text));
    std::snprintf(text, sizeof text, "%ld.%06ld", static_cast<long>(usage.ru_utime.tv_sec),
                  static_cast<long>(usage.ru_utime.tv_usec));
    line(out, "used_cpu_user", std::string(text));
}

void info_keyspace(Context& ctx, std::string& out) {
    const store::Keyspace::Counts counts = ctx.keyspace.counts();
    out.append("# Keyspace\r\n");
    if (counts.keys > 0) {
        out.append("db0:keys=" + std::to_string(counts.keys) +
                   ",expires=" + std::to_string(counts.with_expiry) + ",avg_ttl=0\r\n");
    }
}

struct InfoSection {
    std::string_view name;
    void (*render)(Context&, std::string&);
    bool in_default;
};

constexpr InfoSection kInfoSections[] = {
    {"server", info_server, true},     {"clients", info_clients, true},
    {"memory", info_memory, true},     {"persistence", info_persistence, true},
    {"stats", info_stats, true},       {"cpu", info_cpu, true},
    {"keyspace", info_keyspace, true},
};

void cmd_info(Context& ctx, Args argv) {
    std::string out;
    bool all = argv.size() == 1;
    for (std::size_t i = 1; i < argv.size(); ++i) {
        if (iequals(argv[i], "all") || iequals(argv[i], "default") ||
            iequals(argv[i], "everything")) {
            all = true;
        }
    }
    for (const InfoSection& section : kInfoSections) {
        bool wanted = all && section.in_default;
        for (std::size_t i = 1; i < argv.size() && !wanted; ++i) {
            wanted = iequals(argv[i], section.name);
        }
        if (!wanted) continue;
        if (!out.empty()) out.append("\r\n");
        section.render(ctx, out);
    }
    ctx.out.verbatim(out);
}

// ---- COMMAND ----

void write_string_set(Context& ctx, const nlohmann::json& values) {
    ctx.out.set(values.size());
    for (const auto& v : values) ctx.out.simple(v.get<std::string>());
}

void write_command_info(Context& ctx, const CommandSpec& spec) {
    ctx.out.array(10);
    ctx.out.bulk(spec.name);
    ctx.out.integer(spec.arity);
    ctx.out.set(spec.flags.size());
    for (const auto& flag : spec.flags) ctx.out.simple(flag);
    ctx.out.integer(spec.first_key);
    ctx.out.integer(spec.last_key);
    ctx.out.integer(spec.step);
    write_string_set(ctx, spec.doc.value("acl_categories", nlohmann::json::array()));
    ctx.out.set(0);  // tips
    // Key specs (Redis 7): one range spec covering first_key..last_key.
    if (spec.first_key > 0) {
        ctx.out.array(1);
        ctx.out.map(4);
        ctx.out.bulk("flags");
        ctx.out.set(1);
        ctx.out.simple(spec.write ? "RW" : "RO");
        ctx.out.bulk("begin_search");
        ctx.out.map(2);
        ctx.out.bulk("type");
        ctx.out.bulk("index");
        ctx.out.bulk("spec");
        ctx.out.map(1);
        ctx.out.bulk("index");
        ctx.out.integer(spec.first_key);
        ctx.out.bulk("find_keys");
        ctx.out.map(2);
        ctx.out.bulk("type");
        ctx.out.bulk("range");
        ctx.out.bulk("spec");
        ctx.out.map(3);
        ctx.out.bulk("lastkey");
        ctx.out.integer(spec.last_key < 0 ? spec.last_key : spec.last_key - spec.first_key);
        ctx.out.bulk("keystep");
        ctx.out.integer(spec.step);
        ctx.out.bulk("limit");
        ctx.out.integer(0);
        ctx.out.bulk("notes");
        ctx.out.bulk("");
    } else {
        ctx.out.array(0);
    }
    ctx.out.array(spec.subcommands.size());
    for (const auto& sub : spec.subcommands) write_command_info(ctx, *sub);
}

void write_doc_arguments(Context& ctx, const nlohmann::json& arguments) {
    ctx.out.array(arguments.size());
    for (const auto& arg : arguments) {
        std::size_t fields = 2;
        for (const char* key : {"token", "flags", "arguments"}) fields += arg.contains(key) ? 1 : 0;
        ctx.out.map(fields + 1);
        ctx.out.bulk("name");
        ctx.out.bulk(arg.value("name", ""));
        ctx.out.bulk("type");
        ctx.out.bulk(arg.value("type", ""));
        ctx.out.bulk("display_text");
        ctx.out.bulk(arg.value("name", ""));
        if (arg.contains("token")) {
            ctx.out.bulk("token");
            ctx.out.bulk(arg["token"].get<std::string>());
        }
        if (arg.contains("flags")) {
            ctx.out.bulk("flags");
            write_string_set(ctx, arg["flags"]);
        }
        if (arg.contains("arguments")) {
            ctx.out.bulk("arguments");
            write_doc_arguments(ctx, arg["arguments"]);
        }
    }
}

void write_command_docs(Context& ctx, const CommandSpec& spec) {
    const nlohmann::json& doc = spec.doc;
    const bool has_args = doc.contains("arguments") && !doc["arguments"].empty();
    const bool has_subs = !spec.subcommands.empty();
    ctx.out.map(4 + (has_args ? 1 : 0) + (has_subs ? 1 : 0));
    ctx.out.bulk("summary");
    ctx.out.bulk(doc.value("summary", ""));
    ctx.out.bulk("since");
    ctx.out.bulk(doc.value("since", ""));
    ctx.out.bulk("group");
    ctx.out.bulk(doc.value("group", ""));
    ctx.out.bulk("complexity");
    ctx.out.bulk(doc.value("complexity", ""));
    if (has_args) {
        ctx.out.bulk("arguments");
        write_doc_arguments(ctx, doc["arguments"]);
    }
    if (has_subs) {
        ctx.out.bulk("subcommands");
        ctx.out.map(spec.subcommands.size());
        for (const auto& sub : spec.subcommands) {
            ctx.out.bulk(sub->name);
            write_command_docs(ctx, *sub);
        }
    }
}

void cmd_command(Context& ctx, Args) {
    const auto& all = ctx.registry.all();
    ctx.out.array(all.size());
    for (const CommandSpec* spec : all) write_command_info(ctx, *spec);
}

void cmd_command_count(Context& ctx, Args) {
    ctx.out.integer(static_cast<std::int64_t>(ctx.registry.all().size()));
}

// Finds "name" or "parent|sub".
const CommandSpec* lookup_full(const Registry& registry, std::string_view name) {
    const std::size_t bar = name.find('|');
    const CommandSpec* spec = registry.find(name.substr(0, bar));
    if (spec && bar != std::string_view::npos) return spec->find_subcommand(name.substr(bar + 1));
    return spec;
}

void cmd_command_info(Context& ctx, Args argv) {
    if (argv.size() == 2) {
        cmd_command(ctx, argv);
        return;
    }
    ctx.out.array(argv.size() - 2);
    for (std::size_t i = 2; i < argv.size(); ++i) {
        const CommandSpec* spec = lookup_full(ctx.registry, argv[i]);
        if (spec) {
            write_command_info(ctx, *spec);
        } else {
            ctx.out.null_array();
        }
    }
}

void cmd_command_docs(Context& ctx, Args argv) {
    std::vector<const CommandSpec*> specs;
    if (argv.size() == 2) {
        specs = ctx.registry.all();
    } else {
        for (std::size_t i = 2; i < argv.size(); ++i) {
            if (const CommandSpec* spec = lookup_full(ctx.registry, argv[i])) specs.push_back(spec);
        }
    }
    ctx.out.map(specs.size());
    for (const CommandSpec* spec : specs) {
        ctx.out.bulk(spec->name);
        write_command_docs(ctx, *spec);
    }
}

void cmd_command_list(Context& ctx, Args argv) {
    std::string_view pattern, category;
    if (argv.size() == 5 && iequals(argv[2], "FILTERBY")) {
        if (iequals(argv[3], "PATTERN")) {
            pattern = argv[4];
        } else if (iequals(argv[3], "ACLCAT")) {
            category = argv[4];
        } else if (!iequals(argv[3], "MODULE")) {
            ctx.out.error(errors::kSyntax);
            return;
        }
    } else if (argv.size() != 2) {
        ctx.out.error(errors::kSyntax);
        return;
    }
    const bool module_filter = argv.size() == 5 && iequals(argv[3], "MODULE");
    std::vector<std::string_view> names;
    auto consider = [&](const CommandSpec& spec) {
        if (module_filter) return;  // no modules: every command is built in
        if (!pattern.empty() && !glob_match(pattern, spec.name, true)) return;
        if (!category.empty()) {
            bool in = false;
            for (const auto& cat : spec.doc.value("acl_categories", nlohmann::json::array())) {
                const std::string c = cat.get<std::string>();
                in = in || iequals(std::string_view(c).substr(c.empty() ? 0 : 1), category);
            }
            if (!in) return;
        }
        names.push_back(spec.name);
    };
    for (const CommandSpec* spec : ctx.registry.all()) {
        consider(*spec);
        for (const auto& sub : spec->subcommands) consider(*sub);
    }
    ctx.out.array(names.size());
    for (std::string_view name : names) ctx.out.bulk(name);
}

void cmd_command_getkeys(Context& ctx, Args argv) {
    const Args target = argv.subspan(2);
    const CommandSpec* spec = ctx.registry.find(target[0]);
    if (spec == nullptr) {
        ctx.out.error("ERR Invalid command specified");
        return;
    }
    if (!spec->arity_ok(target.size())) {
        ctx.out.error("ERR Invalid number of arguments specified for command");
        return;
    }
    const auto keys = Registry::key_positions(*spec, target.size());
    if (keys.empty()) {
        ctx.out.error("ERR The command has no key arguments");
        return;
    }
    ctx.out.array(keys.size());
    for (std::size_t position : keys) ctx.out.bulk(target[position]);
}

void cmd_command_help(Context& ctx, Args) {
    reply_help(ctx, {"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                     "(no subcommand)", "    Return details about all commands.", "COUNT",
                     "    Return the total number of commands.", "INFO [<command-name> ...]",
                     "    Return details about the given commands, or all.",
                     "DOCS [<command-name> ...]", "    Return documentation of the given commands.",
                     "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
                     "    Return a list of command names.", "GETKEYS <full-command>",
                     "    Return the keys of a full command.", "HELP", "    Print this help."});
}

// ---- MODULE ----

// Tools such as RedisInsight look for RedisBloom ("bf") in MODULE LIST before
// they offer Bloom commands; bloomery has them built in, at the RedisBloom
// version whose BF.* behaviour it follows.
void cmd_module_list(Context& ctx, Args) {
    ctx.out.array(1);
    ctx.out.map(4);
    ctx.out.bulk("name");
    ctx.out.bulk("bf");
    ctx.out.bulk("ver");
    ctx.out.integer(20612);
    ctx.out.bulk("path");
    ctx.out.bulk("built-in");
    ctx.out.bulk("args");
    ctx.out.array(0);
}

void cmd_module_help(Context& ctx, Args) {
    reply_help(ctx, {"MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "LIST",
                     "    Return a list of loaded modules.", "HELP", "    Print this help."});
}

// ---- persistence ----

// Persistence errors come either worded for the client ("ERR Background save
// already in progress") or as a plain reason ("cannot write ..."); prefix the latter.
void reply_persistence_error(Context& ctx, const std::string& error) {
    ctx.out.error(error.rfind("ERR ", 0) == 0 ? error : "ERR " + error);
}

void cmd_save(Context& ctx, Args) {
    std::string error;
    if (ctx.server.save(error)) {
        ctx.out.ok();
    } else {
        reply_persistence_error(ctx, error);
    }
}

void cmd_bgsave(Context& ctx, Args argv) {
    if (argv.size() > 2 || (argv.size() == 2 && !iequals(argv[1], "SCHEDULE"))) {
        ctx.out.error(errors::kSyntax);
        return;
    }
    std::string error;
    if (ctx.server.bgsave(error)) {
        ctx.out.simple("Background saving started");
    } else {
        reply_persistence_error(ctx, error);
    }
}

void cmd_lastsave(Context& ctx, Args) {
    ctx.out.integer(ctx.server.persistence().last_save_time);
}

void cmd_shutdown(Context& ctx, Args argv) {
    ShutdownMode mode = ShutdownMode::default_save;
    for (std::size_t i = 1; i < argv.size(); ++i) {
        if (iequals(argv[i], "NOSAVE")) {
            mode = ShutdownMode::nosave;
        } else if (iequals(argv[i], "SAVE")) {
            mode = ShutdownMode::save;
        } else if (iequals(argv[i], "NOW") || iequals(argv[i], "FORCE")) {
            // Nothing to wait for (no replicas), and FORCE is implied by NOSAVE.
        } else {
            ctx.out.error(errors::kSyntax);
            return;
        }
    }
    std::string error;
    if (!ctx.server.shutdown(mode, error)) {
        ctx.out.error("ERR Errors trying to SHUTDOWN. Check logs.");
        return;
    }
    // Like Redis, a successful SHUTDOWN closes the connection without a reply.
    ctx.client.close_after_reply = true;
}

}  // namespace

void register_server_commands(Registry& registry) {
    registry.register_handler("ping", cmd_ping);
    registry.register_handler("echo", cmd_echo);
    registry.register_handler("quit", cmd_quit);
    registry.register_handler("hello", cmd_hello);
    registry.register_handler("select", cmd_select);
    registry.register_handler("time", cmd_time);
    registry.register_handler("info", cmd_info);
    registry.register_handler("client|id", cmd_client_id);
    registry.register_handler("client|setname", cmd_client_setname);
    registry.register_handler("client|getname", cmd_client_getname);
    registry.register_handler("client|list", cmd_client_list);
    registry.register_handler("client|info", cmd_client_info);
    registry.register_handler("client|setinfo", cmd_client_setinfo);
    registry.register_handler("client|kill", cmd_client_kill);
    registry.register_handler("client|help", cmd_client_help);
    registry.register_handler("config|get", cmd_config_get);
    registry.register_handler("config|set", cmd_config_set);
    registry.register_handler("config|resetstat", cmd_config_resetstat);
    registry.register_handler("config|help", cmd_config_help);
    registry.register_handler("command", cmd_command);
    registry.register_handler("command|count", cmd_command_count);
    registry.register_handler("command|info", cmd_command_info);
    registry.register_handler("command|docs", cmd_command_docs);
    registry.register_handler("command|list", cmd_command_list);
    registry.register_handler("command|getkeys", cmd_command_getkeys);
    registry.register_handler("command|help", cmd_command_help);
    registry.register_handler("module|list", cmd_module_list);
    registry.register_handler("module|help", cmd_module_help);
    registry.register_handler("save", cmd_save);
    registry.register_handler("bgsave", cmd_bgsave);
    registry.register_handler("lastsave", cmd_lastsave);
    registry.register_handler("shutdown", cmd_shutdown);
}

}  // namespace bloomery::command
