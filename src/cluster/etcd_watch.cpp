// EtcdClient::watch: one long POST /v3/watch whose answer is a stream of
// JSON objects, one a line ({"result": {...}}), read on a connection of the
// watch's own so the client's other calls go on meanwhile.

#include <algorithm>
#include <chrono>
#include <utility>

#include "bloomery/cluster/etcd.hpp"
#include "bloomery/core/printable.hpp"
#include "etcd_client_impl.hpp"

namespace bloomery::cluster {

namespace json = etcd_json;

namespace {

// How often a quiet watch looks at its stop request: often enough that a
// stop is prompt, within request_timeout as promised.
constexpr std::chrono::milliseconds kStopCheckInterval{100};

// What handling one line of the stream decided.
enum class LineOutcome { go_on, compacted };

class WatchStream {
public:
    WatchStream(EtcdClient::Impl& impl, std::string_view prefix, const EtcdWatchHandler& handler)
        : impl_(impl),
          handler_(handler),
          what_("etcd watch of '" + core::printable(prefix) + "'") {}

    // Connects to the first endpoint that answers and starts the watch.
    core::Status open(const std::string& body);
    // Reads until stopped, compacted or an error.
    core::Result<EtcdWatchEnd> run(const std::stop_token& stop);
    // Whether the watch ended because etcd no longer took the client's token.
    bool token_rejected() const { return token_rejected_; }

private:
    bool stop_requested(const std::stop_token& stop) const {
        return stop.stop_requested() || impl_.cancelled.load();
    }
    core::Result<LineOutcome> handle_line(std::string_view line);

    EtcdClient::Impl& impl_;
    const EtcdWatchHandler& handler_;
    std::string what_;
    std::unique_ptr<etcd_http::Connection> connection_;
    bool token_rejected_ = false;
};

core::Status WatchStream::open(const std::string& body) {
    std::size_t start = 0;
    {
        std::lock_guard lock(impl_.mutex);
        start = impl_.current;
    }
    std::string last_failure;
    bool token_renewed = false, renew_now = false;
    for (std::size_t tried = 0; tried < impl_.endpoints.size();) {
        auto token = impl_.current_token(std::exchange(renew_now, false));
        if (!token) return token.failure();
        const auto& endpoint = impl_.endpoints[(start + tried) % impl_.endpoints.size()];
        connection_ = std::make_unique<etcd_http::Connection>(endpoint, impl_.tls.get(),
                                                              impl_.settings.request_timeout);
        auto answer = connection_->open_stream("/v3/watch", body, *token);
        if (!answer) {
            last_failure = answer.error();
            ++tried;
            continue;
        }
        if (answer->status == 200) return {};
        const auto refusal = json::decode_refusal(answer->status, answer->body);
        if (!token_renewed && token_expired(refusal) && impl_.authenticating()) {
            token_renewed = renew_now = true;
            continue;
        }
        if (member_unavailable(refusal)) {
            last_failure = endpoint.url + ": " + refusal.message;
            ++tried;
            continue;
        }
        return core::Error{what_ + " refused by " + endpoint.url + ": " + refusal.message};
    }
    return core::Error{what_ + " failed: no endpoint answered (last: " + last_failure + ")"};
}

core::Result<LineOutcome> WatchStream::handle_line(std::string_view line) {
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) return LineOutcome::go_on;
    auto object = json::parse_object(line);
    if (!object) return core::Error{what_ + ": " + object.error()};
    json::Refusal refusal;
    if (json::stream_refusal(*object, refusal)) {
        return core::Error{what_ + " ended by etcd: " + refusal.message};
    }
    auto message = json::decode_watch_message(*object);
    if (!message) return core::Error{what_ + ": " + message.error()};
    if (message->canceled) {
        if (message->compact_revision > 0) return LineOutcome::compacted;
        // etcd checks a watch's token when it creates it and answers an
        // invalid one with a cancelled watch (HTTP 200), not a refusal.
        if (token_expired(json::Refusal{0, message->cancel_reason})) {
            impl_.forget_token();
            token_rejected_ = true;
        }
        return core::Error{what_ + " cancelled by etcd: " +
                           (message->cancel_reason.empty() ? std::string("no reason given")
                                                           : message->cancel_reason)};
    }
    if (!message->events.empty()) handler_(message->events, message->revision);
    return LineOutcome::go_on;
}

core::Result<EtcdWatchEnd> WatchStream::run(const std::stop_token& stop) {
    const auto wait = std::min(kStopCheckInterval, impl_.settings.request_timeout);
    std::string pending;
    std::size_t scanned = 0;  // bytes of `pending` known to hold no newline
    while (!stop_requested(stop)) {
        auto read = connection_->read_stream(pending, wait);
        if (!read) return core::Error{what_ + ": " + read.error()};
        if (*read == etcd_http::StreamRead::nothing_yet) continue;
        std::size_t consumed = 0;
        for (auto newline = pending.find('\n', scanned); newline != std::string::npos;
             newline = pending.find('\n', consumed)) {
            auto outcome =
                handle_line(std::string_view(pending).substr(consumed, newline - consumed));
            consumed = newline + 1;
            if (!outcome) return outcome.failure();
            if (*outcome == LineOutcome::compacted) return EtcdWatchEnd::compacted;
        }
        pending.erase(0, consumed);
        scanned = pending.size();
        if (pending.size() > kMaxEtcdResponseBytes) {
            return core::Error{what_ + ": a message larger than " +
                               std::to_string(kMaxEtcdResponseBytes >> 20) + " MiB"};
        }
    }
    return EtcdWatchEnd::stopped;
}

}  // namespace

core::Result<EtcdWatchEnd> EtcdClient::watch(std::string_view prefix, std::int64_t start_revision,
                                             const EtcdWatchHandler& on_events,
                                             const std::stop_token& stop) {
    if (stop.stop_requested() || impl_->cancelled.load()) return EtcdWatchEnd::stopped;
    const std::string body = json::dump(json::watch_create_request(prefix, start_revision));
    // Twice at most: once more with a new token when etcd refused the one
    // the client held (it expired, or auth was turned off and on).
    for (int attempt = 0;; ++attempt) {
        WatchStream stream(*impl_, prefix, on_events);
        if (auto opened = stream.open(body); !opened) return opened.failure();
        auto end = stream.run(stop);
        if (end || !stream.token_rejected() || attempt > 0) return end;
    }
}

}  // namespace bloomery::cluster
