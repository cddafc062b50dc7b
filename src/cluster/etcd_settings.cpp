// Reading and checking EtcdSettings before any connection is made, so a bad
// endpoint list is refused at start with the URL that is wrong.

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "bloomery/cluster/etcd.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/parse_int64.hpp"

namespace bloomery::cluster {

namespace {

core::Result<EtcdEndpoint> parse_endpoint(const std::string& url) {
    const auto bad = [&url](std::string_view why) {
        return core::Error{"bad etcd endpoint '" + url + "': " + std::string(why)};
    };
    EtcdEndpoint endpoint;
    endpoint.url = url;
    std::string_view rest = url;
    if (rest.starts_with("http://")) {
        rest.remove_prefix(7);
    } else if (rest.starts_with("https://")) {
        rest.remove_prefix(8);
        endpoint.tls = true;
    } else {
        return bad("expected http://host:port or https://host:port");
    }
    if (rest.ends_with('/')) rest.remove_suffix(1);  // "http://host:port/" is common
    std::string_view host;
    if (rest.starts_with('[')) {
        const auto close = rest.find(']');
        if (close == std::string_view::npos) return bad("an IPv6 address without its ']'");
        host = rest.substr(1, close - 1);
        rest.remove_prefix(close + 1);
        if (!rest.starts_with(':')) return bad("no port");
        rest.remove_prefix(1);
    } else {
        const auto colon = rest.rfind(':');
        if (colon == std::string_view::npos) return bad("no port");
        host = rest.substr(0, colon);
        rest.remove_prefix(colon + 1);
    }
    if (host.empty()) return bad("no host");
    if (host.find_first_of("/?#@ ") != std::string_view::npos) return bad("a bad host");
    std::uint64_t port = 0;
    if (!core::parse_digits(rest, 5, port) || port == 0 || port > 65535) {
        return bad("the port is not a number from 1 to 65535 (or a path follows it)");
    }
    endpoint.host = std::string(host);
    endpoint.port = static_cast<std::uint16_t>(port);
    return endpoint;
}

core::Status check_file(const std::string& path, std::string_view what) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
        return core::Error{"etcd " + std::string(what) + " '" + path + "' is not a readable file"};
    }
    return {};
}

core::Status check_tls_files(const EtcdSettings& settings) {
    if (!settings.ca_file.empty()) {
        if (auto ok = check_file(settings.ca_file, "CA file"); !ok) return ok;
    }
    if (settings.cert_file.empty() != settings.key_file.empty()) {
        return core::Error{"etcd client certificate and key go together: set both or neither"};
    }
    if (!settings.cert_file.empty()) {
        if (auto ok = check_file(settings.cert_file, "client certificate"); !ok) return ok;
        if (auto ok = check_file(settings.key_file, "client key"); !ok) return ok;
    }
    return {};
}

}  // namespace

core::Result<std::vector<EtcdEndpoint>> parse_etcd_endpoints(const EtcdSettings& settings) {
    if (settings.endpoints.empty()) return core::Error{"no etcd endpoint given"};
    if (settings.request_timeout.count() <= 0) {
        return core::Error{"the etcd request timeout must be positive"};
    }
    std::vector<EtcdEndpoint> endpoints;
    bool any_tls = false;
    for (const auto& url : settings.endpoints) {
        auto endpoint = parse_endpoint(url);
        if (!endpoint) return endpoint.failure();
        any_tls = any_tls || endpoint->tls;
        endpoints.push_back(std::move(*endpoint));
    }
    if (any_tls) {
        if (auto ok = check_tls_files(settings); !ok) return ok.failure();
    }
    return endpoints;
}

EtcdSettings etcd_settings_of(const core::Config& config) {
    EtcdSettings settings;
    std::string_view rest = config.cluster_etcd;
    while (!rest.empty()) {
        const auto comma = rest.find(',');
        std::string_view url = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        while (!url.empty() && url.front() == ' ') url.remove_prefix(1);
        while (!url.empty() && url.back() == ' ') url.remove_suffix(1);
        if (!url.empty()) settings.endpoints.emplace_back(url);
    }
    settings.user = config.cluster_etcd_user;
    settings.password = config.cluster_etcd_password;
    settings.ca_file = config.cluster_etcd_cacert;
    settings.cert_file = config.cluster_etcd_cert;
    settings.key_file = config.cluster_etcd_key;
    // A third of the node timeout leaves a renewal two more tries before
    // the lease lapses; at least long enough for etcd to elect a leader.
    settings.request_timeout =
        std::clamp(std::chrono::milliseconds(config.cluster_node_timeout_ms / 3),
                   std::chrono::milliseconds(kEtcdMinRequestTimeoutMs),
                   std::chrono::milliseconds(kEtcdMaxRequestTimeoutMs));
    return settings;
}

}  // namespace bloomery::cluster
