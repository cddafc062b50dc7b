#include "bloomery/net/health_check.hpp"

#include <openssl/ssl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <utility>  // before Asio (Boost 1.74)

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include "bloomery/core/printable.hpp"
#include "bloomery/net/tls.hpp"
#include "bloomery/resp/writer.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Longest reply line read: PONG, OK and every error text fit many times.
constexpr std::size_t kMaxReplyLine = 4096;

// How much of a target or a reply a message quotes (the orchestrator's log).
constexpr std::size_t kQuotedBytes = 200;

// Asio's blocking-with-deadline pattern (the timeouts examples): start one
// asynchronous operation, run the io_context until it completes or the
// deadline passes; at the deadline, close the socket so the operation ends.
class Client {
public:
    Client(std::chrono::steady_clock::time_point deadline) : deadline_(deadline) {}

    core::Status use_tls(const core::Config& config, const std::string& host) {
        try {
            tls_context_.emplace(asio::ssl::context::tls_client);
            SSL_CTX* native = tls_context_->native_handle();
            SSL_CTX_set_min_proto_version(native, kTlsMinimumVersion);
            if (!config.tls_ca_cert_file.empty()) {
                tls_context_->load_verify_file(config.tls_ca_cert_file);
                tls_context_->set_verify_mode(asio::ssl::verify_peer);
            } else {
                tls_context_->set_verify_mode(asio::ssl::verify_none);
            }
            if (!config.tls_cert_file.empty() && !config.tls_key_file.empty()) {
                tls_context_->use_certificate_chain_file(config.tls_cert_file);
                tls_context_->use_private_key_file(config.tls_key_file, asio::ssl::context::pem);
            }
            tls_.emplace(io_, *tls_context_);
            // SNI for a name; an address is not sent (RFC 6066).
            error_code not_address;
            asio::ip::make_address(host, not_address);
            if (not_address) SSL_set_tlsext_host_name(tls_->native_handle(), host.c_str());
        } catch (const boost::system::system_error& e) {
            return core::Error{"TLS set-up: " + e.code().message()};
        }
        return {};
    }

    asio::ip::tcp::socket& socket() { return tls_ ? tls_->next_layer() : plain_; }

    error_code connect(const std::string& host, const std::string& port) {
        asio::ip::tcp::resolver resolver(io_);
        asio::ip::tcp::resolver::results_type endpoints;
        error_code error = run([&](auto done) {
            resolver.async_resolve(
                host, port,
                [&endpoints, done](const error_code& e, asio::ip::tcp::resolver::results_type r) {
                    endpoints = std::move(r);
                    done(e);
                });
        });
        if (error) return error;
        error = run([&](auto done) {
            asio::async_connect(
                socket(), endpoints,
                [done](const error_code& e, const asio::ip::tcp::endpoint&) { done(e); });
        });
        if (error || !tls_) return error;
        return run([&](auto done) {
            tls_->async_handshake(asio::ssl::stream_base::client,
                                  [done](const error_code& e) { done(e); });
        });
    }

    error_code write(const std::string& bytes) {
        return run([&](auto done) {
            auto handler = [done](const error_code& e, std::size_t) { done(e); };
            if (tls_) {
                asio::async_write(*tls_, asio::buffer(bytes), handler);
            } else {
                asio::async_write(plain_, asio::buffer(bytes), handler);
            }
        });
    }

