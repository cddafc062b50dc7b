#pragma once
// The listeners: plaintext --port and TLS --tls-port (either may be off) on
// the main thread. Each accepted socket is admitted (a --maxclients slot,
// protected mode) and handed to the next worker round-robin, which makes
// its connection.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include "connection_environment.hpp"
#include "worker_pool.hpp"

namespace bloomery::net {

class Acceptor {
public:
    // Listens on the main thread's `main`; connections are made with
    // `environment` on the workers of its pool.
    Acceptor(const ConnectionEnvironment& environment, boost::asio::io_context& main);
    Acceptor(const Acceptor&) = delete;
    Acceptor& operator=(const Acceptor&) = delete;

    // Builds the TLS context if --tls-port is set, binds and listens. Throws
    // std::runtime_error naming the address or the TLS file on failure
    // ("cannot listen on ADDR:PORT: ..." for a port that cannot be bound).
    void listen();
    // Accepts on every listener that is open. Once, on the main thread.
    void start();
    // Closes the listeners (a stop). Main thread.
    void close();
    // start() has run. Thread-safe.
    bool started() const { return started_.load(std::memory_order_acquire); }

private:
    // Which listener a socket came from: a TLS client could not read a
    // plaintext refusal, and its connection runs the handshake first.
    enum class Security { plain, tls };

    void accept_next(boost::asio::ip::tcp::acceptor& listener, Security security);
    // A socket accepted for `worker`: refused, or its connection made there.
    void admit(Worker& worker, boost::asio::ip::tcp::socket socket, Security security);
    // Counts a refused connection, says why (`reply`, plaintext only), closes.
    static void refuse(Worker& worker, boost::asio::ip::tcp::socket& socket, Security security,
                       std::string_view reply);

    const ConnectionEnvironment& env_;
    boost::asio::io_context& main_;
    boost::asio::ip::tcp::acceptor plain_;  // open unless --port 0
    boost::asio::ip::tcp::acceptor tls_;    // open if --tls-port is set
    std::unique_ptr<boost::asio::ssl::context> tls_context_;
    std::atomic<std::int64_t> next_client_id_{1};
    std::atomic<bool> started_{false};
};

}  // namespace bloomery::net
