#include "bloomery/command/pubsub.hpp"

#include <algorithm>
#include <optional>

#include "resp_text.hpp"

namespace bloomery::command {

namespace {

// A message, or a pattern's message when `pattern` is given.
std::string encode(int protocol, std::optional<std::string_view> pattern, std::string_view channel,
                   std::string_view payload) {
    std::string out;
    out.reserve(40 + (pattern ? pattern->size() : 0) + channel.size() + payload.size());
    out += protocol >= 3 ? '>' : '*';
    if (!pattern) {
        out += "3\r\n";
        append_bulk(out, "message");
    } else {
        out += "4\r\n";
        append_bulk(out, "pmessage");
        append_bulk(out, *pattern);
    }
    append_bulk(out, channel);
    append_bulk(out, payload);
    return out;
}

}  // namespace

std::string encode_message(int protocol, std::string_view channel, std::string_view payload) {
    return encode(protocol, std::nullopt, channel, payload);
}

std::string encode_pmessage(int protocol, std::string_view pattern, std::string_view channel,
                            std::string_view payload) {
    return encode(protocol, pattern, channel, payload);
}

void PubSub::account_locked() {
    // Names, listeners and the tables' buckets, roughly as the allocator
    // holds them.
    std::size_t bytes = channels_.bucket_count() * sizeof(void*);
    for (const auto& [name, listeners] : channels_) {
        bytes += 64 + name.capacity() + listeners.capacity() * sizeof(Listener);
    }
    for (const auto& pattern : patterns_) {
        // A compiled glob holds a 32-byte set per character and, for runs
        // with classes, 2 KiB of masks per 64 characters.
        bytes += sizeof(Pattern) + 2048 + pattern->text.capacity() * 40 +
                 pattern->listeners.capacity() * sizeof(Listener);
    }
    bytes_ = bytes;
    charge_.set(bytes);
}

// A channel's or pattern's listeners: each client at most once.
bool PubSub::add_listener(std::vector<Listener>& listeners, std::int64_t id,
                          std::weak_ptr<Subscriber> who) {
    const bool known = std::any_of(listeners.begin(), listeners.end(),
                                   [&](const Listener& l) { return l.id == id; });
    if (known) return false;
    listeners.push_back({id, std::move(who)});
    return true;
}

bool PubSub::remove_listener(std::vector<Listener>& listeners, std::int64_t id) {
    const auto gone = std::remove_if(listeners.begin(), listeners.end(),
                                     [&](const Listener& l) { return l.id == id; });
    if (gone == listeners.end()) return false;
    listeners.erase(gone, listeners.end());
    return true;
}

bool PubSub::subscribe(std::string_view channel, std::int64_t id, std::weak_ptr<Subscriber> who) {
    std::unique_lock lock(mutex_);
    auto it = channels_.find(std::string(channel));
    if (it == channels_.end()) it = channels_.emplace(std::string(channel), 0).first;
    std::vector<Listener>& listeners = it->second;
    if (!add_listener(listeners, id, std::move(who))) return false;
    account_locked();
    return true;
}

bool PubSub::unsubscribe(std::string_view channel, std::int64_t id) {
    std::unique_lock lock(mutex_);
    auto it = channels_.find(std::string(channel));
    if (it == channels_.end()) return false;
    std::vector<Listener>& listeners = it->second;
    if (!remove_listener(listeners, id)) return false;
    if (listeners.empty()) channels_.erase(it);
    account_locked();
    return true;
}

bool PubSub::psubscribe(std::string_view pattern, std::int64_t id, std::weak_ptr<Subscriber> who) {
    std::unique_lock lock(mutex_);
    auto it = std::find_if(patterns_.begin(), patterns_.end(),
                           [&](const auto& p) { return p->text == pattern; });
    if (it == patterns_.end()) {
        patterns_.push_back(
            std::make_unique<Pattern>(Pattern{std::string(pattern), GlobPattern(pattern), {}}));
        it = patterns_.end() - 1;
    }
    std::vector<Listener>& listeners = (*it)->listeners;
    if (!add_listener(listeners, id, std::move(who))) return false;
    account_locked();
    return true;
}

bool PubSub::punsubscribe(std::string_view pattern, std::int64_t id) {
    std::unique_lock lock(mutex_);
    auto it = std::find_if(patterns_.begin(), patterns_.end(),
                           [&](const auto& p) { return p->text == pattern; });
    if (it == patterns_.end()) return false;
    std::vector<Listener>& listeners = (*it)->listeners;
    if (!remove_listener(listeners, id)) return false;
    if (listeners.empty()) patterns_.erase(it);
    account_locked();
    return true;
}

std::size_t PubSub::publish(std::string_view channel, std::string_view message) {
    // Who receives it, found under the shared lock; delivered after it.
    struct Delivery {
        std::shared_ptr<Subscriber> who;
        std::size_t pattern;  // into `matched`, or kChannel
    };
    constexpr std::size_t kChannel = ~std::size_t{0};
    std::vector<Delivery> deliveries;
    std::vector<std::string> matched;  // the patterns that matched, copied
    {
        std::shared_lock lock(mutex_);
        if (auto it = channels_.find(std::string(channel)); it != channels_.end()) {
            for (const Listener& listener : it->second) {
                if (auto who = listener.who.lock())
                    deliveries.push_back({std::move(who), kChannel});
            }
        }
        for (const auto& pattern : patterns_) {
            if (!pattern->glob.match(channel)) continue;
            matched.push_back(pattern->text);
            for (const Listener& listener : pattern->listeners) {
                if (auto who = listener.who.lock()) {
                    deliveries.push_back({std::move(who), matched.size() - 1});
                }
            }
        }
    }
    // A channel's message is encoded once per protocol and shared by its
    // receivers; a pattern's carries the pattern, so once per receiver.
    std::shared_ptr<const std::string> plain[2];
    for (const Delivery& delivery : deliveries) {
        const int protocol = delivery.who->subscriber_protocol() >= 3 ? 3 : 2;
        if (delivery.pattern == kChannel) {
            auto& bytes = plain[protocol - 2];
            if (!bytes) {
                bytes =
                    std::make_shared<const std::string>(encode_message(protocol, channel, message));
            }
            delivery.who->deliver(bytes);
        } else {
            delivery.who->deliver(std::make_shared<const std::string>(
                encode_pmessage(protocol, matched[delivery.pattern], channel, message)));
        }
    }
    return deliveries.size();
}

std::vector<std::string> PubSub::channels(std::string_view pattern) const {
    std::vector<std::string> out;
    const GlobPattern glob(pattern.empty() ? std::string_view("*") : pattern);
    std::shared_lock lock(mutex_);
    for (const auto& [name, listeners] : channels_) {
        if (glob.match(name)) out.push_back(name);
    }
    return out;
}

std::size_t PubSub::channel_count() const {
    std::shared_lock lock(mutex_);
    return channels_.size();
}

std::size_t PubSub::subscribers(std::string_view channel) const {
    std::shared_lock lock(mutex_);
    const auto it = channels_.find(std::string(channel));
    return it == channels_.end() ? 0 : it->second.size();
}

std::size_t PubSub::patterns() const {
    std::shared_lock lock(mutex_);
    return patterns_.size();
}

}  // namespace bloomery::command
