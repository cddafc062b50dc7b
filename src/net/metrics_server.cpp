#include "bloomery/net/metrics_server.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>  // before Asio and Beast (Boost 1.74)

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace bloomery::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

// One HTTP connection: reads a request within the deadline, answers it, and
// reads the next one if the client keeps the connection alive. Registered
// with its server (per-address counts, eviction) from construction until it
// closes.
class MetricsServer::Session : public std::enable_shared_from_this<Session> {
public:
    Session(MetricsServer& server, asio::ip::tcp::socket socket, const asio::ip::address& peer)
        : server_(server),
          peer_(peer),
          stream_(std::move(socket)),
          // The buffer's cap bounds what a client makes us hold, whatever the
          // parser's own limit says.
          buffer_(server.config_.metrics_max_request_bytes),
          position_(server.enter(this, peer)) {}

    ~Session() { leave(); }

    const asio::ip::address& peer() const { return peer_; }
    // Since when it has waited for its request (or the rest of one) or for
    // the reply being written to be read: what an eviction compares.
    std::chrono::steady_clock::time_point stalled_since() const { return stalled_since_; }
    // Whether it waits for its reply to be read (else for a request).
    bool writing() const { return writing_; }

    // Ends the connection now; what is pending completes with an error.
    void close() {
        error_code ignored;
        stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
        stream_.socket().close(ignored);
        leave();
    }

    void start() { read(); }

private:
    // What a reply carries beyond its status and body.
    struct ReplyOptions {
        // HEAD: the headers only (Content-Length still the body's).
        enum class Body { sent, headers_only };
        Body body = Body::sent;
        // Whether the connection reads another request after this reply.
        enum class Connection { close, keep_alive };
        Connection connection = Connection::close;
        std::string_view allow;  // the Allow header (405), if any
        std::string_view content_type = "text/plain; charset=utf-8";
    };

    std::chrono::steady_clock::duration timeout() const {
        return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(server_.config_.metrics_request_timeout_seconds));
    }

    void read() {
        stalled_since_ = std::chrono::steady_clock::now();
        writing_ = false;
        parser_.emplace();
        parser_->header_limit(
            static_cast<std::uint32_t>(server_.config_.metrics_max_request_bytes));
        parser_->body_limit(0);  // GET and HEAD carry no body
        // One deadline for the whole request, not per read: a client sending
        // a byte at a time is closed when it runs out (slowloris).
        stream_.expires_after(timeout());
        http::async_read(stream_, buffer_, *parser_,
                         [self = shared_from_this()](const error_code& error, std::size_t) {
                             self->on_read(error);
                         });
    }

    void on_read(const error_code& error) {
        if (error == http::error::header_limit || error == http::error::buffer_overflow) {
            respond(http::status::request_header_fields_too_large, "request too large\n", {});
            return;
        }
        if (error == http::error::body_limit) {
            respond(http::status::payload_too_large, "no request body expected\n", {});
            return;
        }
        if (error) {
            // end_of_stream, timeout, a malformed request: just close. A bad
            // request could get a 400, but nothing useful reads it.
            close();
            return;
        }
        const http::request<http::empty_body>& request = parser_->get();
        const bool head = request.method() == http::verb::head;
        ReplyOptions options;
        options.connection = request.keep_alive() ? ReplyOptions::Connection::keep_alive
                                                  : ReplyOptions::Connection::close;
        if (request.method() != http::verb::get && !head) {
            options.allow = "GET, HEAD";
            respond(http::status::method_not_allowed, "only GET and HEAD\n", options);
            return;
        }
        if (head) options.body = ReplyOptions::Body::headers_only;
        const beast::string_view raw_target = request.target();
        std::string_view target(raw_target.data(), raw_target.size());
        target = target.substr(0, target.find('?'));
        if (target == "/metrics") {
            options.content_type = "text/plain; version=0.0.4; charset=utf-8";
            respond(http::status::ok, server_.render_(), options);
        } else if (target == "/healthz") {
            respond(http::status::ok, "ok\n", options);
        } else if (target == "/readyz") {
            const bool ready = server_.ready_();
            respond(ready ? http::status::ok : http::status::service_unavailable,
                    ready ? "ready\n" : "not ready\n", options);
        } else {
            respond(http::status::not_found, "not found: try /metrics, /healthz or /readyz\n",
                    options);
        }
    }

    void respond(http::status status, std::string body, const ReplyOptions& options) {
        const bool keep_alive = options.connection == ReplyOptions::Connection::keep_alive;
        auto response = std::make_shared<http::response<http::string_body>>(status, 11);
        response->set(http::field::server, "bloomery");
        response->set(http::field::content_type,
                      beast::string_view(options.content_type.data(), options.content_type.size()));
        if (!options.allow.empty()) {
            response->set(http::field::allow,
                          beast::string_view(options.allow.data(), options.allow.size()));
        }
        response->keep_alive(keep_alive);
        response->content_length(body.size());
        if (options.body == ReplyOptions::Body::sent) response->body() = std::move(body);
        // The reply must be read within the deadline too: a client that
        // never reads cannot keep the connection (and the /metrics text).
        stream_.expires_after(timeout());
        stalled_since_ = std::chrono::steady_clock::now();
        writing_ = true;
        http::async_write(stream_, *response,
                          [self = shared_from_this(), response, keep_alive](const error_code& error,
                                                                            std::size_t) {
                              if (error || !keep_alive) {
                                  self->close();
                                  return;
                              }
                              self->read();
                          });
    }

    // Gives the slot back, once.
    void leave() {
        if (!registered_) return;
        registered_ = false;
        server_.leave(position_, peer_);
    }

    MetricsServer& server_;
    const asio::ip::address peer_;
    beast::tcp_stream stream_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::empty_body>> parser_;
    std::list<Session*>::iterator position_;
    bool registered_ = true;
    std::chrono::steady_clock::time_point stalled_since_;
    bool writing_ = false;
};

