#pragma once
// `bloomery --health-check HOST:PORT`: a client for container health checks
// and Kubernetes exec probes, so the image needs no redis-cli. Connects,
// authenticates as the default user when a password is configured
// (--requirepass, --requirepass-file or BLOOMERY_REQUIREPASS), sends PING and
// expects +PONG, all within one deadline.

#include <string>
#include <string_view>

#include "bloomery/core/config.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::net {

struct HealthCheckOptions {
    // How the probe connects. With tls the connection is TLS 1.2+; the
    // server's certificate is verified against --tls-ca-cert-file when one
    // is given (the chain only: probes connect by address, not by the name
    // in the certificate), and --tls-cert-file / --tls-key-file are
    // presented when given (for --tls-auth-clients yes).
    enum class Transport { plain, tls };
    Transport transport = Transport::plain;
    // For the whole check: connect, AUTH and PING.
    double timeout_seconds = 2;
};

// HOST:PORT as "127.0.0.1:6379", "localhost:6379" or "[::1]:6379". What
// happened, for the orchestrator's log: the PONG, or why the check failed.
// Never throws.
core::Result<std::string> health_check(std::string_view target, const core::Config& config,
                                       const HealthCheckOptions& options);

}  // namespace bloomery::net
