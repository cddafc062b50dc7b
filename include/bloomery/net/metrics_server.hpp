#pragma once
// The monitoring HTTP listener (--metrics-port, off by default): GET /metrics
// (Prometheus text), /healthz (200 while the process serves) and /readyz (200
// once the data is loaded and the RESP listeners accept, 503 before and while
// shutting down). HEAD works for each; anything else is 404 or 405.
//
// It runs on its own thread and io_context, so a slow scrape or a hostile
// client never holds up a command worker. What a client can make it hold is
// bounded: --metrics-max-request-bytes of request line and headers (more:
// 431), no request body, --metrics-request-timeout to send a whole request or
// to read the reply, and connections: at most --metrics-max-connections, and
// --metrics-max-connections-per-client from one address.
//
// A liveness probe must get through whatever else holds connections
// (Kubernetes restarts a pod whose /healthz stops answering): a new
// connection that finds a bound reached always gets in, in the place of the
// connection stalled longest, which is closed: waiting for its request (a
// slow writer) or for its reply to be read (a slow reader, e.g. one that
// pipelines scrapes and never reads). At its address's bound, that
// address's; at the listener's, one of the address holding the most
// connections (the newcomer's counted), so an address with fewer
// connections than another never loses one to it. A probe sends its request
// at once and reads its few bytes of reply, so it is never the one stalled
// longest: slow clients of any address, its own included, never keep it out.

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
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
    // Connections open now.
    std::size_t open_connections() const { return open_.load(std::memory_order_relaxed); }

private:
    class Session;
    void accept_next();
    // Takes `socket` on, closing another connection for it if a bound is
    // reached. Metrics thread.
    void admit(boost::asio::ip::tcp::socket socket);
    // Which sessions may make room for a newcomer: only its address's (at
    // --metrics-max-connections-per-client) or any (at the listener's bound).
    enum class EvictionScope { newcomers_address, any_address };
    // Closes the session stalled longest within `scope` to make room for one
    // from `newcomer`.
    void evict_stalled(const boost::asio::ip::address& newcomer, EvictionScope scope);
    // Sessions register when they start and unregister when they close.
    std::list<Session*>::iterator enter(Session* session, const boost::asio::ip::address& peer);
    void leave(std::list<Session*>::iterator position, const boost::asio::ip::address& peer);

    const core::Config& config_;
    std::function<std::string()> render_;
    std::function<bool()> ready_;
    // Written on the metrics thread only. Declared before context_: sessions
    // still open at stop() are destroyed with it, and unregister themselves.
    std::atomic<std::size_t> open_{0};
    std::list<Session*> sessions_;
    std::map<boost::asio::ip::address, std::size_t> per_client_;
    boost::asio::io_context context_{1};
    boost::asio::ip::tcp::acceptor acceptor_;
    std::thread thread_;
    std::uint16_t port_ = 0;
};

}  // namespace bloomery::net
