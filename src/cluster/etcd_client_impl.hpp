#pragma once
// The state behind EtcdClient, shared by its request/answer calls
// (etcd_client.cpp) and its watch (etcd_watch.cpp).

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/cluster/etcd.hpp"
#include "etcd_http.hpp"
#include "etcd_json.hpp"

namespace bloomery::cluster {

struct EtcdClient::Impl {
    // Whether a request carries the client's token (authentication itself
    // does not).
    enum class Auth { token, none };

    EtcdSettings settings;
    std::vector<EtcdEndpoint> endpoints;
    std::shared_ptr<boost::asio::ssl::context> tls;  // null without https endpoints
    std::atomic<bool> cancelled{false};              // cancel(), for watch()

    std::mutex mutex;         // guards what follows, held for a whole call
    std::size_t current = 0;  // the endpoint in use
    std::unique_ptr<etcd_http::Connection> connection;  // to endpoints[current]
    std::string token;  // etcd's authentication token ("" until authenticated)

    bool authenticating() const { return !settings.user.empty(); }

    // POSTs `request` to `target` on the endpoint in use, moving on to the
    // next endpoint on a connection error, a timeout or an unavailable
    // member, and authenticating again once when etcd says the token is no
    // longer valid. `what` names the request in errors.
    core::Result<etcd_json::Json> call(std::string_view what, std::string_view target,
                                       const etcd_json::Json& request);
    // The same with the mutex held.
    core::Result<etcd_json::Json> call_locked(std::string_view what, std::string_view target,
                                              const etcd_json::Json& request, Auth auth);
    // Gets a new token (mutex held).
    core::Status authenticate_locked();
    // The token to send now (authenticating when there is none or `renew`);
    // "" without a user.
    core::Result<std::string> current_token(bool renew);
    // Drops the token, so the next request authenticates again.
    void forget_token();
    void next_endpoint_locked();
};

// Whether etcd refused a request for its token (expired, or from before a
// change of the users), which a new token cures.
bool token_expired(const etcd_json::Refusal& refusal);
// Whether the member cannot serve now (no leader, stopping), and another may.
bool member_unavailable(const etcd_json::Refusal& refusal);

}  // namespace bloomery::cluster
