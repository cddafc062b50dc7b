#pragma once
// HTTP/1.1 (or HTTPS) to one etcd endpoint: one kept-alive connection, a
// request with its whole answer, or a request whose answer is a stream read
// piece by piece (watch). Every wait is bounded; nothing here retries.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "bloomery/cluster/etcd.hpp"
#include "bloomery/core/result.hpp"

namespace boost::asio::ssl {
class context;
}

namespace bloomery::cluster::etcd_http {

// The client's TLS settings (EtcdSettings' files), made once per client and
// shared by its connections.
core::Result<std::shared_ptr<boost::asio::ssl::context>> make_tls_context(
    const EtcdSettings& settings);

struct Answer {
    unsigned status = 0;  // HTTP status
    std::string body;
};

// Whether a stream had bytes for the reader in time.
enum class StreamRead { data, nothing_yet };

// Thread safety: one thread at a time.
class Connection {
public:
    // `tls` must be set for an https endpoint and outlive the connection.
    Connection(EtcdEndpoint endpoint, boost::asio::ssl::context* tls,
               std::chrono::milliseconds timeout);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    const EtcdEndpoint& endpoint() const { return endpoint_; }
    // Whether a connection is open (kept alive from an earlier request).
    bool connected() const;

    // POSTs `body` (JSON) to `target` and reads the whole answer, connecting
    // first when not connected; within the timeout. A failure closes the
    // connection (the next call connects again).
    core::Result<Answer> post(std::string_view target, std::string_view body,
                              std::string_view token);

    // Starts a streamed POST: sends it and reads the answer's header. On a
    // status other than 200 the whole (bounded) body comes back and the
    // stream is closed; on 200 the body is empty and read_stream() reads it.
    core::Result<Answer> open_stream(std::string_view target, std::string_view body,
                                     std::string_view token);
    // Appends the stream's next bytes to `out`, waiting at most `wait`; an
    // error when the stream ended or broke.
    core::Result<StreamRead> read_stream(std::string& out, std::chrono::milliseconds wait);

    void close();

    struct State;  // the sockets and buffers (etcd_http.cpp)

private:
    EtcdEndpoint endpoint_;
    std::unique_ptr<State> state_;
};

}  // namespace bloomery::cluster::etcd_http
