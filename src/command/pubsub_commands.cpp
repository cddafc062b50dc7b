// Pub/Sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH and
// PUBSUB CHANNELS|NUMSUB|NUMPAT|HELP, with Redis 7's replies: each
// (un)subscription is confirmed by a message (a push in RESP3, an array in
// RESP2) holding the client's subscription count; in RESP2 a subscribed
// client may only (un)subscribe, PING, QUIT and RESET (dispatch checks it).
//
// Channels are checked against the user's ACL channel rules (&pattern);
// PSUBSCRIBE's pattern must be one of the user's own, as in Redis 7.
// Messages are delivered by command/pubsub.hpp's registry; PUBLISH reaches
// the subscribers of this server (it is not sent to replicas).

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "args.hpp"
#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/pubsub.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/ascii.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {

std::size_t SubscriptionState::bytes() const {
    std::size_t total = (channels.bucket_count() + patterns.bucket_count()) * sizeof(void*);
    for (const std::string& name : channels) total += 32 + name.capacity();
    for (const std::string& name : patterns) total += 32 + name.capacity();
    return total;
}

void SubscriptionState::publish() {
    channel_count.store(channels.size(), std::memory_order_relaxed);
    pattern_count.store(patterns.size(), std::memory_order_relaxed);
    charge.set(count() == 0 ? 0 : bytes());
}

