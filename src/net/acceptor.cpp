// The listeners (acceptor.hpp).

#include "acceptor.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/net/tls.hpp"
#include "connection.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Redis counts only 127.0.0.1 and ::1 as local (127.0.0.2 is not); an IPv4
// client of a dual-stack socket shows as ::ffff:127.0.0.1 and is local too.
bool is_loopback_peer(const asio::ip::tcp::socket& socket) {
    error_code error;
    const asio::ip::address peer = socket.remote_endpoint(error).address();
    if (error) return false;
    if (peer.is_v4()) return peer.to_v4() == asio::ip::address_v4::loopback();
    const asio::ip::address_v6 v6 = peer.to_v6();
    if (v6.is_v4_mapped()) {
        return asio::ip::make_address_v4(asio::ip::v4_mapped, v6) ==
               asio::ip::address_v4::loopback();
    }
    return v6 == asio::ip::address_v6::loopback();
}

void open_listener(asio::ip::tcp::acceptor& listener, const std::string& bind, std::uint16_t port) {
    try {
        const asio::ip::tcp::endpoint endpoint(asio::ip::make_address(bind), port);
        listener.open(endpoint.protocol());
        listener.set_option(asio::ip::tcp::acceptor::reuse_address(true));
        listener.bind(endpoint);
        listener.listen(511);  // Redis's tcp-backlog default
    } catch (const boost::system::system_error& e) {
        throw std::runtime_error("cannot listen on " + bind + ":" + std::to_string(port) + ": " +
                                 e.code().message());
    }
}

}  // namespace

Acceptor::Acceptor(const ConnectionEnvironment& environment, asio::io_context& main)
    : env_(environment), main_(main), plain_(main), tls_(main) {}

void Acceptor::listen() {
    const core::Config& config = env_.config;
    if (config.tls_port != 0) tls_context_ = make_tls_context(config);
    if (config.port != 0) open_listener(plain_, config.bind, config.port);
    if (config.tls_port != 0) open_listener(tls_, config.bind, config.tls_port);
}

void Acceptor::start() {
    if (plain_.is_open()) accept_next(plain_, Security::plain);
    if (tls_.is_open()) accept_next(tls_, Security::tls);
    started_.store(true, std::memory_order_release);
}

void Acceptor::close() {
    error_code ignored;
    plain_.close(ignored);
    tls_.close(ignored);
}

void Acceptor::accept_next(asio::ip::tcp::acceptor& listener, Security security) {
    Worker& worker = env_.pool.next_worker();
    listener.async_accept(worker.context, [this, &listener, security, &worker](
                                              const error_code& error,
                                              asio::ip::tcp::socket socket) {
        if (error) {
            // Closed: the server is stopping.
            if (error == asio::error::operation_aborted || !listener.is_open()) return;
            // EMFILE and friends: log, back off briefly, keep accepting.
            spdlog::warn("accept failed: {}", error.message());
            auto timer = std::make_shared<asio::steady_timer>(main_, std::chrono::milliseconds(50));
            timer->async_wait([this, &listener, security, timer](const error_code&) {
                accept_next(listener, security);
            });
            return;
        }
        admit(worker, std::move(socket), security);
        accept_next(listener, security);
    });
}

void Acceptor::admit(Worker& worker, asio::ip::tcp::socket socket, Security security) {
    // The slot is taken here, before the connection exists on its worker,
    // so a burst of connects cannot pass --maxclients between the check
    // and the count (200 connects at once with --maxclients 5 were served
    // 12 to 93 times when the worker counted them).
    ClientSlot slot = env_.pool.take_client_slot(env_.config.max_clients);
    if (!slot) {
        refuse(worker, socket, security, "-ERR max number of clients reached\r\n");
        return;
    }
    if (env_.config.protected_mode && env_.registry.acl().default_user().nopass() &&
        !is_loopback_peer(socket)) {
        // Protected mode, as Redis: no password, so only local clients.
        refuse(worker, socket, security, command::errors::kProtectedModeDenied);
        return;
    }
    const std::int64_t id = next_client_id_.fetch_add(1);
    // The slot travels with the socket: if the worker stops before this
    // runs, destroying the handler gives it back.
    asio::post(worker.context, [this, &worker, id, security, s = std::move(socket),
                                slot = std::move(slot)]() mutable {
        command::WorkerStats::bump(worker.stats.connections_received);
        if (security == Security::tls) {
            make_tls_connection(env_, worker, std::move(s), id, *tls_context_, std::move(slot))
                ->start();
        } else {
            make_plain_connection(env_, worker, std::move(s), id, std::move(slot))->start();
        }
    });
}

void Acceptor::refuse(Worker& worker, asio::ip::tcp::socket& socket, Security security,
                      std::string_view reply) {
    command::WorkerStats::bump(worker.stats.rejected_connections);
    error_code ignored;
    // A TLS client could not read a plaintext error: it is just closed.
    if (security == Security::plain) asio::write(socket, asio::buffer(reply), ignored);
    socket.close(ignored);
}

}  // namespace bloomery::net
