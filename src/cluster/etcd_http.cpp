#include "etcd_http.hpp"

// Boost 1.74's Asio uses std::exchange without including <utility>.
#include <utility>

#include <openssl/ssl.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <array>
#include <limits>
#include <optional>

namespace bloomery::cluster::etcd_http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// What a transport error says about the endpoint, in one line.
core::Error transport_error(const EtcdEndpoint& endpoint, std::string_view step,
                            const beast::error_code& ec) {
    std::string reason = ec == beast::error::timeout ? std::string("timed out") : ec.message();
    return core::Error{std::string(step) + " " + endpoint.url + ": " + reason};
}

}  // namespace

core::Result<std::shared_ptr<asio::ssl::context>> make_tls_context(const EtcdSettings& settings) {
    auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
    beast::error_code ec;
    context->set_verify_mode(asio::ssl::verify_peer, ec);
    if (settings.ca_file.empty()) {
        context->set_default_verify_paths(ec);
    } else {
        context->load_verify_file(settings.ca_file, ec);
    }
    if (ec) {
        return core::Error{"cannot load etcd CA file " + settings.ca_file + ": " + ec.message()};
    }
    if (!settings.cert_file.empty()) {
        context->use_certificate_chain_file(settings.cert_file, ec);
        if (ec) {
            return core::Error{"cannot load etcd client certificate " + settings.cert_file + ": " +
                               ec.message()};
        }
        context->use_private_key_file(settings.key_file, asio::ssl::context::pem, ec);
        if (ec) {
            return core::Error{"cannot load etcd client key " + settings.key_file + ": " +
                               ec.message()};
        }
    }
    return context;
}

struct Connection::State {
    asio::io_context io;
    asio::ssl::context* tls_context = nullptr;
    std::chrono::milliseconds timeout;
    std::optional<beast::tcp_stream> plain;
    std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
    beast::flat_buffer buffer;
    // The stream being read (open_stream) and the read still in flight.
    std::optional<http::response_parser<http::buffer_body>> stream;
    std::array<char, 16384> chunk{};
    bool read_pending = false;
    bool read_done = false;
    beast::error_code read_error;

    bool connected() const { return plain.has_value() || tls.has_value(); }
    beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }

    // Runs `op(stream, handler)` on whichever stream is open, to completion:
    // the deadline set on the lowest layer bounds it.
    template <class Op>
    beast::error_code run(Op op) {
        beast::error_code result;
        auto handler = [&result](beast::error_code ec, std::size_t = 0) { result = ec; };
        if (tls) {
            op(*tls, handler);
        } else {
            op(*plain, handler);
        }
        io.restart();
        io.run();
        return result;
    }

    void close() {
        if (connected()) {
            beast::error_code ignored;
            lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
            lowest().close();
            io.restart();
            io.run();  // the handlers of what was in flight, cancelled
        }
        stream.reset();
        read_pending = false;
        tls.reset();
        plain.reset();
        buffer.clear();
    }
};

Connection::Connection(EtcdEndpoint endpoint, asio::ssl::context* tls,
                       std::chrono::milliseconds timeout)
    : endpoint_(std::move(endpoint)), state_(std::make_unique<State>()) {
    state_->tls_context = tls;
    state_->timeout = timeout;
}

Connection::~Connection() {
    // Closing runs what was in flight to its cancellation; nothing of that
    // may leave a destructor.
    try {
        state_->close();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the connection is gone either way
    }
}

bool Connection::connected() const {
    return state_->connected();
}

void Connection::close() {
    state_->close();
}

