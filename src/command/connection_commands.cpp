// Connection commands: PING, ECHO, QUIT, HELLO, SELECT, TIME.

#include <chrono>
#include <string>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
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

}  // namespace

void register_connection_commands(Registry& registry) {
    registry.register_handler("ping", cmd_ping);
    registry.register_handler("echo", cmd_echo);
    registry.register_handler("quit", cmd_quit);
    registry.register_handler("hello", cmd_hello);
    registry.register_handler("select", cmd_select);
    registry.register_handler("time", cmd_time);
}

}  // namespace bloomery::command
