// CLIENT and its subcommands, and the CLIENT LIST line format.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/printable.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {

std::string format_client_line(const ClientState& client, std::int64_t now_ms) {
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
    const std::int64_t queued = client.transaction.listed_commands.load(std::memory_order_relaxed);
    char flags[6];
    std::size_t flag_count = 0;
    if (client.is_replica.load(std::memory_order_relaxed)) flags[flag_count++] = 'S';
    if (client.blocked.load(std::memory_order_relaxed)) flags[flag_count++] = 'b';
    if (client.no_evict.load(std::memory_order_relaxed)) flags[flag_count++] = 'e';
    const std::size_t channels = client.subscriptions.channel_count.load(std::memory_order_relaxed);
    const std::size_t patterns = client.subscriptions.pattern_count.load(std::memory_order_relaxed);
    if (channels + patterns != 0) flags[flag_count++] = 'P';  // subscribed
    if (queued >= 0) flags[flag_count++] = 'x';               // inside MULTI
    if (flag_count == 0) flags[flag_count++] = 'N';
    field("flags", std::string_view(flags, flag_count));
    field("db", "0");
    field("sub", std::to_string(channels));
    field("psub", std::to_string(patterns));
    field("ssub", "0");
    field("multi", std::to_string(queued));
    const std::size_t query_used = client.query_buffer_used.load(std::memory_order_relaxed);
    const std::size_t query_capacity = client.query_buffer_capacity.load(std::memory_order_relaxed);
    const std::size_t output_used = client.output_buffer_used.load(std::memory_order_relaxed);
    const std::size_t output_capacity =
        client.output_buffer_capacity.load(std::memory_order_relaxed);
    field("qbuf", std::to_string(query_used));
    field("qbuf-free",
          std::to_string(query_capacity > query_used ? query_capacity - query_used : 0));
    field("argv-mem", "0");
    field("multi-mem",
          std::to_string(client.transaction.listed_bytes.load(std::memory_order_relaxed)));
    field("obl", std::to_string(output_used));
    field("oll", "0");
    field("omem", std::to_string(output_capacity));
    // What maxmemory-clients weighs: buffers, arguments, transaction, subscriptions.
    field("tot-mem", std::to_string(client.memory_bytes.load(std::memory_order_relaxed)));
    field("events", "r");
    field("cmd", last_command ? last_command : "NULL");
    const AclUser* user = client.user.load(std::memory_order_relaxed);
    field("user", user != nullptr ? std::string_view(user->name()) : kDefaultUserName);
    field("redir", "-1");
    field("resp", std::to_string(client.protocol.load(std::memory_order_relaxed)));
    field("lib-name", lib_name);
    field("lib-ver", lib_version);
    return line;
}
namespace {

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

void cmd_client_info(Context& ctx, Args) {
    ctx.out.verbatim(format_client_line(ctx.client, store::now_ms()) + "\n");
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
        core::append_printable(message, argv[2]);
        ctx.out.error(message + "'");
        return;
    }
    ctx.out.ok();
}

// The value of `key` in one CLIENT LIST line ("id=7 addr=... user=..."),
// empty if the line has no such field. Values hold no spaces (names are
// checked when set), so fields split on spaces.
std::string_view client_field(std::string_view line, std::string_view key) {
    std::size_t start = 0;
    while (start < line.size()) {
        std::size_t end = line.find(' ', start);
        if (end == std::string_view::npos) end = line.size();
        const std::string_view field = line.substr(start, end - start);
        if (field.size() > key.size() && field.substr(0, key.size()) == key &&
            field[key.size()] == '=') {
            return field.substr(key.size() + 1);
        }
        start = end + 1;
    }
    return {};
}

// Redis's client types as CLIENT KILL TYPE names them. Every bloomery
// client is normal but a replica's feed (flag S); this server's own link to
// its primary is not a client, so no client is of type master or pubsub.
enum class ClientType { any, normal, replica, master, pubsub };

bool parse_client_type(std::string_view name, ClientType& type) {
    if (iequals(name, "normal")) {
        type = ClientType::normal;
    } else if (iequals(name, "replica") || iequals(name, "slave")) {
        type = ClientType::replica;
    } else if (iequals(name, "master")) {
        type = ClientType::master;
    } else if (iequals(name, "pubsub")) {
        type = ClientType::pubsub;
    } else {
        return false;
    }
    return true;
}

