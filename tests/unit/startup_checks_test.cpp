// The checks a start and --test-config share (net/startup_checks.hpp), and
// the value checks and --test-config mode of the command line.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bloomery/app/command_line.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/net/startup_checks.hpp"

namespace bloomery::net {
namespace {

std::string join(const std::vector<std::string>& lines) {
    std::string out;
    for (const std::string& line : lines) out += line + "\n";
    return out;
}

class StartupChecks : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::filesystem::path(::testing::TempDir()) /
              ("bloomery-startup-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir);
        config.dir = (dir / "data").string();
    }
    void TearDown() override { std::filesystem::remove_all(dir); }
    std::string write_file(const std::string& name, const std::string& text) {
        const std::string path = (dir / name).string();
        std::ofstream(path) << text;
        return path;
    }

    std::filesystem::path dir;
    core::Config config;
};

TEST_F(StartupChecks, AGoodConfigurationHasNoProblemAndCreatesNothing) {
    EXPECT_EQ(join(run_startup_checks(config)), "");
    EXPECT_FALSE(std::filesystem::exists(config.dir));  // "can be created" is enough
    EXPECT_TRUE(std::filesystem::is_empty(dir));        // the probe directory is gone
    std::filesystem::create_directories(config.dir);
    EXPECT_EQ(join(run_startup_checks(config)), "");
    EXPECT_TRUE(std::filesystem::is_empty(config.dir));  // the probe file is gone
}

TEST_F(StartupChecks, ADirThatIsAFileOrUnderAFileIsRefused) {
    config.dir = write_file("plain", "x");
    EXPECT_NE(join(run_startup_checks(config)).find("--dir '" + config.dir + "': not a directory"),
              std::string::npos);
    config.dir += "/below";
    EXPECT_NE(join(run_startup_checks(config)).find("cannot be created"), std::string::npos)
        << join(run_startup_checks(config));
}

// What the start will fail to create, the check fails to create too: /proc
// takes no new directory, even from root, whom access() lets write anywhere.
TEST_F(StartupChecks, ADirThatCannotBeCreatedIsRefused) {
    config.dir = "/proc/forbidden";
    EXPECT_NE(join(run_startup_checks(config))
                  .find("--dir '/proc/forbidden': cannot be created in '/proc': "),
              std::string::npos)
        << join(run_startup_checks(config));
}

TEST_F(StartupChecks, AnUnwritableDirIsRefused) {
    // /proc refuses new files even to root, for whom a chmod would not do.
    config.dir = "/proc/self";
    EXPECT_NE(join(run_startup_checks(config)).find("--dir '/proc/self': not writable"),
              std::string::npos)
        << join(run_startup_checks(config));
}

TEST_F(StartupChecks, AMissingOrBadAclFileIsNamed) {
    config.aclfile = (dir / "missing.acl").string();
    EXPECT_NE(join(run_startup_checks(config)).find("cannot read --aclfile " + config.aclfile),
              std::string::npos);
    config.aclfile = write_file("users.acl", "user ok on >pw ~* +@read\nuser bad on +@nosuch\n");
    EXPECT_NE(join(run_startup_checks(config)).find(config.aclfile + ":2:"), std::string::npos)
        << join(run_startup_checks(config));
}

TEST_F(StartupChecks, LogFileAddressesAndTlsFilesAreChecked) {
    config.log_file = (dir / "no-such-dir" / "bloomery.log").string();
    config.bind = "not-an-address";
    config.tls_port = 6380;
    config.tls_cert_file = (dir / "missing.crt").string();
    config.tls_key_file = (dir / "missing.key").string();
    const std::string problems = join(run_startup_checks(config));
    EXPECT_NE(problems.find("--logfile '" + config.log_file + "'"), std::string::npos) << problems;
    EXPECT_NE(problems.find("--bind 'not-an-address': not an IP address"), std::string::npos);
    EXPECT_NE(problems.find("--tls-cert-file '" + config.tls_cert_file + "'"), std::string::npos)
        << problems;
    config.log_file = (dir / "bloomery.log").string();  // can be created
    config.bind = "127.0.0.1";
    config.tls_port = 0;
    EXPECT_EQ(join(run_startup_checks(config)), "");
    EXPECT_FALSE(std::filesystem::exists(config.log_file));
}

TEST_F(StartupChecks, DescribeNamesListenersAndData) {
    config.metrics_port = 9188;
    const std::string text = describe_config(config);
    EXPECT_NE(text.find("  listen: 127.0.0.1 port 6379, TLS port off\n"), std::string::npos)
        << text;
    EXPECT_NE(text.find("  metrics: http://127.0.0.1:9188/metrics\n"), std::string::npos) << text;
    EXPECT_NE(text.find("(to be created)"), std::string::npos) << text;
}

app::CommandLine parse(std::vector<std::string> words) {
    words.insert(words.begin(), "bloomery");
    std::vector<char*> argv;
    for (auto& word : words) argv.push_back(word.data());
    return app::parse_command_line(static_cast<int>(argv.size()), argv.data());
}

TEST(TestConfig, ValueProblemsAreAllCollected) {
    const app::CommandLine line = parse(
        {"--test-config", "--port", "0", "--dbfilename", "a/b", "--save", "1", "--maxmemory", "x"});
    EXPECT_TRUE(line.test_config);
    EXPECT_EQ(line.exit_code, -1);  // main adds the start-up checks and prints them all
    const std::string problems = join(line.problems);
    for (const char* option : {"--port:", "--dbfilename:", "--save:", "--maxmemory:"}) {
        EXPECT_NE(problems.find(option), std::string::npos) << option << "\n" << problems;
    }
    // Without --test-config the same values stop the start with exit code 1.
    EXPECT_EQ(parse({"--port", "0", "--dbfilename", "a/b"}).exit_code, 1);
    // A value no option takes is one more problem under --test-config, the
    // others still reported with it; what CLI11 itself refuses (an unknown
    // flag) exits 1 at once.
    const app::CommandLine bad_port =
        parse({"--test-config", "--port", "abc", "--dbfilename", "a/b"});
    EXPECT_EQ(bad_port.exit_code, -1);
    EXPECT_NE(join(bad_port.problems)
                  .find("--port: must be an integer between 0 and 65535 inclusive, got 'abc'"),
              std::string::npos)
        << join(bad_port.problems);
    EXPECT_NE(join(bad_port.problems).find("--dbfilename:"), std::string::npos);
    EXPECT_EQ(parse({"--test-config", "--no-such-flag"}).exit_code, 1);
}

TEST(TestConfig, MonitoringOptionsParseAndAreChecked) {
    app::CommandLine line =
        parse({"--metrics-port", "9188", "--slowlog-log-slower-than", "-1", "--slowlog-max-len",
               "7", "--health-check", "127.0.0.1:6379", "--health-check-timeout", "0.5"});
    ASSERT_EQ(line.exit_code, -1);
    EXPECT_EQ(line.config.metrics_port, 9188);
    EXPECT_EQ(line.config.metrics_bind_address(), "127.0.0.1");  // --bind's
    EXPECT_EQ(line.config.slowlog_log_slower_than_us, -1);
    EXPECT_EQ(line.config.slowlog_max_len, 7u);
    EXPECT_EQ(line.health_check, "127.0.0.1:6379");
    EXPECT_DOUBLE_EQ(line.health_check_timeout_seconds, 0.5);
    EXPECT_EQ(line.config.metrics_max_connections, 16u);
    EXPECT_EQ(line.config.metrics_max_request_bytes, 8192u);
    setenv("BLOOMERY_METRICS_PORT", "9200", 1);
    EXPECT_EQ(parse({}).config.metrics_port, 9200);
    unsetenv("BLOOMERY_METRICS_PORT");
    // The metrics port may not be the RESP port on the same address...
    EXPECT_EQ(parse({"--metrics-port", "6379"}).exit_code, 1);
    // ...but may on another one.
    EXPECT_EQ(parse({"--metrics-port", "6379", "--metrics-bind", "127.0.0.2"}).exit_code, -1);
    EXPECT_GT(parse({"--slowlog-max-len", "1000001"}).exit_code, 0);
    EXPECT_GT(parse({"--metrics-max-request-bytes", "10"}).exit_code, 0);
}

}  // namespace
}  // namespace bloomery::net
