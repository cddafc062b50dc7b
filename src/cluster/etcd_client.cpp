#include <chrono>
#include <utility>

#include "bloomery/cluster/etcd.hpp"
#include "bloomery/core/printable.hpp"
#include "etcd_client_impl.hpp"

namespace bloomery::cluster {

namespace json = etcd_json;

namespace {

// gRPC status codes etcd's gateway reports in "code".
constexpr int kGrpcUnavailable = 14;
constexpr int kGrpcUnauthenticated = 16;

// Built piece by piece: GCC 12 reports a false -Wrestrict on
// "literal" + std::string once inlined (GCC bug 105329).
std::string quoted(std::string_view key) {
    std::string text = "'";
    core::append_printable(text, key);
    text += '\'';
    return text;
}

}  // namespace

bool token_expired(const json::Refusal& refusal) {
    return refusal.code == kGrpcUnauthenticated ||
           refusal.message.find("invalid auth token") != std::string::npos ||
           refusal.message.find("revision of auth store is old") != std::string::npos;
}

bool member_unavailable(const json::Refusal& refusal) {
    return refusal.code == kGrpcUnavailable;
}

EtcdOp EtcdOp::put(std::string key, std::string value, std::int64_t lease) {
    return EtcdOp{Kind::put, std::move(key), std::move(value), lease};
}
EtcdOp EtcdOp::erase(std::string key) {
    return EtcdOp{Kind::erase, std::move(key), {}, 0};
}
EtcdOp EtcdOp::erase_prefix(std::string prefix) {
    return EtcdOp{Kind::erase_prefix, std::move(prefix), {}, 0};
}
EtcdOp EtcdOp::get(std::string key) {
    return EtcdOp{Kind::get, std::move(key), {}, 0};
}
EtcdOp EtcdOp::get_prefix(std::string prefix) {
    return EtcdOp{Kind::get_prefix, std::move(prefix), {}, 0};
}

void EtcdClient::Impl::next_endpoint_locked() {
    connection.reset();
    current = (current + 1) % endpoints.size();
}

core::Result<json::Json> EtcdClient::Impl::call(std::string_view what, std::string_view target,
                                                const json::Json& request) {
    std::lock_guard lock(mutex);
    return call_locked(what, target, request, Auth::token);
}

core::Result<json::Json> EtcdClient::Impl::call_locked(std::string_view what,
                                                       std::string_view target,
                                                       const json::Json& request, Auth auth) {
    const std::string body = json::dump(request);
    const bool with_token = auth == Auth::token && authenticating();
    bool token_renewed = false;
    bool reconnected = false;
    std::string last_failure;
    for (std::size_t tried = 0; tried < endpoints.size();) {
        if (with_token && token.empty()) {
            if (auto ok = authenticate_locked(); !ok) return ok.failure();
        }
        if (!connection) {
            connection = std::make_unique<etcd_http::Connection>(endpoints[current], tls.get(),
                                                                 settings.request_timeout);
        }
        const bool reused = connection->connected();
        const auto sent = std::chrono::steady_clock::now();
        auto answer = connection->post(target, body, with_token ? token : std::string_view{});
        if (!answer && reused && !reconnected &&
            std::chrono::steady_clock::now() - sent < settings.request_timeout / 2) {
            // etcd closed the kept-alive connection meanwhile (a restart, an
            // idle limit), which fails at once: try the same member once more
            // on a new connection. A member that is slow is left at once.
            reconnected = true;
            continue;
        }
        reconnected = false;
        if (!answer) {
            last_failure = answer.error();
            next_endpoint_locked();
            ++tried;
            continue;
        }
        const std::string& url = endpoints[current].url;
        if (answer->status == 200) {
            auto parsed = json::parse_object(answer->body);
            if (!parsed) {
                return core::Error{"etcd " + std::string(what) + ": " + parsed.error() + " (from " +
                                   url + ")"};
            }
            return parsed;
        }
        const auto refusal = json::decode_refusal(answer->status, answer->body);
        if (with_token && !token_renewed && token_expired(refusal)) {
            token.clear();
            token_renewed = true;
            continue;
        }
        if (member_unavailable(refusal)) {
            last_failure = url + ": " + refusal.message;
            next_endpoint_locked();
            ++tried;
            continue;
        }
        return core::Error{"etcd " + std::string(what) + " refused by " + url + ": " +
                           refusal.message};
    }
    return core::Error{"etcd " + std::string(what) +
                       " failed: no endpoint answered (last: " + last_failure + ")"};
}

core::Status EtcdClient::Impl::authenticate_locked() {
    const json::Json request{{"name", settings.user}, {"password", settings.password}};
    auto answer = call_locked("authentication", "/v3/auth/authenticate", request, Auth::none);
    if (!answer) return answer.failure();
    const auto it = answer->find("token");
    if (it == answer->end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
        return core::Error{"etcd authentication answered no token"};
    }
    token = it->get<std::string>();
    return {};
}

core::Result<std::string> EtcdClient::Impl::current_token(bool renew) {
    if (!authenticating()) return std::string{};
    std::lock_guard lock(mutex);
    if (renew) token.clear();
    if (token.empty()) {
        if (auto ok = authenticate_locked(); !ok) return ok.failure();
    }
    return token;
}

void EtcdClient::Impl::forget_token() {
    std::lock_guard lock(mutex);
    token.clear();
}

core::Result<std::unique_ptr<EtcdClient>> EtcdClient::create(EtcdSettings settings) {
    auto endpoints = parse_etcd_endpoints(settings);
    if (!endpoints) return endpoints.failure();
    auto impl = std::make_unique<Impl>();
    for (const auto& endpoint : *endpoints) {
        if (!endpoint.tls || impl->tls) continue;
        auto context = etcd_http::make_tls_context(settings);
        if (!context) return context.failure();
        impl->tls = std::move(*context);
    }
    impl->settings = std::move(settings);
    impl->endpoints = std::move(*endpoints);
    return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(impl)));
}

