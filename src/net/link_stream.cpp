#include "link_stream.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

LinkStream::LinkStream(asio::io_context& io, asio::ssl::context* tls_context)
    : io_(io), tls_context_(tls_context) {
    reset();
}

void LinkStream::reset() {
    close();
    // A new object rather than the old one reopened: an SSL session cannot
    // be reused for another connection, and the old one's handlers may not
    // have run yet (they hold it).
    if (tls_context_ != nullptr) {
        tls_stream_ = std::make_shared<TlsStream>(io_, *tls_context_);
    } else {
        plain_ = std::make_shared<asio::ip::tcp::socket>(io_);
    }
}

asio::ip::tcp::socket& LinkStream::socket() {
    return tls_stream_ ? tls_stream_->next_layer() : *plain_;
}

void LinkStream::close() {
    if (!plain_ && !tls_stream_) return;
    error_code ignored;
    socket().close(ignored);
}

void LinkStream::async_handshake(const std::string& server_name, Done done) {
    if (!tls_stream_) {
        asio::post(io_, [done = std::move(done)] { done(error_code{}); });
        return;
    }
    // SNI for a name; an address is not sent (RFC 6066).
    error_code not_address;
    asio::ip::make_address(server_name, not_address);
    if (not_address) SSL_set_tlsext_host_name(tls_stream_->native_handle(), server_name.c_str());
    tls_stream_->async_handshake(
        asio::ssl::stream_base::client,
        [keep = tls_stream_, done = std::move(done)](const error_code& error) { done(error); });
}

std::string LinkStream::handshake_failure(const error_code& error) const {
    std::string text = "TLS handshake failed: " + error.message();
    if (tls_stream_ && error.category() == asio::error::get_ssl_category() &&
        ERR_GET_REASON(static_cast<unsigned long>(error.value())) ==
            SSL_R_CERTIFICATE_VERIFY_FAILED) {
        const long verify = SSL_get_verify_result(tls_stream_->native_handle());
        text += std::string(": the peer's certificate: ") + X509_verify_cert_error_string(verify) +
                " (checked against --tls-ca-cert-file)";
    }
    return text;
}

std::string LinkStream::io_failure(const error_code& error) {
    if (error.category() == asio::error::get_ssl_category() ||
        error == asio::ssl::error::stream_truncated) {
        return "TLS: " + error.message();
    }
    return error.message();
}

void LinkStream::async_read_some(asio::mutable_buffer buffer, Transferred done) {
    if (tls_stream_) {
        tls_stream_->async_read_some(
            buffer, [keep = tls_stream_, done = std::move(done)](
                        const error_code& error, std::size_t n) { done(error, n); });
    } else {
        plain_->async_read_some(
            buffer, [keep = plain_, done = std::move(done)](const error_code& error,
                                                            std::size_t n) { done(error, n); });
    }
}

void LinkStream::async_write(asio::const_buffer buffer, Transferred done) {
    if (tls_stream_) {
        asio::async_write(*tls_stream_, buffer,
                          [keep = tls_stream_, done = std::move(done)](
                              const error_code& error, std::size_t n) { done(error, n); });
    } else {
        asio::async_write(*plain_, buffer,
                          [keep = plain_, done = std::move(done)](
                              const error_code& error, std::size_t n) { done(error, n); });
    }
}

void LinkStream::async_read_line(std::string& input, std::size_t max, Transferred done) {
    auto buffer = asio::dynamic_buffer(input, max);
    if (tls_stream_) {
        asio::async_read_until(*tls_stream_, buffer, "\r\n",
                               [keep = tls_stream_, done = std::move(done)](
                                   const error_code& error, std::size_t n) { done(error, n); });
    } else {
        asio::async_read_until(*plain_, buffer, "\r\n",
                               [keep = plain_, done = std::move(done)](
                                   const error_code& error, std::size_t n) { done(error, n); });
    }
}

}  // namespace bloomery::net