namespace {

// The addresses of `endpoint`: an IP address as it is, a name through the
// system's resolver (bounded by the resolver's own timeouts, not ours).
core::Result<tcp::resolver::results_type> resolve(asio::io_context& io,
                                                  const EtcdEndpoint& endpoint) {
    tcp::resolver resolver(io);
    beast::error_code ec;
    auto results = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
    if (ec) return transport_error(endpoint, "cannot resolve", ec);
    return results;
}

bool is_ip_address(const std::string& host) {
    beast::error_code ec;
    asio::ip::make_address(host, ec);
    return !ec;
}

core::Status connect(Connection::State& state, const EtcdEndpoint& endpoint,
                     Clock::time_point deadline) {
    auto addresses = resolve(state.io, endpoint);
    if (!addresses) return addresses.failure();
    if (endpoint.tls) {
        state.tls.emplace(state.io, *state.tls_context);
    } else {
        state.plain.emplace(state.io);
    }
    state.lowest().expires_at(deadline);
    beast::error_code ec;
    state.lowest().async_connect(*addresses,
                                 [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
    state.io.restart();
    state.io.run();
    if (ec) {
        state.close();
        return transport_error(endpoint, "cannot connect to", ec);
    }
    if (!endpoint.tls) return {};
    SSL* ssl = state.tls->native_handle();
    // SNI for a name; the certificate must name the host (or its address).
    if (!is_ip_address(endpoint.host)) SSL_set_tlsext_host_name(ssl, endpoint.host.c_str());
    state.tls->set_verify_callback(asio::ssl::host_name_verification(endpoint.host));
    state.lowest().expires_at(deadline);
    state.tls->async_handshake(asio::ssl::stream_base::client,
                               [&ec](beast::error_code e) { ec = e; });
    state.io.restart();
    state.io.run();
    if (ec) {
        state.close();
        return transport_error(endpoint, "TLS handshake failed with", ec);
    }
    return {};
}

http::request<http::string_body> make_request(const EtcdEndpoint& endpoint, std::string_view target,
                                              std::string_view body, std::string_view token) {
    http::request<http::string_body> request{http::verb::post,
                                             beast::string_view(target.data(), target.size()), 11};
    const bool ipv6 = endpoint.host.find(':') != std::string::npos;
    request.set(http::field::host, (ipv6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" +
                                       std::to_string(endpoint.port));
    request.set(http::field::content_type, "application/json");
    if (!token.empty()) {
        request.set(http::field::authorization, beast::string_view(token.data(), token.size()));
    }
    request.keep_alive(true);
    request.body() = std::string(body);
    request.prepare_payload();
    return request;
}

core::Error size_error(const EtcdEndpoint& endpoint) {
    return core::Error{"the answer of " + endpoint.url + " is larger than " +
                       std::to_string(kMaxEtcdResponseBytes >> 20) + " MiB"};
}

}  // namespace

core::Result<Answer> Connection::post(std::string_view target, std::string_view body,
                                      std::string_view token) {
    State& state = *state_;
    if (state.stream) state.close();  // a stream's connection carries nothing else
    const auto deadline = Clock::now() + state.timeout;
    if (!state.connected()) {
        if (auto connected = connect(state, endpoint_, deadline); !connected) {
            return connected.failure();
        }
    }
    auto request = make_request(endpoint_, target, body, token);
    state.lowest().expires_at(deadline);
    auto ec =
        state.run([&](auto& stream, auto handler) { http::async_write(stream, request, handler); });
    if (ec) {
        state.close();
        return transport_error(endpoint_, "cannot send to", ec);
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxEtcdResponseBytes);
    state.lowest().expires_at(deadline);
    ec = state.run([&](auto& stream, auto handler) {
        http::async_read_header(stream, state.buffer, parser, handler);
    });
    // Beast's body limit catches a chunked body as it grows; a declared
    // length over it is refused here, before any of it is read.
    if (!ec && parser.content_length().value_or(0) > kMaxEtcdResponseBytes) {
        ec = http::error::body_limit;
    }
    if (!ec) {
        ec = state.run([&](auto& stream, auto handler) {
            http::async_read(stream, state.buffer, parser, handler);
        });
    }
    if (ec) {
        state.close();
        if (ec == http::error::body_limit) return size_error(endpoint_);
        return transport_error(endpoint_, "no answer from", ec);
    }
    if (!parser.get().keep_alive()) state.close();
    return Answer{parser.get().result_int(), std::move(parser.get().body())};
}

core::Result<Answer> Connection::open_stream(std::string_view target, std::string_view body,
                                             std::string_view token) {
    State& state = *state_;
    state.close();  // a stream has a connection of its own, fresh
    const auto deadline = Clock::now() + state.timeout;
    if (auto connected = connect(state, endpoint_, deadline); !connected) {
        return connected.failure();
    }
    auto request = make_request(endpoint_, target, body, token);
    state.lowest().expires_at(deadline);
    auto ec =
        state.run([&](auto& stream, auto handler) { http::async_write(stream, request, handler); });
    if (!ec) {
        state.stream.emplace();
        state.stream->body_limit(std::numeric_limits<std::uint64_t>::max());
        state.lowest().expires_at(deadline);
        ec = state.run([&](auto& stream, auto handler) {
            http::async_read_header(stream, state.buffer, *state.stream, handler);
        });
    }
    if (ec) {
        state.close();
        return transport_error(endpoint_, "no answer from", ec);
    }
    Answer answer{state.stream->get().result_int(), {}};
    if (answer.status == 200) return answer;
    // A refusal: its body is etcd's error object, small; read it whole,
    // within one more timeout.
    const auto body_deadline = Clock::now() + state.timeout;
    while (!state.stream->is_done() && Clock::now() < body_deadline) {
        auto read = read_stream(answer.body, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 body_deadline - Clock::now()));
        if (!read || *read == StreamRead::nothing_yet) break;
        if (answer.body.size() > kMaxEtcdResponseBytes) break;
    }
    state.close();
    return answer;
}

core::Result<StreamRead> Connection::read_stream(std::string& out, std::chrono::milliseconds wait) {
    State& state = *state_;
    if (!state.stream) return core::Error{"no stream is open to " + endpoint_.url};
    if (!state.read_pending) {
        if (state.stream->is_done()) return core::Error{endpoint_.url + " ended the stream"};
        auto& body = state.stream->get().body();
        body.data = state.chunk.data();
        body.size = state.chunk.size();
        state.read_pending = true;
        state.read_done = false;
        // No deadline on the socket: a watch may be quiet for hours. The
        // caller's wait is bounded by run_for below instead.
        state.lowest().expires_never();
        auto handler = [&state](beast::error_code ec, std::size_t) {
            state.read_error = ec;
            state.read_done = true;
        };
        if (state.tls) {
            http::async_read_some(*state.tls, state.buffer, *state.stream, handler);
        } else {
            http::async_read_some(*state.plain, state.buffer, *state.stream, handler);
        }
    }
    state.io.restart();
    state.io.run_for(wait);
    if (!state.read_done) return StreamRead::nothing_yet;
    state.read_pending = false;
    if (state.read_error && state.read_error != http::error::need_buffer) {
        auto error = transport_error(endpoint_, "the stream broke from", state.read_error);
        state.close();
        return error;
    }
    const std::size_t received = state.chunk.size() - state.stream->get().body().size;
    out.append(state.chunk.data(), received);
    return StreamRead::data;
}

}  // namespace bloomery::cluster::etcd_http
