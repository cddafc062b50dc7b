// Connection commands: PING, ECHO, QUIT, RESET, HELLO, SELECT, TIME.

#include <chrono>
#include <string>

#include "args.hpp"
#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/pubsub.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/printable.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

void cmd_ping(Context& ctx, Args argv) {
    if (argv.size() > 2) {
        reply_wrong_arity(ctx, "ping");
    } else if (ctx.client.subscriptions.count() != 0 && ctx.out.protocol() == 2) {
        // A subscribed RESP2 client reads arrays: ["pong", the argument or ""].
        ctx.out.array(2);
        ctx.out.bulk("pong");
        ctx.out.bulk(argv.size() == 2 ? argv[1] : std::string_view());
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
// space-separated), as in Redis. AUTH is checked after the options parse and
// before anything changes; an unauthenticated client may only HELLO with AUTH.
void cmd_hello(With<uses::Gate>& ctx, Args argv) {
    std::size_t i = 1;
    std::string_view new_name;
    bool set_name = false;
    int version = ctx.out.protocol();
    if (argv.size() >= 2) {
        std::int64_t parsed_version;
        if (!parse_int64(argv[1], parsed_version)) {
            ctx.out.error("ERR Protocol version is not an integer or out of range");
            return;
        }
        if (parsed_version != 2 && parsed_version != 3) {
            ctx.out.error(errors::kProtocolVersion);
            return;
        }
        version = static_cast<int>(parsed_version);
        i = 2;
        std::string_view username, password;
        bool auth = false;
        for (; i < argv.size(); ++i) {
            if (iequals(argv[i], "AUTH") && i + 2 < argv.size()) {
                username = argv[i + 1];
                password = argv[i + 2];
                auth = true;
                i += 2;
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
                core::append_printable(message, argv[i]);
                message += "'";
                ctx.out.error(message);
                return;
            }
        }
        if (auth && !authenticate_client(ctx, username, password)) return;
    }
    if (!ctx.registry.acl().is_authenticated(ctx.client)) {
        ctx.out.error(errors::kHelloNoAuth);
        return;
    }
    if (set_name) ctx.client.set_name(new_name);
    ctx.client.protocol.store(version, std::memory_order_relaxed);
    ctx.out.set_protocol(version);
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
    ctx.out.bulk(ctx.config.cluster_enabled ? "cluster" : "standalone");
    ctx.out.bulk("role");
    ctx.out.bulk((ctx.server.gate.replication_flags.load(std::memory_order_relaxed) &
                  command::kReplicationReplica) != 0
                     ? "replica"
                     : "master");
    ctx.out.bulk("modules");
    ctx.out.array(1);
    write_module_entry(ctx);
}

// RESET: the connection as it was when it was accepted, as Redis's RESET:
// no transaction or watched keys, no subscriptions, protocol 2, no name, the
// default user (authenticated only if it needs no password), READWRITE.
void cmd_reset(With<uses::PubSub>& ctx, Args) {
    ctx.client.transaction.discard();
    SubscriptionState& subscriptions = ctx.client.subscriptions;
    for (const std::string& channel : subscriptions.channels) {
        ctx.server.pubsub.unsubscribe(channel, ctx.client.id);
    }
    for (const std::string& pattern : subscriptions.patterns) {
        ctx.server.pubsub.punsubscribe(pattern, ctx.client.id);
    }
    subscriptions.channels.clear();
    subscriptions.patterns.clear();
    subscriptions.publish();
    ctx.client.set_name("");
    ctx.client.protocol.store(2, std::memory_order_relaxed);
    ctx.out.set_protocol(2);
    ctx.client.user.store(nullptr, std::memory_order_relaxed);
    ctx.client.authenticated = false;
    ctx.client.cluster_readonly = false;
    ctx.client.cluster_asking = false;
    ctx.out.simple("RESET");
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
    registry.register_handler<cmd_ping>("ping");
    registry.register_handler<cmd_echo>("echo");
    registry.register_handler<cmd_quit>("quit");
    registry.register_handler<cmd_reset>("reset");
    registry.register_handler<cmd_hello>("hello");
    registry.register_handler<cmd_select>("select");
    registry.register_handler<cmd_time>("time");
}

}  // namespace bloomery::command