// Redis's getClientType, from a CLIENT LIST line's flags: a replica's feed,
// else a subscribed client, else normal. (No connection here is a primary's
// link: a replica's own link to its primary is not a client of it.)
ClientType client_type_of(std::string_view flags) {
    if (flags.find('S') != std::string_view::npos) return ClientType::replica;
    if (flags.find('P') != std::string_view::npos) return ClientType::pubsub;
    return ClientType::normal;
}

// What CLIENT KILL's filters ask for; a client is killed when it matches
// every filter given (Redis ANDs them).
struct KillFilter {
    std::int64_t id = 0;  // 0: any
    std::optional<std::string_view> address;
    std::optional<std::string_view> local_address;
    std::optional<std::string_view> user;
    ClientType type = ClientType::any;
    // Redis's new form skips the caller unless SKIPME no; the old form
    // (CLIENT KILL ip:port) may kill it.
    bool skip_me = true;
    std::int64_t max_age = 0;  // seconds; 0: any age (MAXAGE kills only older clients)

    bool matches(std::string_view line) const {
        if (address && client_field(line, "addr") != *address) return false;
        if (local_address && client_field(line, "laddr") != *local_address) return false;
        if (user && client_field(line, "user") != *user) return false;
        if (type != ClientType::any && type != client_type_of(client_field(line, "flags"))) {
            return false;
        }
        if (max_age != 0) {
            std::int64_t age = 0;
            if (!parse_int64(client_field(line, "age"), age) || age <= max_age) return false;
        }
        return true;
    }
};

void reply_with_name(Context& ctx, std::string_view prefix, std::string_view name) {
    std::string message(prefix);
    core::append_printable(message, name);
    message += "'";
    ctx.out.error(message);
}

// Parses the new form's "FILTER value" pairs; false once it has answered
// an error.
bool parse_kill_filters(Context& ctx, Args argv, KillFilter& filter) {
    for (std::size_t i = 2; i + 1 < argv.size(); i += 2) {
        const std::string_view value = argv[i + 1];
        if (iequals(argv[i], "ID")) {
            if (!parse_int64(value, filter.id) || filter.id < 1) {
                ctx.out.error(errors::kClientIdNotPositive);
                return false;
            }
        } else if (iequals(argv[i], "TYPE")) {
            if (!parse_client_type(value, filter.type)) {
                reply_with_name(ctx, errors::kUnknownClientType, value);
                return false;
            }
        } else if (iequals(argv[i], "ADDR")) {
            filter.address = value;
        } else if (iequals(argv[i], "LADDR")) {
            filter.local_address = value;
        } else if (iequals(argv[i], "USER")) {
            if (ctx.registry.acl().find(value) == nullptr) {
                reply_with_name(ctx, errors::kNoSuchUser, value);
                return false;
            }
            filter.user = value;
        } else if (iequals(argv[i], "MAXAGE")) {
            if (!parse_int64(value, filter.max_age) || filter.max_age < 0) {
                ctx.out.error(errors::kNotInteger);
                return false;
            }
        } else if (iequals(argv[i], "SKIPME")) {
            if (iequals(value, "yes")) {
                filter.skip_me = true;
            } else if (iequals(value, "no")) {
                filter.skip_me = false;
            } else {
                ctx.out.error(errors::kSyntax);
                return false;
            }
        } else {
            ctx.out.error(errors::kSyntax);
            return false;
        }
    }
    return true;
}

// CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...].
void cmd_client_list(With<uses::Clients>& ctx, Args argv) {
    if (argv.size() > 2) {
        if (iequals(argv[2], "TYPE") && argv.size() == 4) {
            ClientType type = ClientType::any;
            if (!parse_client_type(argv[3], type)) {
                reply_with_name(ctx, errors::kUnknownClientType, argv[3]);
                return;
            }
            const std::string list = ctx.server.clients.client_list({});
            std::string kept;
            for (std::size_t start = 0; start < list.size();) {
                std::size_t end = list.find('\n', start);
                if (end == std::string::npos) end = list.size();
                const std::string_view line = std::string_view(list).substr(start, end - start);
                start = end + 1;
                if (client_type_of(client_field(line, "flags")) != type) continue;
                kept.append(line);
                kept += '\n';
            }
            ctx.out.verbatim(kept);
            return;
        }
        if (iequals(argv[2], "ID") && argv.size() >= 4) {
            std::vector<std::int64_t> ids(argv.size() - 3);
            for (std::size_t i = 3; i < argv.size(); ++i) {
                if (!parse_int64(argv[i], ids[i - 3])) {
                    ctx.out.error("ERR Invalid client ID");
                    return;
                }
            }
            ctx.out.verbatim(ctx.server.clients.client_list(ids));
            return;
        }
        ctx.out.error(errors::kSyntax);
        return;
    }
    ctx.out.verbatim(ctx.server.clients.client_list({}));
}

