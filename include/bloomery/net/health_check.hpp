#pragma once
// `bloomery --health-check HOST:PORT`: a client for container health checks
// and Kubernetes exec probes, so the image needs no redis-cli. Connects,
// authenticates as the default user when a password is configured
// (--requirepass, --requirepass-file or BLOOMERY_REQUIREPASS), sends PING and
// expects +PONG, all within one deadline.

#include <string>
#include <string_view>

#include "bloomery/core/config.hpp"

namespace bloomery::net {

struct HealthCheckResult {
    bool ok = false;
    std::string message;  // what happened, for the log of the orchestrator
};

// HOST:PORT as "127.0.0.1:6379", "localhost:6379" or "[::1]:6379". With
// `tls`, the connection is TLS 1.2+; the server's certificate is verified
// against --tls-ca-cert-file when one is given (the chain only: probes
// connect by address, not by the name in the certificate), and
// --tls-cert-file / --tls-key-file are presented when given (for
// --tls-auth-clients yes). Never throws.
HealthCheckResult health_check(std::string_view target, const core::Config& config, bool tls,
                               double timeout_seconds);

}  // namespace bloomery::net