namespace {

// The Pub/Sub commands use the server's channels and nothing else of it.
using PubSubContext = With<uses::PubSub>;

// One confirmation: [kind, name (null when there was none), count].
void confirm(Context& ctx, std::string_view kind, std::optional<std::string_view> name) {
    ctx.out.push(3);
    ctx.out.bulk(kind);
    if (name) {
        ctx.out.bulk(*name);
    } else {
        ctx.out.null();
    }
    ctx.out.integer(static_cast<std::int64_t>(ctx.client.subscriptions.count()));
}

// Every name allowed for the user (all or nothing, as Redis checks a
// command's channels before it runs); NOPERM otherwise.
core::Status channels_allowed(const Context& ctx, Args names, ChannelKind kind) {
    const AclUser& user = ctx.registry.acl().user_of(ctx.client);
    if (user.all_channels()) return {};
    for (std::string_view name : names) {
        if (!user.may_access_channel(name, kind)) {
            return core::Error{std::string(errors::kNoPermChannel)};
        }
    }
    return {};
}

// The names would keep what the client holds within client-query-buffer-limit.
core::Status within_bounds(const Context& ctx, Args names) {
    std::size_t adding = 0;
    for (std::string_view name : names) adding += 32 + name.size();
    if (ctx.client.subscriptions.bytes() + adding > ctx.config.client_query_buffer_limit) {
        return core::Error{std::string(errors::kSubscriptionsTooLarge)};
    }
    return {};
}

// The names a client holds of one kind, and what its (un)subscriptions are
// confirmed as.
std::unordered_set<std::string>& held_names(SubscriptionState& state, ChannelKind kind) {
    return kind == ChannelKind::pattern ? state.patterns : state.channels;
}

void subscribe(PubSubContext& ctx, Args argv, ChannelKind kind) {
    const Args names = ArgCursor(argv).rest();
    core::Status allowed = channels_allowed(ctx, names, kind);
    if (allowed) allowed = within_bounds(ctx, names);
    if (!allowed) return ctx.out.error(allowed.error());
    SubscriptionState& state = ctx.client.subscriptions;
    std::unordered_set<std::string>& held = held_names(state, kind);
    for (std::string_view name : names) {
        if (held.emplace(name).second) {
            if (kind == ChannelKind::pattern) {
                ctx.server.pubsub.psubscribe(name, ctx.client.id, state.self);
            } else {
                ctx.server.pubsub.subscribe(name, ctx.client.id, state.self);
            }
        }
        confirm(ctx, kind == ChannelKind::pattern ? "psubscribe" : "subscribe", name);
    }
    state.publish();
}

void unsubscribe(PubSubContext& ctx, Args argv, ChannelKind kind) {
    SubscriptionState& state = ctx.client.subscriptions;
    std::unordered_set<std::string>& held = held_names(state, kind);
    const std::string_view confirmation =
        kind == ChannelKind::pattern ? "punsubscribe" : "unsubscribe";
    const auto drop = [&](std::string_view name) {
        if (kind == ChannelKind::pattern) {
            ctx.server.pubsub.punsubscribe(name, ctx.client.id);
        } else {
            ctx.server.pubsub.unsubscribe(name, ctx.client.id);
        }
    };
    const Args names = ArgCursor(argv).rest();
    if (names.empty()) {
        // Every one held; a client with none still gets one confirmation.
        if (held.empty()) confirm(ctx, confirmation, std::nullopt);
        const std::vector<std::string> all(held.begin(), held.end());
        for (const std::string& name : all) {
            held.erase(name);
            drop(name);
            confirm(ctx, confirmation, name);
        }
    } else {
        for (std::string_view name : names) {
            if (held.erase(std::string(name)) != 0) drop(name);
            confirm(ctx, confirmation, name);
        }
    }
    state.publish();
}

void cmd_subscribe(PubSubContext& ctx, Args argv) {
    subscribe(ctx, argv, ChannelKind::channel);
}

void cmd_psubscribe(PubSubContext& ctx, Args argv) {
    subscribe(ctx, argv, ChannelKind::pattern);
}

void cmd_unsubscribe(PubSubContext& ctx, Args argv) {
    unsubscribe(ctx, argv, ChannelKind::channel);
}

void cmd_punsubscribe(PubSubContext& ctx, Args argv) {
    unsubscribe(ctx, argv, ChannelKind::pattern);
}

void cmd_publish(PubSubContext& ctx, Args argv) {
    ArgCursor args(argv);
    const std::string_view channel = args.next();
    const std::string_view message = args.next();
    if (const core::Status allowed = channels_allowed(ctx, Args(&channel, 1), ChannelKind::channel);
        !allowed) {
        return ctx.out.error(allowed.error());
    }
    ctx.out.integer(static_cast<std::int64_t>(ctx.server.pubsub.publish(channel, message)));
}

// PUBSUB CHANNELS [pattern]: every channel without one.
void cmd_pubsub_channels(PubSubContext& ctx, Args argv) {
    ArgCursor args(argv, 2);
    const std::vector<std::string> channels =
        ctx.server.pubsub.channels(args.has_next() ? args.next() : std::string_view("*"));
    ctx.out.array(channels.size());
    for (const std::string& channel : channels) ctx.out.bulk(channel);
}

void cmd_pubsub_numsub(PubSubContext& ctx, Args argv) {
    const Args channels = ArgCursor(argv, 2).rest();
    // [channel, count, ...]: a map in RESP3, as Redis.
    ctx.out.map(channels.size());
    for (std::string_view channel : channels) {
        ctx.out.bulk(channel);
        ctx.out.integer(static_cast<std::int64_t>(ctx.server.pubsub.subscribers(channel)));
    }
}

void cmd_pubsub_numpat(PubSubContext& ctx, Args) {
    ctx.out.integer(static_cast<std::int64_t>(ctx.server.pubsub.patterns()));
}

void cmd_pubsub_help(Context& ctx, Args) {
    reply_help(
        ctx,
        {"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "CHANNELS [<pattern>]",
         "    Return the currently active channels matching a <pattern> (default: '*').", "NUMPAT",
         "    Return number of subscriptions to patterns.", "NUMSUB [<channel> ...]",
         "    Return the number of subscribers for the specified channels, excluding",
         "    pattern subscriptions(default: no channels).", "HELP", "    Print this help."});
}

}  // namespace

void register_pubsub_commands(Registry& registry) {
    registry.register_handler<cmd_subscribe>("subscribe");
    registry.register_handler<cmd_unsubscribe>("unsubscribe");
    registry.register_handler<cmd_psubscribe>("psubscribe");
    registry.register_handler<cmd_punsubscribe>("punsubscribe");
    registry.register_handler<cmd_publish>("publish");
    registry.register_handler<cmd_pubsub_channels>("pubsub|channels");
    registry.register_handler<cmd_pubsub_numsub>("pubsub|numsub");
    registry.register_handler<cmd_pubsub_numpat>("pubsub|numpat");
    registry.register_handler<cmd_pubsub_help>("pubsub|help");
}

}  // namespace bloomery::command