MetricsServer::MetricsServer(const core::Config& config, std::function<std::string()> render,
                             std::function<bool()> ready)
    : config_(config), render_(std::move(render)), ready_(std::move(ready)), acceptor_(context_) {}

MetricsServer::~MetricsServer() {
    stop();
}

void MetricsServer::start() {
    const std::string& bind = config_.metrics_bind_address();
    try {
        const asio::ip::tcp::endpoint endpoint(asio::ip::make_address(bind), config_.metrics_port);
        acceptor_.open(endpoint.protocol());
        acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true));
        acceptor_.bind(endpoint);
        acceptor_.listen(64);
        port_ = acceptor_.local_endpoint().port();
    } catch (const boost::system::system_error& e) {
        throw std::runtime_error("cannot listen on " + bind + ":" +
                                 std::to_string(config_.metrics_port) +
                                 " (metrics): " + e.code().message());
    }
    accept_next();
    thread_ = std::thread([this] { context_.run(); });
}

void MetricsServer::stop() {
    if (!thread_.joinable()) return;
    context_.stop();
    thread_.join();
    // The thread is gone: nothing else touches the acceptor now.
    error_code ignored;
    acceptor_.close(ignored);
}

void MetricsServer::accept_next() {
    acceptor_.async_accept([this](const error_code& error, asio::ip::tcp::socket socket) {
        if (error == asio::error::operation_aborted) return;
        if (error) {
            // EMFILE and friends: try again shortly rather than spin.
            spdlog::warn("metrics: accept failed: {}", error.message());
            auto timer =
                std::make_shared<asio::steady_timer>(context_, std::chrono::milliseconds(50));
            timer->async_wait([this, timer](const error_code&) { accept_next(); });
            return;
        }
        admit(std::move(socket));
        accept_next();
    });
}

void MetricsServer::admit(asio::ip::tcp::socket socket) {
    error_code error;
    const asio::ip::address peer = socket.remote_endpoint(error).address();
    if (error) return;  // gone already; the socket closes here
    const auto client = per_client_.find(peer);
    const std::size_t from_client = client == per_client_.end() ? 0 : client->second;
    if (from_client >= config_.metrics_max_connections_per_client) {
        evict_stalled(peer, EvictionScope::newcomers_address);
    } else if (open_.load(std::memory_order_relaxed) >= config_.metrics_max_connections) {
        evict_stalled(peer, EvictionScope::any_address);
    }
    std::make_shared<Session>(*this, std::move(socket), peer)->start();
}

namespace {
// Of two sessions of one load, the one to close first: stalled writing a
// reply before waiting for a request, then the one stalled longer.
template <class Session>
bool stalls_worse(const Session& a, const Session& b) {
    if (a.writing() != b.writing()) return a.writing();
    return a.stalled_since() < b.stalled_since();
}
}  // namespace

void MetricsServer::evict_stalled(const asio::ip::address& newcomer, EvictionScope scope) {
    // The victim comes from the address that holds the most connections
    // (counting the newcomer's), so a client with fewer than others (a
    // kubelet's probe among many slow clients) never loses its one; among
    // that address's, the one stalled longest: waiting for its request
    // (slow writers) or for its reply to be read (slow readers: eight
    // connections pipelining 200 scrapes each and never reading once held
    // every slot of their address until the request timeout), those
    // stalled writing a reply first: a probe is never that one while others
    // stall writing (it sends its request at once and its reply of a few
    // bytes fits any socket buffer), even when a busy server has not yet
    // read its request and it has waited longer than a slow reader that
    // reconnected since. There is always a victim: the bound reached is held
    // by sessions of the scope searched.
    // At most --metrics-max-connections sessions: a scan per connection
    // that arrives at a bound is cheap.
    Session* victim = nullptr;
    std::size_t victim_load = 0;
    for (Session* session : sessions_) {
        const bool same = session->peer() == newcomer;
        if (scope == EvictionScope::newcomers_address && !same) continue;
        const std::size_t load = per_client_[session->peer()] + (same ? 1 : 0);
        if (victim == nullptr || load > victim_load ||
            (load == victim_load && stalls_worse(*session, *victim))) {
            victim = session;
            victim_load = load;
        }
    }
    if (victim == nullptr) return;
    spdlog::debug("metrics: closing the longest stalled connection from {} for one from {}",
                  victim->peer().to_string(), newcomer.to_string());
    victim->close();
}

std::list<MetricsServer::Session*>::iterator MetricsServer::enter(Session* session,
                                                                  const asio::ip::address& peer) {
    ++per_client_[peer];
    open_.store(open_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return sessions_.insert(sessions_.end(), session);
}

void MetricsServer::leave(std::list<Session*>::iterator position, const asio::ip::address& peer) {
    sessions_.erase(position);
    const auto client = per_client_.find(peer);
    if (client != per_client_.end() && --client->second == 0) per_client_.erase(client);
    open_.store(open_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

}  // namespace bloomery::net
