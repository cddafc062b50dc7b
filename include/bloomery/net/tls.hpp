#pragma once
// The server's TLS context, built once at start from the configuration and
// shared by every TLS connection (OpenSSL's SSL_CTX is safe to share between
// threads once configured).

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

}  // namespace bloomery::net
