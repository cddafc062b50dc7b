// Configuration: save points, flags, environment and config file precedence.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "bloomery/core/config.hpp"

namespace bloomery::core {
namespace {

CommandLine parse(std::vector<std::string> words) {
    words.insert(words.begin(), "bloomery");
    std::vector<char*> argv;
    for (auto& word : words) argv.push_back(word.data());
    return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

TEST(SaveSpec, ParsesPairsAndEmpty) {
    std::vector<SavePoint> points;
    std::string error;
    ASSERT_TRUE(parse_save_spec("3600 1 300 100", points, error)) << error;
    ASSERT_EQ(points.size(), 2u);
    EXPECT_EQ(points[1].seconds, 300);
    EXPECT_EQ(points[1].changes, 100);
    EXPECT_TRUE(parse_save_spec("", points, error));
    EXPECT_TRUE(points.empty());
    EXPECT_TRUE(parse_save_spec("\"\"", points, error));
    EXPECT_TRUE(points.empty());
    EXPECT_FALSE(parse_save_spec("60", points, error));
    EXPECT_FALSE(parse_save_spec("60 x", points, error));
    EXPECT_FALSE(parse_save_spec("0 1", points, error));
}

TEST(CommandLine, DefaultsAreRedisLike) {
    const CommandLine line = parse({});
    EXPECT_EQ(line.exit_code, -1);
    EXPECT_EQ(line.config.bind, "127.0.0.1");
    EXPECT_EQ(line.config.port, 6379);
    EXPECT_EQ(line.config.proto_max_bulk_len, 512ull * 1024 * 1024);
    EXPECT_EQ(line.config.save_points.size(), 3u);
    EXPECT_GE(line.config.threads, 1u);
}

TEST(CommandLine, SizesTakeSuffixesAndBadValuesExit) {
    const CommandLine line = parse({"--max-filter-bytes", "2gb", "--save", ""});
    EXPECT_EQ(line.exit_code, -1);
    EXPECT_EQ(line.config.max_filter_bytes, 2ull * 1024 * 1024 * 1024);
    EXPECT_TRUE(line.config.save_points.empty());
    EXPECT_EQ(format_save_points(line.config.save_points), "");
    EXPECT_EQ(format_save_points(parse({"--save", "900 1 60 5"}).config.save_points), "900 1 60 5");
    EXPECT_GT(parse({"--port", "70000"}).exit_code, 0);
    EXPECT_GT(parse({"--save", "1"}).exit_code, 0);
    EXPECT_GT(parse({"--dbfilename", "a/b"}).exit_code, 0);
}

TEST(CommandLine, FlagsBeatTheConfigFileWhichBeatsTheEnvironment) {
    const std::string path = ::testing::TempDir() + "bloomery_config_test.conf";
    {
        std::ofstream file(path);
        file << "port = 7001\nbf-initial-size = 500\nloglevel = \"warn\"\n";
    }
    setenv("BLOOMERY_PORT", "7002", 1);
    setenv("BLOOMERY_MAXCLIENTS", "77", 1);
    CommandLine line = parse({"--config", path});
    EXPECT_EQ(line.config.port, 7001);              // file over environment
    EXPECT_EQ(line.config.max_clients, 77u);        // environment where the file is silent
    EXPECT_EQ(line.config.default_capacity, 500u);  // file
    EXPECT_EQ(line.config.log_level, "warn");
    line = parse({"--config", path, "--port", "7003"});
    EXPECT_EQ(line.config.port, 7003);  // flag over both
    unsetenv("BLOOMERY_MAXCLIENTS");
    unsetenv("BLOOMERY_PORT");
    std::remove(path.c_str());
}

TEST(CommandLine, TlsOptionsComeFromFlagsFileAndEnvironment) {
    CommandLine line = parse({"--tls-port", "6380", "--tls-cert-file", "s.crt", "--tls-key-file",
                              "s.key", "--tls-ca-cert-file", "ca.crt"});
    ASSERT_EQ(line.exit_code, -1);
    EXPECT_EQ(line.config.tls_port, 6380);
    EXPECT_EQ(line.config.tls_auth_clients, TlsAuthClients::yes);  // Redis's default
    EXPECT_DOUBLE_EQ(line.config.tls_handshake_timeout_seconds, 10.0);

    const std::string path = ::testing::TempDir() + "bloomery_tls_config_test.conf";
    {
        std::ofstream file(path);
        file << "tls-port = 6390\ntls-cert-file = \"f.crt\"\ntls-key-file = \"f.key\"\n";
    }
    setenv("BLOOMERY_TLS_AUTH_CLIENTS", "optional", 1);
    setenv("BLOOMERY_TLS_CA_CERT_FILE", "env-ca.crt", 1);
    line = parse({"--config", path, "--port", "0", "--tls-handshake-timeout", "0.25"});
    unsetenv("BLOOMERY_TLS_AUTH_CLIENTS");
    unsetenv("BLOOMERY_TLS_CA_CERT_FILE");
    std::remove(path.c_str());
    ASSERT_EQ(line.exit_code, -1);
    EXPECT_EQ(line.config.port, 0);
    EXPECT_EQ(line.config.tls_port, 6390);
    EXPECT_EQ(line.config.tls_cert_file, "f.crt");
    EXPECT_EQ(line.config.tls_ca_cert_file, "env-ca.crt");
    EXPECT_EQ(line.config.tls_auth_clients, TlsAuthClients::optional);
    EXPECT_DOUBLE_EQ(line.config.tls_handshake_timeout_seconds, 0.25);
}

TEST(CommandLine, TlsSettingsThatCannotWorkAreRefused) {
    EXPECT_GT(parse({"--port", "0"}).exit_code, 0);         // nothing to listen on
    EXPECT_GT(parse({"--tls-port", "6380"}).exit_code, 0);  // no certificate
    EXPECT_GT(
        parse({"--tls-port", "6380", "--tls-cert-file", "a", "--tls-key-file", "b"}).exit_code,
        0);  // auth-clients yes without a CA
    EXPECT_EQ(parse({"--tls-port", "6380", "--tls-cert-file", "a", "--tls-key-file", "b",
                     "--tls-auth-clients", "no"})
                  .exit_code,
              -1);
    EXPECT_GT(parse({"--tls-port", "6379", "--tls-cert-file", "a", "--tls-key-file", "b",
                     "--tls-auth-clients", "no"})
                  .exit_code,
              0);  // same port as plaintext
    EXPECT_GT(parse({"--tls-auth-clients", "maybe"}).exit_code, 0);
    EXPECT_GT(parse({"--tls-handshake-timeout", "0"}).exit_code, 0);
}

}  // namespace
}  // namespace bloomery::core
