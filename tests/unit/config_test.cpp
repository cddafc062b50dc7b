// Configuration: save points, flags, environment and config file precedence.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "bloomery/app/command_line.hpp"
#include "bloomery/cluster/topology.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/options.hpp"

namespace bloomery::core {
namespace {

using app::CommandLine;
using app::parse_command_line;

CommandLine parse(std::vector<std::string> words) {
    words.insert(words.begin(), "bloomery");
    std::vector<char*> argv;
    for (auto& word : words) argv.push_back(word.data());
    return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

TEST(SaveSpec, ParsesPairsAndEmpty) {
    const Result<std::vector<SavePoint>> points = parse_save_spec("3600 1 300 100");
    ASSERT_TRUE(points) << points.error();
    ASSERT_EQ(points->size(), 2u);
    EXPECT_EQ((*points)[1].seconds, 300);
    EXPECT_EQ((*points)[1].changes, 100);
    for (const char* none : {"", "\"\""}) {
        const Result<std::vector<SavePoint>> empty = parse_save_spec(none);
        ASSERT_TRUE(empty) << none;
        EXPECT_TRUE(empty->empty()) << none;
    }
    EXPECT_FALSE(parse_save_spec("60"));
    EXPECT_FALSE(parse_save_spec("60 x"));
    EXPECT_FALSE(parse_save_spec("0 1"));
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

TEST(CommandLine, ReplicaofTakesTwoWordsOrOne) {
    for (const std::vector<std::string>& words :
         {std::vector<std::string>{"--replicaof", "10.0.0.7", "6380", "--port", "7000"},
          std::vector<std::string>{"--replicaof", "10.0.0.7 6380", "--port", "7000"},
          std::vector<std::string>{"--port", "7000", "--replicaof", "10.0.0.7", "6380"}}) {
        const CommandLine line = parse(words);
        EXPECT_EQ(line.exit_code, -1);
        EXPECT_EQ(line.config.replicaof_host, "10.0.0.7");
        EXPECT_EQ(line.config.replicaof_port, 6380);
        EXPECT_EQ(line.config.port, 7000);
    }
    EXPECT_GT(parse({"--replicaof", "10.0.0.7", "x"}).exit_code, 0);
}

TEST(CommandLine, WordsBecomeTheirEnumsOnce) {
    const CommandLine line = parse({"--bf-default-layout", "CLASSIC", "--appendfsync", "always",
                                    "--loglevel", "debug", "--tls-auth-clients", "no"});
    ASSERT_EQ(line.exit_code, -1);
    EXPECT_EQ(line.config.default_layout, DefaultLayout::classic);  // in any case, as before
    EXPECT_EQ(line.config.appendfsync, AppendFsync::always);
    EXPECT_EQ(line.config.log_level, LogLevel::debug);
    EXPECT_EQ(line.config.tls_auth_clients, TlsAuthClients::no);
    // Their words for CONFIG GET and --test-config come from the spec.
    EXPECT_EQ(name_of(line.config.default_layout), "classic");
    EXPECT_EQ(name_of(line.config.appendfsync), "always");
    EXPECT_EQ(name_of(LogLevel::critical), "critical");
    const Config defaults;
    EXPECT_EQ(name_of(defaults.default_layout), "auto");
    EXPECT_EQ(name_of(defaults.appendfsync), "everysec");
    EXPECT_EQ(name_of(defaults.log_level), "info");
}

TEST(CommandLine, BfSchemeIsBloomeryUnlessAsked) {
    EXPECT_EQ(Config{}.default_scheme, DefaultScheme::bloomery);
    const CommandLine line = parse({"--bf-scheme", "RedisBloom"});
    ASSERT_EQ(line.exit_code, -1);
    EXPECT_EQ(line.config.default_scheme, DefaultScheme::redisbloom);
    EXPECT_EQ(name_of(line.config.default_scheme), "redisbloom");
    EXPECT_GT(parse({"--bf-scheme", "cuckoo"}).exit_code, 0);
}

TEST(CommandLine, ClusterMapIsShownAsItDescribesItself) {
    const CommandLine line =
        parse({"--cluster-enabled", "yes", "--cluster-slots",
               "5461-10922=b:6379,0-5460=a:6379,10923-16383=c:6379", "--cluster-self", "b:6379"});
    ASSERT_EQ(line.exit_code, -1);
    ASSERT_NE(line.config.cluster, nullptr);
    EXPECT_EQ(line.config.cluster_slots, line.config.cluster->describe());
    EXPECT_EQ(line.config.cluster_self, "b:6379");
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
    EXPECT_EQ(line.config.log_level, LogLevel::warn);
    line = parse({"--config", path, "--port", "7003"});
    EXPECT_EQ(line.config.port, 7003);  // flag over both
    unsetenv("BLOOMERY_MAXCLIENTS");
    unsetenv("BLOOMERY_PORT");
    std::remove(path.c_str());
}

TEST(ConfigFile, RedisConfLinesSetWhatTheirFlagsSet) {
    const std::string path = ::testing::TempDir() + "bloomery_redis_form_test.conf";
    std::ofstream(path) << "port 7001\n"
                           "requirepass \"two words\"\n"
                           "save 900 1\n"
                           "save 300 10\n"
                           "replicaof primary.local 6390\n"
                           "bf-initial-size = 500\n";  // the forms mix
    setenv("BLOOMERY_PORT", "7002", 1);
    CommandLine line = parse({"--config", path});
    EXPECT_EQ(line.exit_code, -1);
    EXPECT_EQ(line.config.port, 7001);  // file over environment, as in the other form
    EXPECT_EQ(line.config.requirepass, "two words");
    ASSERT_EQ(line.config.save_points.size(), 2u);
    EXPECT_EQ(line.config.save_points[1].seconds, 300);
    EXPECT_EQ(line.config.replicaof_host, "primary.local");
    EXPECT_EQ(line.config.replicaof_port, 6390);
    EXPECT_EQ(line.config.default_capacity, 500u);
    line = parse({"--config", path, "--port", "7003"});
    EXPECT_EQ(line.config.port, 7003);  // flag over file
    unsetenv("BLOOMERY_PORT");
    std::remove(path.c_str());
}

TEST(ConfigFile, UnknownKeysAreProblemsNamingFileLineAndNearestKey) {
    const std::string path = ::testing::TempDir() + "bloomery_unknown_key_test.conf";
    std::ofstream(path) << "port = 7001\nrequirepas = \"s3cret\"\nsave 900 1\ndatabases 16\n";
    const CommandLine line = parse({"--test-config", "--config", path});
    std::remove(path.c_str());
    ASSERT_EQ(line.problems.size(), 2u);
    EXPECT_EQ(line.problems[0],
              path + ":2: unknown setting 'requirepas' (did you mean 'requirepass'?)");
    EXPECT_EQ(
        line.problems[1],
        path + ":4: unknown setting 'databases' (a Redis setting with no meaning in bloomery)");
    EXPECT_EQ(line.config.port, 7001);  // the rest is still read, for the other checks
    // Without --test-config the same problems refuse the start.
    std::ofstream(path) << "requirepas = \"s3cret\"\n";
    ::testing::internal::CaptureStderr();
    const CommandLine start = parse({"--config", path});
    const std::string printed = ::testing::internal::GetCapturedStderr();
    std::remove(path.c_str());
    EXPECT_EQ(start.exit_code, 1);
    EXPECT_NE(printed.find(path + ":1: unknown setting 'requirepas'"), std::string::npos)
        << printed;
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

// ---- Option ranges: the option spec's, for flags, the config file, the
// environment and CONFIG SET ----

// Parses with --test-config, so that checks between options (a TLS port
// without certificates, ...) are listed as problems rather than refusing the
// value. A value is refused when parsing stops at it (a range or a CLI11
// error) or when a problem says it is out of range (--maxmemory, whose
// percentages are checked with the other values). `said` gets what was
// printed and the problems.
bool accepted(std::vector<std::string> words, std::string* said = nullptr) {
    words.insert(words.begin(), "--test-config");
    ::testing::internal::CaptureStderr();
    const CommandLine line = parse(std::move(words));
    std::string text = ::testing::internal::GetCapturedStderr();
    bool out_of_range = false;
    for (const std::string& problem : line.problems) {
        text += problem + "\n";
        out_of_range = out_of_range || problem.find(" inclusive") != std::string::npos;
    }
    if (said != nullptr) *said = text;
    return line.exit_code == -1 && !out_of_range;
}

std::string below(std::int64_t value) {
    return value == std::numeric_limits<std::int64_t>::min() ? "-9223372036854775809"
                                                             : std::to_string(value - 1);
}
std::string above(std::int64_t value) {
    return value == std::numeric_limits<std::int64_t>::max() ? "9223372036854775808"
                                                             : std::to_string(value + 1);
}
std::string real_text(double value) {
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", value);
    return text;
}

TEST(OptionRanges, EveryNumericOptionTakesBothEndsAndRefusesPastThem) {
    std::size_t numeric = 0;
    for (const OptionSpec& range : option_specs()) {
        if (!range.numeric()) continue;
        ++numeric;
        const std::string flag = "--" + std::string(range.name);
        std::vector<std::string> ends, past;
        if (range.kind == OptionKind::real) {
            ends = {real_text(range.min_real), real_text(range.max_real)};
            past = {real_text(std::nextafter(range.min_real, -1e300)),
                    real_text(std::nextafter(range.max_real, 1e300))};
        } else {
            ends = {std::to_string(range.min), std::to_string(range.max)};
            past = {below(range.min), above(range.max)};
        }
        for (const std::string& value : ends) {
            std::string said;
            EXPECT_TRUE(accepted({flag, value}, &said)) << flag << " " << value << ": " << said;
        }
        for (const std::string& value : past) {
            std::string said;
            EXPECT_FALSE(accepted({flag, value}, &said)) << flag << " " << value;
            // The message names the option and its range.
            EXPECT_NE(said.find(flag + ": must be"), std::string::npos) << said;
            EXPECT_NE(said.find(describe_range(range)), std::string::npos)
                << flag << " " << value << ": " << said;
        }
    }
    EXPECT_GT(numeric, 30u);
}

TEST(OptionRanges, FollowRedisWhereRedisHasTheOption) {
    using Bounds = std::pair<std::int64_t, std::int64_t>;
    const auto range_of = [](std::string_view name) {
        const OptionSpec* range = find_option(name);
        EXPECT_NE(range, nullptr) << name;
        return range != nullptr ? Bounds{range->min, range->max} : Bounds{};
    };
    constexpr std::int64_t kIntMax = 2147483647;
    constexpr std::int64_t kLongMax = std::numeric_limits<std::int64_t>::max();
    EXPECT_EQ(range_of("auto-aof-rewrite-percentage"), Bounds(0, kIntMax));
    EXPECT_EQ(range_of("auto-aof-rewrite-min-size"), Bounds(0, kLongMax));
    EXPECT_EQ(range_of("timeout"), Bounds(0, kIntMax));
    EXPECT_EQ(range_of("repl-timeout"), Bounds(1, kIntMax));
    EXPECT_EQ(range_of("repl-ping-replica-period"), Bounds(1, kIntMax));
    EXPECT_EQ(range_of("repl-backlog-size"), Bounds(1, kLongMax));
    EXPECT_EQ(range_of("client-query-buffer-limit"), Bounds(1048576, kLongMax));
    EXPECT_EQ(range_of("slowlog-log-slower-than"), Bounds(-1, kLongMax));
    // Redis's lower bound; the upper one keeps a RENAME journal record (two
    // keys) under 2^31 bytes.
    EXPECT_EQ(range_of("proto-max-bulk-len"), Bounds(1048576, 536870912));
    EXPECT_EQ(find_option("no-such-option"), nullptr);
}

TEST(OptionRanges, SizesAreCheckedAfterTheirSuffix) {
    EXPECT_TRUE(accepted({"--proto-max-bulk-len", "512mb"}));
    EXPECT_TRUE(accepted({"--proto-max-bulk-len", "1mb"}));
    std::string printed;
    EXPECT_FALSE(accepted({"--proto-max-bulk-len", "513mb"}, &printed));
    EXPECT_NE(printed.find("--proto-max-bulk-len"), std::string::npos) << printed;
    EXPECT_FALSE(accepted({"--proto-max-bulk-len", "1023kb"}));
}

TEST(OptionRanges, IntegersAreReadAsRedisReadsThem) {
    // Not octal, not hexadecimal, no sign games: what CLI11 alone would take.
    EXPECT_FALSE(accepted({"--port", "010"}));
    EXPECT_FALSE(accepted({"--port", "0x10"}));
    EXPECT_FALSE(accepted({"--port", "+10"}));
    EXPECT_FALSE(accepted({"--auto-aof-rewrite-percentage", "-1"}));  // no wrap to 2^64 - 1
    EXPECT_FALSE(accepted({"--auto-aof-rewrite-percentage", "18446744073709551615"}));
    EXPECT_TRUE(accepted({"--auto-aof-rewrite-percentage", "0"}));
    EXPECT_EQ(parse({"--auto-aof-rewrite-percentage", "250"}).config.auto_aof_rewrite_percentage,
              250u);
}

TEST(OptionRanges, TheConfigFileAndTheEnvironmentAreCheckedToo) {
    const std::string path = ::testing::TempDir() + "bloomery_range_test.conf";
    std::ofstream(path) << "auto-aof-rewrite-percentage = 2147483648\n";
    std::string printed;
    EXPECT_FALSE(accepted({"--config", path}, &printed));
    EXPECT_NE(printed.find("auto-aof-rewrite-percentage"), std::string::npos) << printed;
    std::ofstream(path) << "auto-aof-rewrite-percentage = 2147483647\n";
    EXPECT_TRUE(accepted({"--config", path}));
    std::remove(path.c_str());

    setenv("BLOOMERY_REPL_TIMEOUT", "0", 1);
    EXPECT_FALSE(accepted({}));
    setenv("BLOOMERY_REPL_TIMEOUT", "2147483647", 1);
    EXPECT_TRUE(accepted({}));
    unsetenv("BLOOMERY_REPL_TIMEOUT");
}

// --test-config reports every value no option takes, wherever it was given,
// not only the first one.
TEST(OptionRanges, EveryBadValueIsAProblemOfItsOwn) {
    const std::string path = ::testing::TempDir() + "bloomery_every_problem_test.conf";
    std::ofstream(path) << "bf-error-rate = 2\nsave 1\n";
    setenv("BLOOMERY_APPENDFSYNC", "sometimes", 1);
    const CommandLine line = parse({"--test-config", "--config", path, "--port", "70000",
                                    "--threads", "1000", "--maxmemory", "lots"});
    unsetenv("BLOOMERY_APPENDFSYNC");
    std::remove(path.c_str());
    EXPECT_EQ(line.exit_code, -1);  // main adds the start-up checks' and prints them all
    std::string problems;
    for (const std::string& problem : line.problems) problems += problem + "\n";
    for (const char* expected :
         {"--port: must be an integer between 0 and 65535 inclusive, got '70000'",
          "--threads: must be an integer between 0 and 256 inclusive, got '1000'",
          "--bf-error-rate: must be a number between 1e-15 and 0.999999 inclusive, got '2'",
          "--save: save needs pairs of 'SECONDS CHANGES', got '1'",
          "--appendfsync: sometimes not in {always,everysec,no}", "--maxmemory: must be a size"}) {
        EXPECT_NE(problems.find(expected), std::string::npos) << expected << "\n" << problems;
    }
}

TEST(ClientsMemoryLimit, TakesRedisSizesAndPercentagesOfMaxmemory) {
    ClientsMemoryLimit limit;
    EXPECT_EQ(limit.format(), "0");  // Redis's default: no limit
    EXPECT_EQ(limit.bytes(1 << 30), 0u);
    Status parsed = limit.parse("32mb");
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(limit.format(), "33554432");
    EXPECT_EQ(limit.bytes(0), 32u << 20);
    parsed = limit.parse("1k");  // Redis's k: 1000, raised to the minimum
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(limit.bytes(0), kMinClientsMemoryLimit);
    // Redis's own check: 7 % of 6 MB.
    parsed = limit.parse("7%");
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(limit.format(), "7%");
    EXPECT_EQ(limit.bytes(6u << 20), 440401u);
    EXPECT_EQ(limit.bytes(0), 0u);  // a percentage of no maxmemory: no limit
    parsed = limit.parse("100%");
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(limit.bytes(std::uint64_t{1} << 62), std::uint64_t{1} << 62);
    parsed = limit.parse("0");
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(limit.bytes(1 << 30), 0u);
}

TEST(ClientsMemoryLimit, RefusesWhatRedisRefusesAndKeepsTheSetting) {
    ClientsMemoryLimit limit;
    ASSERT_TRUE(limit.parse("5%"));
    for (const char* bad : {"", "%", "-1", "-5%", "1x", "5.5%", "mb", "99999999999999999999"}) {
        const Status refused = limit.parse(bad);
        EXPECT_FALSE(refused) << bad;
        EXPECT_EQ(refused.error(), "argument must be a memory or percent value") << bad;
    }
    Status refused = limit.parse("101%");
    EXPECT_FALSE(refused);
    EXPECT_EQ(refused.error(), "percentage argument must be less or equal to 100");
    refused = limit.parse("9223372036854775808");
    EXPECT_FALSE(refused);
    EXPECT_EQ(refused.error(), "argument must be between 0 and 9223372036854775807 inclusive");
    EXPECT_EQ(limit.format(), "5%");
}

TEST(ClientsMemoryLimit, IsAnOptionOfTheCommandLine) {
    EXPECT_EQ(parse({"--maxmemory-clients", "10%"}).config.maxmemory_clients.format(), "10%");
    EXPECT_EQ(parse({"--maxmemory-clients", "2mb"}).config.maxmemory_clients.bytes(0), 2u << 20);
    std::string printed;
    EXPECT_FALSE(accepted({"--maxmemory-clients", "lots"}, &printed));
    EXPECT_NE(printed.find("--maxmemory-clients: must be a size in bytes (suffixes kb, mb, gb) "
                           "between 0 and 9223372036854775807 inclusive, or a percentage of "
                           "--maxmemory from 0% to 100%, got 'lots'"),
              std::string::npos)
        << printed;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(parse({"--maxmemory-clients", "101%"}).exit_code, 1);
    ::testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace bloomery::core
