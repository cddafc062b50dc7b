#pragma once
// Pub/Sub: who listens to which channel or pattern, and delivering what
// PUBLISH sends (SUBSCRIBE, PSUBSCRIBE, PUBLISH, PUBSUB; pubsub_commands.cpp).
//
// A subscriber is a client connection (the network layer implements
// Subscriber): the registry holds weak references to it, so a connection
// that goes away is never delivered to, and forgets its subscriptions when
// it closes. PUBLISH encodes each message once per protocol and shares the
// bytes among its receivers; each receiver queues them in its own output
// buffer, bounded by the pubsub class of client-output-buffer-limit.
//
// Thread safety: every member may be called from any thread. Subscribing
// takes the registry's lock exclusively, PUBLISH shared (and delivers after
// releasing it).

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bloomery/command/glob.hpp"
#include "bloomery/core/memory.hpp"

namespace bloomery::command {

// What a Pub/Sub name stands for: one channel (SUBSCRIBE, PUBLISH), or a
// glob pattern of channels (PSUBSCRIBE).
enum class ChannelKind { channel, pattern };

// Someone who receives published messages: a client connection.
class Subscriber {
public:
    virtual ~Subscriber() = default;
    // Queues `message` (a whole RESP message for this subscriber's
    // protocol) to be written to the client. Any thread; never blocks.
    virtual void deliver(std::shared_ptr<const std::string> message) = 0;
    // The protocol its messages are encoded for (2 or 3). Any thread.
    virtual int subscriber_protocol() const = 0;
};

class PubSub {
public:
    PubSub() = default;
    PubSub(const PubSub&) = delete;
    PubSub& operator=(const PubSub&) = delete;

    // Adds the subscriber `id` to a channel (or a pattern); false if it was
    // already there.
    bool subscribe(std::string_view channel, std::int64_t id, std::weak_ptr<Subscriber> who);
    bool unsubscribe(std::string_view channel, std::int64_t id);
    bool psubscribe(std::string_view pattern, std::int64_t id, std::weak_ptr<Subscriber> who);
    bool punsubscribe(std::string_view pattern, std::int64_t id);

    // Delivers `message` to every subscriber of `channel` and of every
    // pattern matching it ("message" and "pmessage"); returns how many
    // deliveries that made (a client that listens both ways counts twice,
    // as in Redis).
    std::size_t publish(std::string_view channel, std::string_view message);

    // PUBSUB CHANNELS [pattern]: channels with at least one subscriber.
    std::vector<std::string> channels(std::string_view pattern) const;
    // Channels with at least one subscriber (INFO pubsub_channels).
    std::size_t channel_count() const;
    // PUBSUB NUMSUB: subscribers of `channel`.
    std::size_t subscribers(std::string_view channel) const;
    // PUBSUB NUMPAT: patterns subscribed, by anyone (each pattern once).
    std::size_t patterns() const;

private:
    struct Listener {
        std::int64_t id;
        std::weak_ptr<Subscriber> who;
    };
    // Each client at most once in a channel's or pattern's listeners.
    static bool add_listener(std::vector<Listener>& listeners, std::int64_t id,
                             std::weak_ptr<Subscriber> who);
    static bool remove_listener(std::vector<Listener>& listeners, std::int64_t id);
    struct Pattern {
        std::string text;
        GlobPattern glob;
        std::vector<Listener> listeners;
    };
    // Recounts what the registry holds (used_memory), under the exclusive lock.
    void account_locked();

    mutable std::shared_mutex mutex_;
    std::unordered_map<std::string, std::vector<Listener>> channels_;
    std::vector<std::unique_ptr<Pattern>> patterns_;
    std::size_t bytes_ = 0;
    core::MemoryCharge charge_{core::MemoryUse::other};
};

// The RESP of a published message as `protocol` frames it (a push in RESP3,
// an array in RESP2): "message" (channel, payload), or "pmessage" (pattern,
// channel, payload) for a pattern's subscriber.
std::string encode_message(int protocol, std::string_view channel, std::string_view payload);
std::string encode_pmessage(int protocol, std::string_view pattern, std::string_view channel,
                            std::string_view payload);

}  // namespace bloomery::command
