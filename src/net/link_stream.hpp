#pragma once
// A connection this server opens itself (a replica's link to its primary,
// MIGRATE's to a target): plain TCP, or TLS over TCP when given a client
// context (tls.hpp: make_tls_client_context). The owner connects socket()
// with Asio as before, then calls async_handshake, which for TLS verifies
// the peer's certificate chain before a byte of the owner's is sent; reads
// and writes then go through the stream, whichever it is.
//
// Not thread-safe: one io_context thread uses it. Every handler keeps the
// stream it was started on alive until it has run, so reset() may replace
// the stream while operations of the old one are still completing (with
// operation_aborted, after close()).

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

namespace bloomery::net {

class LinkStream {
public:
    using Done = std::function<void(const boost::system::error_code&)>;
    using Transferred = std::function<void(const boost::system::error_code&, std::size_t)>;

    // `tls_context` null: plain TCP. The context must outlive the stream.
    LinkStream(boost::asio::io_context& io, boost::asio::ssl::context* tls_context);

    bool tls() const { return tls_context_ != nullptr; }
    // A fresh, closed socket (and TLS session) for the next connection; the
    // current one is closed.
    void reset();
    // The TCP socket under the stream: connect it, set its options.
    boost::asio::ip::tcp::socket& socket();
    // Closes the TCP socket: operations in flight end with an error. No TLS
    // close_notify is sent (it could wait on a peer that reads nothing).
    void close();

    // Once socket() is connected: the TLS client handshake (`server_name`
    // goes as SNI when it is a name, not an address), or nothing for plain
    // TCP; `done` runs on the io_context either way.
    void async_handshake(const std::string& server_name, Done done);
    // Why a handshake failed, in one line: for a certificate that did not
    // verify, OpenSSL's reason ("self-signed certificate", "unable to get
    // local issuer certificate").
    std::string handshake_failure(const boost::system::error_code& error) const;
    // An error of a read or write, in one line; TLS's are marked as such
    // ("TLS: tlsv13 alert certificate required": the peer refused this
    // side's certificate, or its lack of one).
    static std::string io_failure(const boost::system::error_code& error);

    void async_read_some(boost::asio::mutable_buffer buffer, Transferred done);
    // Writes all of `buffer` (which must stay valid until `done`).
    void async_write(boost::asio::const_buffer buffer, Transferred done);
    // Reads into `input` (at most `max` bytes held) until it holds "\r\n";
    // `done` gets the length of the line with its CR LF.
    void async_read_line(std::string& input, std::size_t max, Transferred done);

private:
    using TlsStream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;

    boost::asio::io_context& io_;
    boost::asio::ssl::context* tls_context_;
    // One of the two is set; shared with the handlers of operations on it.
    std::shared_ptr<boost::asio::ip::tcp::socket> plain_;
    std::shared_ptr<TlsStream> tls_stream_;
};

}  // namespace bloomery::net
