// The server's TLS contexts: TLS 1.2 minimum whatever the system allows,
// client verification per --tls-auth-clients, the links' verification of
// their peer, clear errors for bad files.
// Handshakes run in memory (a BIO pair), no sockets.

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "bloomery/net/tls.hpp"

namespace bloomery::net {
namespace {

struct KeyAndCertificate {
    std::string key_path;
    std::string certificate_path;
};

// A fresh P-256 key and a self-signed certificate valid for a day, as PEM
// files `name`-PID.key / .crt in the test's temporary directory.
KeyAndCertificate make_self_signed(const std::string& name) {
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
    if (!key) throw std::runtime_error("EVP_EC_gen failed");
    std::unique_ptr<X509, decltype(&X509_free)> certificate(X509_new(), X509_free);
    X509_set_version(certificate.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(certificate.get()), 1);
    X509_gmtime_adj(X509_getm_notBefore(certificate.get()), -60);
    X509_gmtime_adj(X509_getm_notAfter(certificate.get()), 24 * 3600);
    X509_set_pubkey(certificate.get(), key.get());
    X509_NAME* subject = X509_get_subject_name(certificate.get());
    X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0);
    X509_set_issuer_name(certificate.get(), subject);
    if (X509_sign(certificate.get(), key.get(), EVP_sha256()) == 0) {
        throw std::runtime_error("X509_sign failed");
    }
    // ctest runs each test in its own process, two at a time: one process's
    // files must not be another's.
    const std::string stem = ::testing::TempDir() + name + "-" + std::to_string(getpid());
    KeyAndCertificate files{stem + ".key", stem + ".crt"};
    std::FILE* key_file = std::fopen(files.key_path.c_str(), "wb");
    PEM_write_PrivateKey(key_file, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(key_file);
    std::FILE* certificate_file = std::fopen(files.certificate_path.c_str(), "wb");
    PEM_write_X509(certificate_file, certificate.get());
    std::fclose(certificate_file);
    return files;
}

class TlsContext : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        server_ = new KeyAndCertificate(make_self_signed("bloomery-tls-test-server"));
        other_ = new KeyAndCertificate(make_self_signed("bloomery-tls-test-other"));
    }
    static void TearDownTestSuite() {
        for (const KeyAndCertificate* files : {server_, other_}) {
            std::remove(files->key_path.c_str());
            std::remove(files->certificate_path.c_str());
            delete files;
        }
    }

    core::Config config(core::TlsAuthClients auth = core::TlsAuthClients::no) const {
        core::Config c;
        c.tls_port = 6380;
        c.tls_cert_file = server_->certificate_path;
        c.tls_key_file = server_->key_path;
        c.tls_auth_clients = auth;
        if (auth != core::TlsAuthClients::no) c.tls_ca_cert_file = server_->certificate_path;
        return c;
    }

    static std::string error_of(const core::Config& c) {
        try {
            make_tls_context(c);
        } catch (const std::runtime_error& e) {
            return e.what();
        }
        return "";
    }

    static KeyAndCertificate* server_;
    static KeyAndCertificate* other_;
};
KeyAndCertificate* TlsContext::server_ = nullptr;
KeyAndCertificate* TlsContext::other_ = nullptr;

// Runs a client and a server handshake against each other in memory; true if
// both finish.
bool handshake(SSL_CTX* server_context, SSL_CTX* client_context) {
    SSL* server = SSL_new(server_context);
    SSL* client = SSL_new(client_context);
    BIO* server_end = nullptr;
    BIO* client_end = nullptr;
    BIO_new_bio_pair(&server_end, 0, &client_end, 0);
    SSL_set_bio(server, server_end, server_end);
    SSL_set_bio(client, client_end, client_end);
    SSL_set_accept_state(server);
    SSL_set_connect_state(client);
    bool done = false;
    bool failed = false;
    for (int round = 0; round < 50 && !done && !failed; ++round) {
        const int client_result = SSL_do_handshake(client);
        const int server_result = SSL_do_handshake(server);
        for (auto [ssl, result] : {std::pair{client, client_result}, {server, server_result}}) {
            const int error = SSL_get_error(ssl, result);
            if (result != 1 && error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
                failed = true;
            }
        }
        done = client_result == 1 && server_result == 1;
    }
    SSL_free(client);
    SSL_free(server);
    ERR_clear_error();
    return done && !failed;
}

std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> client_context(int max_version) {
    std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context(SSL_CTX_new(TLS_client_method()),
                                                              SSL_CTX_free);
    SSL_CTX_set_security_level(context.get(), 0);  // allow what old clients offer
    SSL_CTX_set_cipher_list(context.get(), "DEFAULT:@SECLEVEL=0");
    SSL_CTX_set_min_proto_version(context.get(), TLS1_VERSION);
    SSL_CTX_set_max_proto_version(context.get(), max_version);
    SSL_CTX_set_verify(context.get(), SSL_VERIFY_NONE, nullptr);
    return context;
}

