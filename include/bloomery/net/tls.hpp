#pragma once
// The server's TLS contexts, built once at start from the configuration and
// shared by every TLS connection (OpenSSL's SSL_CTX is safe to share between
// threads once configured): one for the clients of --tls-port, one for the
// links this server opens itself (--tls-replication, --tls-cluster).

#include <memory>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <boost/asio/ssl/context.hpp>

#include "bloomery/core/config.hpp"

namespace bloomery::net {

// The oldest protocol version the server accepts: TLS 1.0 and 1.1 clients are
// refused during the handshake, whatever the system's OpenSSL configuration
// allows.
inline constexpr int kTlsMinimumVersion = TLS1_2_VERSION;

// Builds the context: certificate chain and private key (checked to match),
// the CA bundle client certificates must chain to, client verification per
// --tls-auth-clients, TLS 1.2 minimum, no compression, no renegotiation.
// Throws std::runtime_error whose message names the option, the file and the
// reason, so that a bad setting stops the server at start.
std::unique_ptr<boost::asio::ssl::context> make_tls_context(const core::Config& config);

// Builds the context of the links this server opens (a replica to its
// primary, MIGRATE to its target): the peer's certificate chain must verify
// against --tls-ca-cert-file, or the handshake fails; its host name is not
// checked (as Redis: certificates name nodes that move between addresses).
// Presents --tls-client-cert-file / --tls-client-key-file, else
// --tls-cert-file / --tls-key-file, when set, so that a peer with
// --tls-auth-clients can require it. TLS 1.2 minimum, no compression, no
// renegotiation. Throws std::runtime_error naming the option, the file and
// the reason.
std::unique_ptr<boost::asio::ssl::context> make_tls_client_context(const core::Config& config);

// Whether this server's links need make_tls_client_context.
inline bool tls_links_wanted(const core::Config& config) {
    return config.tls_replication || config.tls_cluster;
}

}  // namespace bloomery::net
