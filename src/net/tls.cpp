#include "bloomery/net/tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

namespace bloomery::net {

namespace {

// OpenSSL's queued errors as text (oldest first), and the queue cleared.
std::string openssl_errors() {
    std::string text;
    while (const unsigned long code = ERR_get_error()) {
        char buffer[256];
        ERR_error_string_n(code, buffer, sizeof(buffer));
        if (!text.empty()) text += "; ";
        text += buffer;
    }
    return text.empty() ? "unknown OpenSSL error" : text;
}

[[noreturn]] void fail(const std::string& option, const std::string& path,
                       const std::string& reason) {
    throw std::runtime_error(option + " '" + path + "': " + reason);
}

// OpenSSL's messages for a missing file are vague ("system lib"); say it
// plainly, with errno's text, before handing the file to OpenSSL.
void require_readable(const std::string& option, const std::string& path) {
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) fail(option, path, std::string("cannot read: ") + std::strerror(errno));
    std::fclose(file);
}

// TLS 1.2 at least; no compression (CRIME), no renegotiation (a peer could
// make this server redo handshakes on demand).
void set_protocol(SSL_CTX* native) {
    if (SSL_CTX_set_min_proto_version(native, kTlsMinimumVersion) != 1) {
        throw std::runtime_error("TLS: cannot set the minimum version: " + openssl_errors());
    }
    SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
}

struct KeyPair {
    const char* cert_option;
    const std::string& cert_file;
    const char* key_option;
    const std::string& key_file;
};

// The certificate chain and its private key, checked to match.
void use_key_pair(SSL_CTX* native, const KeyPair& pair) {
    require_readable(pair.cert_option, pair.cert_file);
    if (SSL_CTX_use_certificate_chain_file(native, pair.cert_file.c_str()) != 1) {
        fail(pair.cert_option, pair.cert_file,
             "not a usable PEM certificate chain: " + openssl_errors());
    }
    require_readable(pair.key_option, pair.key_file);
    if (SSL_CTX_use_PrivateKey_file(native, pair.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        // OpenSSL 3 compares the key with the certificate here already.
        const bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
        fail(pair.key_option, pair.key_file,
             (mismatch ? "does not match the certificate in '" + pair.cert_file + "': "
                       : std::string("not a usable PEM private key: ")) +
                 openssl_errors());
    }
    if (SSL_CTX_check_private_key(native) != 1) {
        fail(pair.key_option, pair.key_file,
             "does not match the certificate in '" + pair.cert_file + "': " + openssl_errors());
    }
}

void load_ca(SSL_CTX* native, const std::string& ca_file) {
    require_readable("--tls-ca-cert-file", ca_file);
    if (SSL_CTX_load_verify_locations(native, ca_file.c_str(), nullptr) != 1) {
        fail("--tls-ca-cert-file", ca_file, "not a usable PEM CA bundle: " + openssl_errors());
    }
}

}  // namespace

std::unique_ptr<boost::asio::ssl::context> make_tls_context(const core::Config& config) {
    namespace ssl = boost::asio::ssl;
    ERR_clear_error();
    auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
    SSL_CTX* native = context->native_handle();
    set_protocol(native);
    // The server's cipher order, not the client's.
    SSL_CTX_set_options(native, SSL_OP_CIPHER_SERVER_PREFERENCE);
    // Needed for session resumption when client certificates are verified.
    static constexpr unsigned char kSessionContext[] = "bloomery";
    SSL_CTX_set_session_id_context(native, kSessionContext, sizeof(kSessionContext) - 1);

    use_key_pair(native,
                 {"--tls-cert-file", config.tls_cert_file, "--tls-key-file", config.tls_key_file});
    if (!config.tls_ca_cert_file.empty()) {
        load_ca(native, config.tls_ca_cert_file);
        // Tell clients which CAs are accepted, so one with several
        // certificates picks the right one.
        if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(config.tls_ca_cert_file.c_str())) {
            SSL_CTX_set_client_CA_list(native, names);
        }
    }
    switch (config.tls_auth_clients) {
        case core::TlsAuthClients::yes:
            SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
            break;
        case core::TlsAuthClients::optional:
            SSL_CTX_set_verify(native, SSL_VERIFY_PEER, nullptr);
            break;
        case core::TlsAuthClients::no:
            SSL_CTX_set_verify(native, SSL_VERIFY_NONE, nullptr);
            break;
    }
    ERR_clear_error();
    return context;
}

std::unique_ptr<boost::asio::ssl::context> make_tls_client_context(const core::Config& config) {
    namespace ssl = boost::asio::ssl;
    ERR_clear_error();
    auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
    SSL_CTX* native = context->native_handle();
    set_protocol(native);
    if (!config.tls_client_cert_file.empty()) {
        use_key_pair(native, {"--tls-client-cert-file", config.tls_client_cert_file,
                              "--tls-client-key-file", config.tls_client_key_file});
    } else if (!config.tls_cert_file.empty() && !config.tls_key_file.empty()) {
        use_key_pair(native, {"--tls-cert-file", config.tls_cert_file, "--tls-key-file",
                              config.tls_key_file});
    }
    // The configuration checks require the CA; without one nothing would
    // verify, so an empty name is refused here too rather than trusting all.
    if (config.tls_ca_cert_file.empty()) {
        throw std::runtime_error("--tls-ca-cert-file: needed to verify the peers of TLS links");
    }
    load_ca(native, config.tls_ca_cert_file);
    // The chain only, as Redis: no host name is set for checking.
    SSL_CTX_set_verify(native, SSL_VERIFY_PEER, nullptr);
    ERR_clear_error();
    return context;
}

}  // namespace bloomery::net
