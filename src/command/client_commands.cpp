// CLIENT and its subcommands, and the CLIENT LIST line format.

#include <string>
#include <vector>

#include "args.hpp"
#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
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
    field("flags", client.is_replica.load(std::memory_order_relaxed) ? "S"
                   : client.blocked.load(std::memory_order_relaxed)  ? "b"
                                                                     : "N");
    field("db", "0");
    field("sub", "0");
    field("psub", "0");
    field("ssub", "0");
    field("multi", "-1");
    const std::size_t query_used = client.query_buffer_used.load(std::memory_order_relaxed);
    const std::size_t query_capacity = client.query_buffer_capacity.load(std::memory_order_relaxed);
    const std::size_t output_used = client.output_buffer_used.load(std::memory_order_relaxed);
    const std::size_t output_capacity =
        client.output_buffer_capacity.load(std::memory_order_relaxed);
    field("qbuf", std::to_string(query_used));
    field("qbuf-free",
          std::to_string(query_capacity > query_used ? query_capacity - query_used : 0));
    field("argv-mem", "0");
    field("multi-mem", "0");
    field("obl", std::to_string(output_used));
    field("oll", "0");
    field("omem", std::to_string(output_capacity));
    field("tot-mem", std::to_string(query_capacity + output_capacity));
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
}  // namespace

void register_client_commands(Registry& registry) {
    registry.register_handler("client|id", cmd_client_id);
    registry.register_handler("client|setname", cmd_client_setname);
    registry.register_handler("client|getname", cmd_client_getname);
    registry.register_handler("client|list", cmd_client_list);
    registry.register_handler("client|info", cmd_client_info);
    registry.register_handler("client|setinfo", cmd_client_setinfo);
    registry.register_handler("client|kill", cmd_client_kill);
    registry.register_handler("client|help", cmd_client_help);
}

}  // namespace bloomery::command