EtcdClient::EtcdClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdClient::~EtcdClient() = default;

core::Result<EtcdRange> EtcdClient::get(std::string_view key) {
    auto answer =
        impl_->call("get of " + quoted(key), "/v3/kv/range", json::range_request(key, ""));
    if (!answer) return answer.failure();
    auto range = json::decode_range(*answer);
    if (!range) return core::Error{"etcd get of " + quoted(key) + ": " + range.error()};
    return range;
}

core::Result<EtcdRange> EtcdClient::get_prefix(std::string_view prefix) {
    const std::string what = "get of prefix " + quoted(prefix);
    auto answer = impl_->call(what, "/v3/kv/range", json::prefix_request(prefix));
    if (!answer) return answer.failure();
    auto range = json::decode_range(*answer);
    if (!range) return core::Error{"etcd " + what + ": " + range.error()};
    return range;
}

core::Result<std::int64_t> EtcdClient::put(std::string_view key, std::string_view value,
                                           std::int64_t lease_id) {
    const std::string what = "put of " + quoted(key);
    auto answer = impl_->call(what, "/v3/kv/put", json::put_request(key, value, lease_id));
    if (!answer) return answer.failure();
    auto revision = json::header_revision(*answer);
    if (!revision) return core::Error{"etcd " + what + ": " + revision.error()};
    return revision;
}

core::Result<std::int64_t> EtcdClient::erase(std::string_view key) {
    const std::string what = "delete of " + quoted(key);
    auto answer = impl_->call(what, "/v3/kv/deleterange", json::delete_request(key, ""));
    if (!answer) return answer.failure();
    auto deleted = json::int_field(*answer, "deleted");
    if (!deleted) return core::Error{"etcd " + what + ": " + deleted.error()};
    return deleted;
}

core::Result<EtcdTxnResult> EtcdClient::txn(const EtcdTxn& txn) {
    auto answer = impl_->call("transaction", "/v3/kv/txn", json::txn_request(txn));
    if (!answer) return answer.failure();
    auto result = json::decode_txn(*answer);
    if (!result) return core::Error{"etcd transaction: " + result.error()};
    return result;
}

core::Result<EtcdLease> EtcdClient::grant(std::int64_t ttl_seconds) {
    if (ttl_seconds < 1) return core::Error{"etcd lease TTL must be at least 1 second"};
    auto answer = impl_->call("lease grant", "/v3/lease/grant",
                              json::Json{{"TTL", std::to_string(ttl_seconds)}});
    if (!answer) return answer.failure();
    auto lease = json::decode_lease(*answer);
    if (!lease) return core::Error{"etcd lease grant: " + lease.error()};
    return lease;
}

core::Result<std::int64_t> EtcdClient::keep_alive(std::int64_t lease_id) {
    const std::string what = "keep-alive of lease " + std::to_string(lease_id);
    auto answer =
        impl_->call(what, "/v3/lease/keepalive", json::Json{{"ID", std::to_string(lease_id)}});
    if (!answer) return answer.failure();
    // A stream of one answer: {"result": {...}} or {"error": {...}}.
    json::Refusal refusal;
    if (json::stream_refusal(*answer, refusal)) {
        return core::Error{"etcd " + what + " refused: " + refusal.message};
    }
    const auto result = answer->find("result");
    if (result == answer->end() || !result->is_object()) {
        return core::Error{"etcd " + what + ": an answer without its result"};
    }
    auto ttl = json::int_field(*result, "TTL");
    if (!ttl) return core::Error{"etcd " + what + ": " + ttl.error()};
    return *ttl < 0 ? std::int64_t{0} : *ttl;
}

core::Status EtcdClient::revoke(std::int64_t lease_id) {
    auto answer = impl_->call("revoke of lease " + std::to_string(lease_id), "/v3/lease/revoke",
                              json::Json{{"ID", std::to_string(lease_id)}});
    if (!answer) return answer.failure();
    return {};
}

void EtcdClient::cancel() {
    impl_->cancelled.store(true);
}
void EtcdClient::reset_cancel() {
    impl_->cancelled.store(false);
}

}  // namespace bloomery::cluster
