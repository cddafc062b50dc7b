#pragma once
// The monitoring HTTP listener (--metrics-port, off by default): GET /metrics
// (Prometheus text), /healthz (200 while the process serves) and /readyz (200
// once the data is loaded and the RESP listeners accept, 503 before and while
// shutting down). HEAD works for each; anything else is 404 or 405.
//
// It runs on its own thread and io_context, so a slow scrape or a hostile
// client never holds up a command worker. What a client can make it hold is
// bounded: at most --metrics-max-connections connections (more are closed at
// once), --metrics-max-request-bytes of request line and headers (more: 431),
// no request body, and --metrics-request-timeout to send a whole request or
// to read the reply (a slowloris is closed when it runs out).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "bloomery/core/config.hpp"

namespace bloomery::net {

class MetricsServer {
public:
    // `render` returns the /metrics text and `ready` answers /readyz; both
    // are called on the metrics thread.
    MetricsServer(const core::Config& config, std::function<std::string()> render,
                  std::function<bool()> ready);
    ~MetricsServer();
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    // Binds --metrics-bind:--metrics-port and starts the thread. Throws
    // std::runtime_error "cannot listen on ADDR:PORT (metrics): ..." if the
    // address cannot be bound.
    void start();
    // Closes the listener and every connection and joins the thread.
    void stop();
    // The bound port (the configured one, or the kernel's for port 0 in tests).
    std::uint16_t port() const { return port_; }
    // Connections open now (for tests).
    std::size_t open_connections() const { return open_.load(std::memory_order_relaxed); }

private:
    class Session;
    void accept_next();

    const core::Config& config_;
    std::function<std::string()> render_;
    std::function<bool()> ready_;
    // Written on the metrics thread only. Declared before context_: sessions
    // still open at stop() are destroyed with it, and uncount themselves.
    std::atomic<std::size_t> open_{0};
    boost::asio::io_context context_{1};
    boost::asio::ip::tcp::acceptor acceptor_;
    std::thread thread_;
    std::uint16_t port_ = 0;
};

}  // namespace bloomery::net