    // One reply line, without its CR LF.
    error_code read_line(std::string& line) {
        std::size_t length = 0;
        error_code error = run([&](auto done) {
            auto handler = [&length, done](const error_code& e, std::size_t n) {
                length = n;
                done(e);
            };
            auto buffer = asio::dynamic_buffer(input_, kMaxReplyLine);
            if (tls_) {
                asio::async_read_until(*tls_, buffer, "\r\n", handler);
            } else {
                asio::async_read_until(plain_, buffer, "\r\n", handler);
            }
        });
        if (error) return error;
        line = input_.substr(0, length - 2);
        input_.erase(0, length);
        return {};
    }

private:
    template <class Start>
    error_code run(Start start) {
        error_code result = asio::error::would_block;
        start([&result](const error_code& e) { result = e; });
        io_.restart();
        io_.run_until(deadline_);
        if (result == asio::error::would_block) {
            // Past the deadline: end the operation and let its handler run.
            error_code ignored;
            socket().close(ignored);
            io_.restart();
            io_.run();
            return asio::error::timed_out;
        }
        return result;
    }

    std::chrono::steady_clock::time_point deadline_;
    asio::io_context io_;
    asio::ip::tcp::socket plain_{io_};
    std::optional<asio::ssl::context> tls_context_;
    std::optional<asio::ssl::stream<asio::ip::tcp::socket>> tls_;
    std::string input_;
};

bool split_target(std::string_view target, std::string& host, std::string& port) {
    const std::size_t colon = target.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == target.size()) return false;
    std::string_view h = target.substr(0, colon);
    if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    host.assign(h);
    port.assign(target.substr(colon + 1));
    return port.find_first_not_of("0123456789") == std::string::npos && port.size() <= 5;
}

// ", role master" (ROLE's first element) and, in cluster mode,
// ", cluster_state ok" (CLUSTER INFO's first line); empty where the server
// does not say (a user without the right to ask).
std::string describe_role(Client& client) {
    std::string out, line;
    if (client.write(resp::encode_command({"CLUSTER", "INFO"})) || client.read_line(line)) {
        return out;
    }
    if (line.starts_with('$')) {
        std::size_t left = std::strtoul(line.c_str() + 1, nullptr, 10) + 2;
        while (left > 0 && !client.read_line(line)) {
            if (line.starts_with("cluster_state:")) {
                out = ", cluster_state " + core::printable(line.substr(14), kQuotedBytes);
            }
            left -= std::min(left, line.size() + 2);
        }
        if (left > 0) return {};
    }
    if (client.write(resp::encode_command({"ROLE"})) || client.read_line(line) ||
        !line.starts_with('*') || client.read_line(line) || !line.starts_with('$') ||
        client.read_line(line)) {
        return out;
    }
    return ", role " + core::printable(line, kQuotedBytes) + out;
}

}  // namespace

core::Result<std::string> health_check(std::string_view target, const core::Config& config,
                                       const HealthCheckOptions& options) {
    std::string host, port;
    if (!split_target(target, host, port)) {
        return core::Error{"expected HOST:PORT (e.g. 127.0.0.1:6379), got '" +
                           core::printable(target, kQuotedBytes) + "'"};
    }
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(options.timeout_seconds));
    const bool tls = options.transport == HealthCheckOptions::Transport::tls;
    const std::string where = std::string(target) + (tls ? " (TLS)" : "");
    Client client(deadline);
    if (tls) {
        if (core::Status ready = client.use_tls(config, host); !ready) return ready.failure();
    }
    if (const error_code error = client.connect(host, port)) {
        return core::Error{"cannot connect to " + where + ": " + error.message()};
    }
    std::string line;
    if (!config.requirepass.empty()) {
        if (error_code error = client.write(resp::encode_command({"AUTH", config.requirepass}));
            error || (error = client.read_line(line))) {
            return core::Error{where + ": AUTH: " + error.message()};
        }
        if (line != "+OK") {
            return core::Error{where +
                               " refused the password: " + core::printable(line, kQuotedBytes)};
        }
    }
    if (error_code error = client.write(resp::encode_command({"PING"}));
        error || (error = client.read_line(line))) {
        return core::Error{where + ": PING: " + error.message()};
    }
    if (line != "+PONG") {
        return core::Error{where + " answered PING with " + core::printable(line, kQuotedBytes)};
    }
    return where + ": PONG" + describe_role(client);
}

}  // namespace bloomery::net
