// The streams a connection runs over (connection.hpp): plain TCP, and TLS
// over TCP with a handshake deadline. Each supplies the three transport
// functions; everything else is the Connection's.

#include <spdlog/spdlog.h>

#include "connection.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Shuts a TCP socket down both ways and closes it; pending operations on it
// complete with operation_aborted.
void close_socket(asio::ip::tcp::socket& socket) {
    error_code ignored;
    socket.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
}

// Reads and writes over `Stream`: a TCP socket, or TLS over one.
template <class Stream>
class StreamConnection : public Connection {
protected:
    // The stream is made of `socket` and `stream_arguments`.
    template <class... StreamArguments>
    StreamConnection(const ConnectionEnvironment& environment, Worker& worker,
                     asio::ip::tcp::socket socket, std::int64_t id, ClientSlot slot,
                     StreamArguments&&... stream_arguments)
        : Connection(environment, worker, socket, id, std::move(slot)),
          stream_(std::move(socket), std::forward<StreamArguments>(stream_arguments)...) {}

    void start_read(asio::mutable_buffer buffer) override {
        stream_.async_read_some(
            buffer, [this, self = shared_from_this()](const error_code& error, std::size_t bytes) {
                on_read(error, bytes);
            });
    }
    void start_write(asio::const_buffer buffer) override {
        asio::async_write(
            stream_, buffer,
            [this, self = shared_from_this()](const error_code& error, std::size_t bytes) {
                on_write(error, bytes);
            });
    }

    Stream stream_;
};

class PlainConnection final : public StreamConnection<asio::ip::tcp::socket> {
public:
    PlainConnection(const ConnectionEnvironment& environment, Worker& worker,
                    asio::ip::tcp::socket socket, std::int64_t id, ClientSlot slot)
        : StreamConnection(environment, worker, std::move(socket), id, std::move(slot)) {}

    void start() override {
        track();
        serve();
    }

private:
    void close_transport() override { close_socket(stream_); }
};

class TlsConnection final : public StreamConnection<asio::ssl::stream<asio::ip::tcp::socket>> {
public:
    TlsConnection(const ConnectionEnvironment& environment, Worker& worker,
                  asio::ip::tcp::socket socket, std::int64_t id, asio::ssl::context& tls_context,
                  ClientSlot slot)
        : StreamConnection(environment, worker, std::move(socket), id, std::move(slot),
                           tls_context),
          handshake_deadline_(executor()) {}

    void start() override {
        // Tracked from the start: a client still in its handshake counts
        // toward maxclients, shows in CLIENT LIST and is closed at shutdown.
        track();
        handshake_deadline_.expires_after(std::chrono::duration_cast<asio::steady_timer::duration>(
            std::chrono::duration<double>(env_.config.tls_handshake_timeout_seconds)));
        handshake_deadline_.async_wait([this, self = shared_from_this()](const error_code& error) {
            if (error || closed()) return;  // cancelled: the handshake ended first
            spdlog::debug("closing client id={} addr={}: TLS handshake not finished in time",
                          client_.id, client_.address);
            close();
        });
        stream_.async_handshake(asio::ssl::stream_base::server, [this, self = shared_from_this()](
                                                                    const error_code& error) {
            handshake_deadline_.cancel();
            if (closed()) return;
            if (error) {
                // A plaintext client on the TLS port, an old protocol version,
                // a missing or untrusted client certificate: only this
                // connection ends. Debug level: anyone can cause it.
                spdlog::debug("TLS handshake failed for client id={} addr={}: {}", client_.id,
                              client_.address, error.message());
                close();
                return;
            }
            serve();
        });
    }

private:
    // No TLS close_notify: sending it could wait on a peer that does not
    // read, and every command's reply is complete on its own. Closing the
    // socket ends the handshake, read or write in flight.
    void close_transport() override {
        handshake_deadline_.cancel();
        close_socket(stream_.next_layer());
    }

    asio::steady_timer handshake_deadline_;
};

}  // namespace

std::shared_ptr<Connection> make_plain_connection(const ConnectionEnvironment& environment,
                                                  Worker& worker, asio::ip::tcp::socket socket,
                                                  std::int64_t id, ClientSlot slot) {
    return std::make_shared<PlainConnection>(environment, worker, std::move(socket), id,
                                             std::move(slot));
}

std::shared_ptr<Connection> make_tls_connection(const ConnectionEnvironment& environment,
                                                Worker& worker, asio::ip::tcp::socket socket,
                                                std::int64_t id, asio::ssl::context& tls_context,
                                                ClientSlot slot) {
    return std::make_shared<TlsConnection>(environment, worker, std::move(socket), id, tls_context,
                                           std::move(slot));
}

}  // namespace bloomery::net
