// Connection commands: PING, ECHO, QUIT, RESET, HELLO, SELECT, TIME.

#include <chrono>
#include <optional>
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
    ArgCursor args(argv);
    if (args.remaining() > 1) return reply_wrong_arity(ctx, "ping");
    const std::string_view message = args.next();  // "" when there is none
    if (ctx.client.subscriptions.count() != 0 && ctx.out.protocol() == 2) {
        // A subscribed RESP2 client reads arrays: ["pong", the argument or ""].
        ctx.out.array(2);
        ctx.out.bulk("pong");
        ctx.out.bulk(message);
    } else if (argv.size() == 2) {
        ctx.out.bulk(message);
    } else {
        ctx.out.simple("PONG");
    }
}

void cmd_echo(Context& ctx, Args argv) {
    ctx.out.bulk(ArgCursor(argv).next());
}

void cmd_quit(Context& ctx, Args) {
    ctx.out.ok();
    ctx.client.close_after_reply = true;
}

void cmd_select(Context& ctx, Args argv) {
    ArgCursor args(argv);
    const core::Result<std::int64_t> index = args.take_int(errors::kNotInteger);
    if (!index) return ctx.out.error(index.error());
    if (*index != 0) return ctx.out.error(errors::kDbIndexOutOfRange);
    ctx.out.ok();
}

// What HELLO asks for: HELLO [protover [AUTH username password] [SETNAME
// name]]. Without a version, the protocol stays.
struct HelloRequest {
    struct Credentials {
        std::string_view username;
        std::string_view password;
    };
    int protocol;
    std::optional<Credentials> auth;
    std::optional<std::string_view> name;
};

// Names may not contain spaces or control characters (CLIENT LIST is
// space-separated), as in Redis.
core::Result<HelloRequest> parse_hello(Args argv, int protocol) {
    HelloRequest request{protocol, std::nullopt, std::nullopt};
    ArgCursor args(argv);
    if (!args.has_next()) return request;
    const core::Result<std::int64_t> version = args.take_int(errors::kProtocolNotInteger);
    if (!version) return version.failure();
    if (*version != 2 && *version != 3) return core::Error{std::string(errors::kProtocolVersion)};
    request.protocol = static_cast<int>(*version);
    while (args.has_next()) {
        if (args.remaining() >= 3 && args.eat("AUTH")) {
            const std::string_view username = args.next();
            request.auth = HelloRequest::Credentials{username, args.next()};
        } else if (args.remaining() >= 2 && args.eat("SETNAME")) {
            request.name = args.next();
            if (!valid_client_name(*request.name)) {
                return core::Error{std::string(errors::kClientNameInvalid)};
            }
        } else {
            std::string message(errors::kHelloSyntax);
            core::append_printable(message, args.next());
            return core::Error{message + "'"};
        }
    }
    return request;
}

// AUTH is checked after the options parse and before anything changes; an
// unauthenticated client may only HELLO with AUTH.
void cmd_hello(With<uses::Gate>& ctx, Args argv) {
    const core::Result<HelloRequest> request = parse_hello(argv, ctx.out.protocol());
    if (!request) return ctx.out.error(request.error());
    const Acl& acl = ctx.registry.acl();
    if (request->auth) {
        const core::Status auth =
            authenticate_client(acl, ctx.client, request->auth->username, request->auth->password);
        if (!auth) return ctx.out.error(auth.error());
    }
    if (!acl.is_authenticated(ctx.client)) return ctx.out.error(errors::kHelloNoAuth);
    if (request->name) ctx.client.set_name(*request->name);
    ctx.client.protocol.store(request->protocol, std::memory_order_relaxed);
    ctx.out.set_protocol(request->protocol);
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