// CLIENT KILL ip:port (old form: +OK, or an error if none matched) and
// CLIENT KILL <filter> <value> ... (new form: how many were killed), as Redis
// 7.0. The filters are matched against the clients' CLIENT LIST lines, the
// fields Redis matches. The caller, when it is killed, is closed after this
// reply.
void cmd_client_kill(With<uses::Clients>& ctx, Args argv) {
    const bool old_form = argv.size() == 3;
    KillFilter filter;
    if (old_form) {
        filter.address = argv[2];
        filter.skip_me = false;
    } else if (argv.size() < 4 || argv.size() % 2 != 0) {
        ctx.out.error(errors::kSyntax);
        return;
    } else if (!parse_kill_filters(ctx, argv, filter)) {
        return;
    }
    std::vector<std::int64_t> only;
    if (filter.id != 0) only.push_back(filter.id);
    const std::string list = ctx.server.clients.client_list(only);
    std::int64_t killed = 0;
    bool kill_me = false;
    for (std::size_t start = 0; start < list.size();) {
        std::size_t end = list.find('\n', start);
        if (end == std::string::npos) end = list.size();
        const std::string_view line = std::string_view(list).substr(start, end - start);
        start = end + 1;
        std::int64_t id = 0;
        if (!parse_int64(client_field(line, "id"), id)) continue;
        if ((filter.id != 0 && id != filter.id) || !filter.matches(line)) continue;
        if (id == ctx.client.id) {
            if (filter.skip_me) continue;
            kill_me = true;
            ++killed;
        } else if (ctx.server.clients.kill_client(id)) {
            ++killed;
        }
    }
    if (!old_form) {
        ctx.out.integer(killed);
    } else if (killed == 0) {
        ctx.out.error(errors::kNoSuchClient);
    } else {
        ctx.out.ok();
    }
    if (kill_me) ctx.client.close_after_reply = true;
}

// CLIENT NO-EVICT ON|OFF (Redis 7): whether maxmemory-clients may close
// this client.
void cmd_client_no_evict(Context& ctx, Args argv) {
    if (iequals(argv[2], "ON")) {
        ctx.client.no_evict.store(true, std::memory_order_relaxed);
    } else if (iequals(argv[2], "OFF")) {
        ctx.client.no_evict.store(false, std::memory_order_relaxed);
    } else {
        ctx.out.error(errors::kSyntax);
        return;
    }
    ctx.out.ok();
}

void cmd_client_help(Context& ctx, Args) {
    reply_help(ctx, {"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                     "ID",
                     "    Return the ID of the current connection.",
                     "SETNAME <name>",
                     "    Assign the name <name> to the current connection.",
                     "GETNAME",
                     "    Return the name of the current connection.",
                     "LIST [TYPE normal] [ID id ...]",
                     "    Return information about client connections.",
                     "INFO",
                     "    Return information about the current client connection.",
                     "SETINFO <LIB-NAME|LIB-VER> <value>",
                     "    Record the client library's name or version.",
                     "KILL <ip:port>",
                     "    Kill the connection at <ip:port>, this one too.",
                     "KILL <option> <value> [<option> <value> [...]]",
                     "    Kill connections matching every option: ID <client-id>, ADDR <ip:port>,",
                     "    LADDR <ip:port>, TYPE (NORMAL|MASTER|REPLICA|PUBSUB), USER <username>,",
                     "    SKIPME (YES|NO) (default YES: not this connection), MAXAGE <seconds>",
                     "    (only connections older than that).",
                     "NO-EVICT (ON|OFF)",
                     "    Protect current client connection from eviction (maxmemory-clients).",
                     "HELP",
                     "    Print this help."});
}
}  // namespace

void register_client_commands(Registry& registry) {
    registry.register_handler<cmd_client_id>("client|id");
    registry.register_handler<cmd_client_setname>("client|setname");
    registry.register_handler<cmd_client_getname>("client|getname");
    registry.register_handler<cmd_client_list>("client|list");
    registry.register_handler<cmd_client_info>("client|info");
    registry.register_handler<cmd_client_setinfo>("client|setinfo");
    registry.register_handler<cmd_client_kill>("client|kill");
    registry.register_handler<cmd_client_no_evict>("client|no-evict");
    registry.register_handler<cmd_client_help>("client|help");
}

}  // namespace bloomery::command