TEST_F(TlsContext, RefusesTls11EvenWhenTheSecurityLevelWouldAllowIt) {
    auto server = make_tls_context(config());
    EXPECT_EQ(SSL_CTX_get_min_proto_version(server->native_handle()), TLS1_2_VERSION);
    // Lower the server's security level as a permissive system configuration
    // could: only the minimum version is left to refuse TLS 1.1.
    SSL_CTX_set_security_level(server->native_handle(), 0);
    SSL_CTX_set_cipher_list(server->native_handle(), "DEFAULT:@SECLEVEL=0");
    EXPECT_FALSE(handshake(server->native_handle(), client_context(TLS1_1_VERSION).get()));
    EXPECT_FALSE(handshake(server->native_handle(), client_context(TLS1_VERSION).get()));
    EXPECT_TRUE(handshake(server->native_handle(), client_context(TLS1_2_VERSION).get()));
    EXPECT_TRUE(handshake(server->native_handle(), client_context(TLS1_3_VERSION).get()));
}

TEST_F(TlsContext, VerificationFollowsAuthClients) {
    EXPECT_EQ(SSL_CTX_get_verify_mode(
                  make_tls_context(config(core::TlsAuthClients::yes))->native_handle()),
              SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT);
    EXPECT_EQ(SSL_CTX_get_verify_mode(
                  make_tls_context(config(core::TlsAuthClients::optional))->native_handle()),
              SSL_VERIFY_PEER);
    EXPECT_EQ(SSL_CTX_get_verify_mode(
                  make_tls_context(config(core::TlsAuthClients::no))->native_handle()),
              SSL_VERIFY_NONE);
    // With "yes", a client without a certificate does not get through.
    auto server = make_tls_context(config(core::TlsAuthClients::yes));
    EXPECT_FALSE(handshake(server->native_handle(), client_context(TLS1_2_VERSION).get()));
}

TEST_F(TlsContext, BadFilesAreNamedWithTheReason) {
    core::Config c = config();
    c.tls_cert_file = ::testing::TempDir() + "no-such-certificate.crt";
    std::string error = error_of(c);
    EXPECT_NE(error.find("--tls-cert-file '" + c.tls_cert_file + "': cannot read"),
              std::string::npos)
        << error;

    c = config();
    c.tls_key_file = other_->key_path;
    error = error_of(c);
    EXPECT_NE(error.find("--tls-key-file '" + other_->key_path + "': does not match"),
              std::string::npos)
        << error;

    c = config();
    c.tls_cert_file = server_->key_path;  // a key where a certificate belongs
    error = error_of(c);
    EXPECT_NE(error.find("--tls-cert-file '" + server_->key_path + "': not a usable"),
              std::string::npos)
        << error;

    c = config(core::TlsAuthClients::yes);
    c.tls_ca_cert_file = server_->key_path;
    error = error_of(c);
    EXPECT_NE(error.find("--tls-ca-cert-file '" + server_->key_path + "'"), std::string::npos)
        << error;
}

// The links this server opens (--tls-replication, --tls-cluster) verify
// the peer's chain against the CA, and nothing else.
TEST_F(TlsContext, LinksVerifyThePeersChainAgainstTheCa) {
    auto server = make_tls_context(config());
    core::Config c = config();
    c.tls_ca_cert_file = server_->certificate_path;
    auto trusting = make_tls_client_context(c);
    EXPECT_EQ(SSL_CTX_get_verify_mode(trusting->native_handle()), SSL_VERIFY_PEER);
    EXPECT_TRUE(handshake(server->native_handle(), trusting->native_handle()));
    c.tls_ca_cert_file = other_->certificate_path;
    auto distrusting = make_tls_client_context(c);
    EXPECT_FALSE(handshake(server->native_handle(), distrusting->native_handle()));
}

TEST_F(TlsContext, LinksPresentTheClientCertificateElseTheServers) {
    // Requires a client certificate that chains to the server's own.
    auto server = make_tls_context(config(core::TlsAuthClients::yes));
    core::Config c = config();
    c.tls_ca_cert_file = server_->certificate_path;
    EXPECT_TRUE(handshake(server->native_handle(), make_tls_client_context(c)->native_handle()));
    c.tls_client_cert_file = other_->certificate_path;
    c.tls_client_key_file = other_->key_path;
    EXPECT_FALSE(handshake(server->native_handle(), make_tls_client_context(c)->native_handle()));

    c.tls_client_cert_file = ::testing::TempDir() + "no-such-client.crt";
    std::string error;
    try {
        make_tls_client_context(c);
    } catch (const std::runtime_error& e) {
        error = e.what();
    }
    EXPECT_NE(error.find("--tls-client-cert-file '" + c.tls_client_cert_file + "': cannot read"),
              std::string::npos)
        << error;
}

}  // namespace
}  // namespace bloomery::net
