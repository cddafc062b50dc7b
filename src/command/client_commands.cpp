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
    const std::string_view name = ArgCursor(argv, 2).next();
    if (!valid_client_name(name)) return ctx.out.error(errors::kClientNameInvalid);
    ctx.client.set_name(name);
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

// An error that names what it was given: `prefix`, the name (printable,
// bounded), "'".
std::string error_naming(std::string_view prefix, std::string_view name) {
    std::string message(prefix);
    core::append_printable(message, name);
    message += "'";
    return message;
}

// CLIENT SETINFO LIB-NAME|LIB-VER value: the value is checked first, as
// Redis does.
void cmd_client_setinfo(Context& ctx, Args argv) {
    ArgCursor args(argv, 2);
    const std::string_view attribute = args.next();
    const std::string_view value = args.next();
    if (!valid_client_name(value)) return ctx.out.error(errors::kClientLibraryInvalid);
    if (iequals(attribute, "LIB-NAME")) {
        ctx.client.set_library(value, {});
    } else if (iequals(attribute, "LIB-VER")) {
        ctx.client.set_library({}, value);
    } else {
        return ctx.out.error(error_naming(errors::kUnrecognizedOption, attribute));
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

// Calls `visit` with each line of a CLIENT LIST text, without its '\n'.
template <class Visit>
void for_each_client_line(std::string_view list, Visit&& visit) {
    for (std::size_t start = 0; start < list.size();) {
        std::size_t end = list.find('\n', start);
        if (end == std::string_view::npos) end = list.size();
        visit(list.substr(start, end - start));
        start = end + 1;
    }
}

// Redis's client types as CLIENT KILL TYPE names them. Every bloomery
// client is normal but a replica's feed (flag S); this server's own link to
// its primary is not a client, so no client is of type master or pubsub.
enum class ClientType { any, normal, replica, master, pubsub };

std::optional<ClientType> parse_client_type(std::string_view name) {
    if (iequals(name, "normal")) return ClientType::normal;
    if (iequals(name, "replica") || iequals(name, "slave")) return ClientType::replica;
    if (iequals(name, "master")) return ClientType::master;
    if (iequals(name, "pubsub")) return ClientType::pubsub;
    return std::nullopt;
}

// Redis's getClientType, from a CLIENT LIST line's flags: a replica's feed,
// else a subscribed client, else normal. (No connection here is a primary's
// link: a replica's own link to its primary is not a client of it.)
ClientType client_type_of(std::string_view flags) {
    if (flags.find('S') != std::string_view::npos) return ClientType::replica;
    if (flags.find('P') != std::string_view::npos) return ClientType::pubsub;
    return ClientType::normal;
}

// Who CLIENT KILL may close besides the clients it names: Redis's new form
// skips the caller unless SKIPME no; the old form (CLIENT KILL ip:port) may
// close it.
enum class Caller { skipped, included };

// What CLIENT KILL's filters ask for; a client is killed when it matches
// every filter given (Redis ANDs them).
struct KillFilter {
    std::int64_t id = 0;  // 0: any
    std::optional<std::string_view> address;
    std::optional<std::string_view> local_address;
    std::optional<std::string_view> user;
    ClientType type = ClientType::any;
    Caller caller = Caller::skipped;
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

// One "FILTER value" pair of the new form into `filter`.
core::Status parse_kill_filter(const Acl& acl, ArgCursor& args, KillFilter& filter) {
    if (args.eat("ID")) {
        const std::optional<std::int64_t> id = args.next_int();
        if (!id || *id < 1) return core::Error{std::string(errors::kClientIdNotPositive)};
        filter.id = *id;
    } else if (args.eat("TYPE")) {
        const std::string_view name = args.next();
        const std::optional<ClientType> type = parse_client_type(name);
        if (!type) return core::Error{error_naming(errors::kUnknownClientType, name)};
        filter.type = *type;
    } else if (args.eat("ADDR")) {
        filter.address = args.next();
    } else if (args.eat("LADDR")) {
        filter.local_address = args.next();
    } else if (args.eat("USER")) {
        const std::string_view name = args.next();
        if (acl.find(name) == nullptr) return core::Error{error_naming(errors::kNoSuchUser, name)};
        filter.user = name;
    } else if (args.eat("MAXAGE")) {
        const std::optional<std::int64_t> age = args.next_int();
        if (!age || *age < 0) return core::Error{std::string(errors::kNotInteger)};
        filter.max_age = *age;
    } else if (args.eat("SKIPME")) {
        const std::optional<std::size_t> skip = args.eat_one_of({"yes", "no"});
        if (!skip) return core::Error{std::string(errors::kSyntax)};
        filter.caller = *skip == 0 ? Caller::skipped : Caller::included;
    } else {
        return core::Error{std::string(errors::kSyntax)};
    }
    return {};
}

// CLIENT KILL's arguments: ip:port (the old form), or "FILTER value" pairs.
core::Result<KillFilter> parse_kill(const Acl& acl, Args argv) {
    ArgCursor args(argv, 2);
    KillFilter filter;
    if (args.remaining() == 1) {
        filter.address = args.next();
        filter.caller = Caller::included;
        return filter;
    }
    if (args.remaining() < 2 || args.remaining() % 2 != 0) {
        return core::Error{std::string(errors::kSyntax)};
    }
    while (args.has_next()) {
        if (core::Status parsed = parse_kill_filter(acl, args, filter); !parsed) {
            return parsed.failure();
        }
    }
    return filter;
}

// CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...].
void cmd_client_list(With<uses::Clients>& ctx, Args argv) {
    ArgCursor args(argv, 2);
    if (!args.has_next()) return ctx.out.verbatim(ctx.server.clients.client_list({}));
    if (args.remaining() == 2 && args.eat("TYPE")) {
        const std::string_view name = args.next();
        const std::optional<ClientType> type = parse_client_type(name);
        if (!type) return ctx.out.error(error_naming(errors::kUnknownClientType, name));
        const std::string list = ctx.server.clients.client_list({});
        std::string kept;
        for_each_client_line(list, [&](std::string_view line) {
            if (client_type_of(client_field(line, "flags")) != *type) return;
            kept.append(line);
            kept += '\n';
        });
        return ctx.out.verbatim(kept);
    }
    if (args.remaining() >= 2 && args.eat("ID")) {
        std::vector<std::int64_t> ids;
        ids.reserve(args.remaining());
        while (args.has_next()) {
            const std::optional<std::int64_t> id = args.next_int();
            if (!id) return ctx.out.error(errors::kInvalidClientId);
            ids.push_back(*id);
        }
        return ctx.out.verbatim(ctx.server.clients.client_list(ids));
    }
    ctx.out.error(errors::kSyntax);
}

// CLIENT KILL ip:port (old form: +OK, or an error if none matched) and
// CLIENT KILL <filter> <value> ... (new form: how many were killed), as Redis
// 7.0. The filters are matched against the clients' CLIENT LIST lines, the
// fields Redis matches. The caller, when it is killed, is closed after this
// reply.
void cmd_client_kill(With<uses::Clients>& ctx, Args argv) {
    const bool old_form = argv.size() == 3;
    const core::Result<KillFilter> parsed = parse_kill(ctx.registry.acl(), argv);
    if (!parsed) return ctx.out.error(parsed.error());
    const KillFilter& filter = *parsed;
    std::vector<std::int64_t> only;
    if (filter.id != 0) only.push_back(filter.id);
    const std::string list = ctx.server.clients.client_list(only);
    std::int64_t killed = 0;
    bool kill_me = false;
    for_each_client_line(list, [&](std::string_view line) {
        std::int64_t id = 0;
        if (!parse_int64(client_field(line, "id"), id)) return;
        if ((filter.id != 0 && id != filter.id) || !filter.matches(line)) return;
        if (id == ctx.client.id) {
            if (filter.caller == Caller::skipped) return;
            kill_me = true;
            ++killed;
        } else if (ctx.server.clients.kill_client(id)) {
            ++killed;
        }
    });
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
    ArgCursor args(argv, 2);
    const std::optional<std::size_t> setting = args.eat_one_of({"ON", "OFF"});
    if (!setting) return ctx.out.error(errors::kSyntax);
    ctx.client.no_evict.store(*setting == 0, std::memory_order_relaxed);
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
