// The commands that report on or configure the server, driven without
// sockets: INFO, CONFIG, CLIENT KILL, MEMORY, OBJECT, LATENCY, BF.DEBUG, and
// the statistics commands keep (commandstats, latencystats, errorstats).
//
// Byte-exact on purpose: BfDebugReportsEveryLayerAsRedisBloom (RedisBloom's
// BF.DEBUG lines, which tools parse).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bloomery/app/command_line.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/core/error_stats.hpp"
#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/core/options.hpp"
#include "bloomery/store/key_access.hpp"
#include "command_fixture.hpp"
#include "resp_matchers.hpp"

namespace bloomery::command {
namespace {

using testing::Commands;
using testing::FakeHooks;
using namespace resp::testing;  // the reply matchers
using ::testing::_;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

// Redis 7's meanings (INFO commandstats): rejected = refused before running,
// failed = ran and replied an error; unknown commands count for none.
TEST_F(Commands, CommandStatsTellRejectedFromFailedCalls) {
    hooks.command_table = &stats.command_stats;
    EXPECT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
    run({"BF.ADD", "k"});                     // arity: rejected
    run({"BF.RESERVE", "k", "0.01", "100"});  // key exists: ran, failed
    run({"BF.MADD", "k", "b", "c"});          // ran
    hooks.snapshot_failed = true;             // MISCONF: rejected
    run({"BF.ADD", "k", "d"});
    hooks.snapshot_failed = false;
    config.maxmemory = 1;  // OOM: rejected
    run({"BF.ADD", "k", "e"});
    config.maxmemory = 0;
    run({"NOSUCH", "x"});     // unknown: nobody's
    run({"CONFIG", "NOPE"});  // unknown subcommand: nobody's
    run({"CONFIG"});          // container without subcommand: rejected
    const std::string info = run({"INFO", "commandstats"});
    EXPECT_NE(info.find("# Commandstats\r\n"), std::string::npos) << info;
    const auto line = [&](std::string_view command) {
        const std::size_t at = info.find("cmdstat_" + std::string(command) + ":");
        if (at == std::string::npos) return std::string();
        return info.substr(at, info.find("\r\n", at) - at);
    };
    EXPECT_EQ(line("bf.add").rfind("cmdstat_bf.add:calls=1,usec=", 0), 0u) << info;
    EXPECT_NE(line("bf.add").find(",rejected_calls=3,failed_calls=0"), std::string::npos) << info;
    EXPECT_NE(line("bf.reserve").find("calls=1,"), std::string::npos) << info;
    EXPECT_NE(line("bf.reserve").find(",rejected_calls=0,failed_calls=1"), std::string::npos);
    EXPECT_NE(line("bf.madd").find(",rejected_calls=0,failed_calls=0"), std::string::npos);
    EXPECT_NE(line("config").find("calls=0,usec=0,usec_per_call=0.00,rejected_calls=1"),
              std::string::npos)
        << info;
    EXPECT_EQ(line("config|nope"), "");
    EXPECT_EQ(info.find("nosuch"), std::string::npos);
    EXPECT_EQ(line("bf.exists"), "");  // never called: not listed
}

TEST_F(Commands, LatencystatsGiveRedisPercentilesOfCommandsThatRan) {
    hooks.command_table = &stats.command_stats;
    for (int i = 0; i < 100; ++i) run({"BF.ADD", "k", std::to_string(i)});
    run({"BF.ADD", "k"});  // rejected: no duration
    const std::string info = run({"INFO", "latencystats"});
    const std::size_t at = info.find("latency_percentiles_usec_bf.add:p50=");
    ASSERT_NE(at, std::string::npos) << info;
    const std::string line = info.substr(at, info.find("\r\n", at) - at);
    double p50 = 0, p99 = 0, p999 = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "latency_percentiles_usec_bf.add:p50=%lf,p99=%lf,p99.9=%lf",
                          &p50, &p99, &p999),
              3)
        << line;
    EXPECT_GT(p50, 0);
    EXPECT_LE(p50, p99);
    EXPECT_LE(p99, p999);
    EXPECT_LT(p50, 1e6);  // under a second
}

TEST_F(Commands, InfoDefaultLeavesOutCommandSectionsAndAllHasThem) {
    hooks.command_table = &stats.command_stats;
    run({"PING"});
    for (const std::vector<std::string>& words :
         {std::vector<std::string>{"INFO"}, std::vector<std::string>{"INFO", "default"}}) {
        const std::string info = run(words);
        EXPECT_NE(info.find("# Server\r\n"), std::string::npos);
        EXPECT_EQ(info.find("# Commandstats"), std::string::npos);
        EXPECT_EQ(info.find("# Latencystats"), std::string::npos);
    }
    for (const char* every : {"all", "everything", "ALL"}) {
        const std::string info = run({"INFO", every});
        EXPECT_NE(info.find("# Server\r\n"), std::string::npos) << every;
        EXPECT_NE(info.find("# Commandstats\r\ncmdstat_ping:calls=1,"), std::string::npos) << every;
        EXPECT_NE(info.find("# Latencystats\r\nlatency_percentiles_usec_ping:p50="),
                  std::string::npos)
            << every;
    }
    const std::string both = run({"INFO", "commandstats", "keyspace"});
    EXPECT_NE(both.find("# Commandstats"), std::string::npos);
    EXPECT_NE(both.find("# Keyspace"), std::string::npos);
    EXPECT_EQ(both.find("# Server"), std::string::npos);
}

TEST_F(Commands, HelloOnAReplicaSaysReplica) {
    EXPECT_THAT(run({"HELLO", "3"}), HasEntry(IsBulk("role"), IsBulk("master")));
    hooks.replication_flags = command::kReplicationReplica;
    EXPECT_THAT(run({"HELLO", "3"}), HasEntry(IsBulk("role"), IsBulk("replica")));
}

TEST_F(Commands, InfoSaysLoadingWhileAReplicaLoadsItsPrimarysSnapshot) {
    EXPECT_NE(run({"INFO", "persistence"}).find("\r\nloading:0\r\n"), std::string::npos);
    hooks.replication_flags = command::kReplicationReplica | command::kReplicationLoading;
    EXPECT_NE(run({"INFO", "persistence"}).find("\r\nloading:1\r\n"), std::string::npos);
}

TEST_F(Commands, InfoCountsBlockedClients) {
    EXPECT_NE(run({"INFO", "clients"}).find("\r\nblocked_clients:0\r\n"), std::string::npos);
    hooks.blocked = 3;
    EXPECT_NE(run({"INFO", "clients"}).find("\r\nblocked_clients:3\r\n"), std::string::npos);
}

// The fake server lists one client, id 1 at 127.0.0.1:1; this test's client
// is that one.
TEST_F(Commands, ClientKillSkipsTheCallerUnlessToldOrOldStyle) {
    client.id = 1;
    client.address = "127.0.0.1:1";
    EXPECT_THAT(run({"CLIENT", "KILL", "ID", "1"}), IsInt(0));
    EXPECT_FALSE(client.close_after_reply);
    EXPECT_THAT(run({"CLIENT", "KILL", "ADDR", "127.0.0.1:1", "SKIPME", "yes"}), IsInt(0));
    EXPECT_FALSE(client.close_after_reply);
    EXPECT_THAT(run({"CLIENT", "KILL", "ID", "1", "SKIPME", "no"}), IsInt(1));
    EXPECT_TRUE(client.close_after_reply);  // after this reply
    client.close_after_reply = false;
    EXPECT_THAT(run({"CLIENT", "KILL", "127.0.0.1:1"}),
                IsOk());  // the old form kills itself
    EXPECT_TRUE(client.close_after_reply);
    client.close_after_reply = false;
    EXPECT_THAT(run({"CLIENT", "KILL", "127.0.0.1:2"}), IsError("ERR No such client"));
    // Every filter must match (Redis ANDs them).
    EXPECT_THAT(run({"CLIENT", "KILL", "ID", "1", "ADDR", "127.0.0.1:2", "SKIPME", "no"}),
                IsInt(0));
    EXPECT_FALSE(client.close_after_reply);
    EXPECT_THAT(run({"CLIENT", "KILL", "SKIPME", "maybe"}), IsError("ERR syntax error"));
    EXPECT_THAT(run({"CLIENT", "KILL", "ID", "1", "SKIPME"}), IsError("ERR syntax error"));
    EXPECT_THAT(run({"CLIENT", "KILL", "ID", "0"}),
                IsError("ERR client-id should be greater than 0"));
    EXPECT_THAT(run({"CLIENT", "KILL", "ID", "007"}),
                IsError("ERR client-id should be greater than 0"));
    EXPECT_THAT(run({"CLIENT", "KILL", "TYPE", "foo"}), IsError("ERR Unknown client type 'foo'"));
    EXPECT_THAT(run({"CLIENT", "KILL", "TYPE", "master"}), IsInt(0));
    EXPECT_THAT(run({"CLIENT", "KILL", "USER", "nobody"}), IsError("ERR No such user 'nobody'"));
    EXPECT_FALSE(client.close_after_reply);
}

// CONFIG SET reads the same range table as the command line.
TEST_F(Commands, ConfigSetTakesItsRangesFromTheOptionTable) {
    Slowlog slowlog{settings};
    const auto config_set = [&](std::string name, std::string value) {
        std::vector<std::string_view> argv{"CONFIG", "SET", name, value};
        out.clear();
        DispatchContext ctx{registry, keyspace, config, settings,   hooks,
                            client,   stats,    writer, &suspender, &slowlog};
        dispatch(registry, ctx, argv);
        return out;
    };
    const std::string prefix = "-ERR CONFIG SET failed (possibly related to argument '";
    for (const char* name : {"slowlog-log-slower-than", "slowlog-max-len"}) {
        const core::OptionSpec* range = core::find_option(name);
        ASSERT_NE(range, nullptr) << name;
        const std::string refused = prefix + name + "') - argument must be between " +
                                    std::to_string(range->min) + " and " +
                                    std::to_string(range->max) + " inclusive\r\n";
        EXPECT_EQ(config_set(name, std::to_string(range->min)), "+OK\r\n") << name;
        EXPECT_EQ(config_set(name, std::to_string(range->max)), "+OK\r\n") << name;
        EXPECT_EQ(config_set(name, std::to_string(range->min - 1)), refused) << name;
        if (range->max < std::numeric_limits<std::int64_t>::max()) {
            EXPECT_EQ(config_set(name, std::to_string(range->max + 1)), refused) << name;
        }
        EXPECT_EQ(config_set(name, "007"),
                  prefix + name + "') - argument couldn't be parsed into an integer\r\n");
    }
    // Redis 7 takes -1 only to turn the log off.
    EXPECT_EQ(config_set("slowlog-log-slower-than", "-2"),
              prefix +
                  "slowlog-log-slower-than') - argument must be between -1 and "
                  "9223372036854775807 inclusive\r\n");
}

// CONFIG GET shows every option of the command line that configures the
// running server (the table behind docs/options.md), and besides them only
// the fixed answers Redis clients ask for.
TEST_F(Commands, ConfigGetShowsEveryServerOption) {
    const std::string reply = run({"CONFIG", "GET", "*"});
    std::set<std::string> shown;
    std::size_t pos = reply.find("\r\n") + 2;  // past the array header
    for (bool name = true; pos < reply.size(); name = !name) {
        const std::size_t header_end = reply.find("\r\n", pos);
        const std::size_t length = std::stoul(reply.substr(pos + 1, header_end - pos - 1));
        if (name) shown.insert(reply.substr(header_end + 2, length));
        pos = header_end + 2 + length + 2;
    }
    // Options that run a tool and exit, or read a file into another option.
    const std::set<std::string> not_settings = {"help",
                                                "version",
                                                "config",
                                                "check-snapshot",
                                                "check-journal",
                                                "import-rdb",
                                                "fix",
                                                "test-config",
                                                "health-check",
                                                "health-check-tls",
                                                "health-check-timeout",
                                                "requirepass-file",
                                                "masterauth-file",
                                                "cluster-etcd-password-file"};
    // Answers Redis clients expect that no option sets here, and Redis's
    // other names of options (io-threads, min-slaves-to-write, ...).
    std::set<std::string> fixed = {"databases", "maxmemory-policy", "replica-read-only"};
    for (const core::OptionSpec& spec : core::option_specs()) {
        if (!spec.redis_alias.empty()) fixed.emplace(spec.redis_alias);
    }
    EXPECT_TRUE(fixed.contains("io-threads"));
    std::set<std::string> options;
    for (const std::string& option : app::option_names()) {
        if (!not_settings.contains(option)) options.insert(option);
    }
    for (const std::string& option : options) {
        EXPECT_TRUE(shown.contains(option)) << "CONFIG GET does not show --" << option;
    }
    for (const std::string& name : shown) {
        EXPECT_TRUE(options.contains(name) || fixed.contains(name))
            << "CONFIG GET shows " << name << ", which is no option";
    }
}

TEST_F(Commands, ConfigGetShowsErrorRatesExactly) {
    config.default_error_rate = 1e-9;
    EXPECT_THAT(run({"CONFIG", "GET", "bf-error-rate"}),
                IsArray(IsBulk("bf-error-rate"), IsBulk("1e-09")));
    config.default_error_rate = 0.01;
    EXPECT_THAT(run({"CONFIG", "GET", "bf-error-rate"}),
                IsArray(IsBulk("bf-error-rate"), IsBulk("0.01")));
    config.default_error_rate = 0.1 + 0.2;  // 0.30000000000000004: every digit it takes
    EXPECT_THAT(run({"CONFIG", "GET", "bf-error-rate"}),
                IsArray(IsBulk("bf-error-rate"), IsBulk("0.30000000000000004")));
}

TEST_F(Commands, ConfigGetShowsTheShutdownAndMetricsBounds) {
    config.shutdown_timeout_seconds = 7;
    config.metrics_max_connections_per_client = 3;
    EXPECT_THAT(run({"CONFIG", "GET", "shutdown-timeout"}),
                IsArray(IsBulk("shutdown-timeout"), IsBulk("7")));
    EXPECT_THAT(run({"CONFIG", "GET", "metrics-max-connections-per-client"}),
                IsArray(IsBulk("metrics-max-connections-per-client"), IsBulk("3")));
}

// ---- MEMORY, OBJECT, LATENCY, BF.DEBUG, errors by prefix ----

std::int64_t integer_of(const std::string& reply) {
    EXPECT_EQ(reply.front(), ':') << reply;
    return std::stoll(reply.substr(1));
}

TEST_F(Commands, MemoryUsageIsTheKeysEntryAndItsFilter) {
    run({"BF.RESERVE", "key", "0.01", "1000"});
    const std::string size = run({"BF.INFO", "key", "SIZE"});
    const std::int64_t filter = std::stoll(size.substr(size.find(':') + 1));
    // Node (24 bytes and the key), table slot (8), filter.
    EXPECT_EQ(integer_of(run({"MEMORY", "USAGE", "key"})), 24 + 3 + 8 + filter);
    EXPECT_EQ(integer_of(run({"MEMORY", "USAGE", "key", "SAMPLES", "0"})), 24 + 3 + 8 + filter);
    run({"BF.RESERVE", "ab", "0.01", "1000"});
    EXPECT_EQ(integer_of(run({"MEMORY", "USAGE", "ab"})), 24 + 2 + 8 + filter);
    run({"BF.RESERVE", "a-longer-key", "0.01", "1000"});
    EXPECT_EQ(integer_of(run({"MEMORY", "USAGE", "a-longer-key"})), 24 + 12 + 8 + filter);
    EXPECT_THAT(run({"MEMORY", "USAGE", "missing"}), IsNullBulk());
    EXPECT_THAT(run({"MEMORY", "USAGE", "key", "SAMPLES"}), IsError("ERR syntax error"));
    EXPECT_THAT(run({"MEMORY", "USAGE", "key", "SAMPLES", "-1"}), IsError("ERR syntax error"));
    EXPECT_THAT(run({"MEMORY", "USAGE", "key", "SAMPLES", "x"}),
                IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"MEMORY", "USAGE"}),
                IsError("ERR wrong number of arguments for 'memory|usage' command"));
    EXPECT_THAT(run({"MEMORY", "NOPE"}),
                IsError("ERR unknown subcommand 'NOPE'. Try MEMORY HELP."));
}

TEST_F(Commands, MemoryStatsListsRedisFieldsAndADatabaseOnlyWithKeys) {
    const RespValue empty = decode_reply(run({"MEMORY", "STATS"}));
    ASSERT_THAT(empty, IsArrayThat(SizeIs(54)));
    EXPECT_THAT(empty.elements[0], IsBulk("peak.allocated"));
    EXPECT_THAT(empty.elements[1], IsInt(_));
    EXPECT_THAT(empty, Not(HasEntry(IsBulk("db.0"), _)));
    run({"BF.ADD", "k", "a"});
    const std::string with_key = run({"MEMORY", "STATS"});
    EXPECT_THAT(with_key, IsArrayThat(SizeIs(56)));
    EXPECT_THAT(with_key,
                HasEntry(IsBulk("db.0"), IsArrayThat(ElementsAre(IsBulk("overhead.hashtable.main"),
                                                                 IsInt(_), _, _, _, _))));
    EXPECT_THAT(with_key, HasEntry(IsBulk("keys.count"), IsInt(1)));
    EXPECT_THAT(with_key, HasEntry(IsBulk("replication.backlog"), IsInt(0)));
    EXPECT_THAT(with_key, HasEntry(IsBulk("fragmentation.bytes"), IsInt(_)));
    EXPECT_THAT(run({"MEMORY", "PURGE"}), IsOk());
    EXPECT_THAT(run({"MEMORY", "DOCTOR"}), IsBulk(HasSubstr("less than 5 MB")));
    // Unit tests run on the C library's allocator.
    EXPECT_THAT(run({"MEMORY", "MALLOC-STATS"}),
                IsBulk("Stats not supported for the current allocator"));
}

TEST_F(Commands, ObjectAnswersAsRedisForAModuleValue) {
    store::tick_access_clock();  // the server's cron does it every 100 ms
    run({"BF.ADD", "k", "a"});
    EXPECT_THAT(run({"OBJECT", "ENCODING", "k"}), IsBulk("raw"));
    EXPECT_THAT(run({"OBJECT", "REFCOUNT", "k"}), IsInt(1));
    EXPECT_THAT(run({"OBJECT", "IDLETIME", "k"}), IsInt(0));
    // Every use counts while lfu-log-factor is 0, and nothing decays while
    // lfu-decay-time is 0; OBJECT itself is no use of the key.
    EXPECT_THAT(run({"CONFIG", "GET", "lfu-*"}), IsArray(IsBulk("lfu-log-factor"), IsBulk("10"),
                                                         IsBulk("lfu-decay-time"), IsBulk("1")));
    EXPECT_THAT(run({"CONFIG", "SET", "lfu-log-factor", "0"}), IsOk());
    EXPECT_THAT(run({"CONFIG", "SET", "lfu-decay-time", "0"}), IsOk());
    EXPECT_THAT(run({"CONFIG", "SET", "lfu-decay-time", "-1"}),
                IsError(StartsWith("ERR CONFIG SET failed")));
    const RespValue before = decode_reply(run({"OBJECT", "FREQ", "k"}));
    ASSERT_THAT(before, IsInt(_));
    const std::int64_t counter = before.integer;
    EXPECT_GE(counter, std::int64_t{store::key_access::kInitialCount});
    for (int i = 0; i < 10; ++i) run({"BF.EXISTS", "k", "a"});
    EXPECT_THAT(run({"OBJECT", "FREQ", "k"}), IsInt(counter + 10));
    EXPECT_THAT(run({"OBJECT", "FREQ", "k"}), IsInt(counter + 10));
    for (const char* sub : {"ENCODING", "REFCOUNT", "IDLETIME", "FREQ"}) {
        EXPECT_THAT(run({"OBJECT", sub, "missing"}), IsNullBulk()) << sub;
    }
    EXPECT_THAT(run({"OBJECT", "ENCODING"}),
                IsError("ERR wrong number of arguments for 'object|encoding' command"));
    EXPECT_THAT(run({"OBJECT", "HELP"}), IsArrayThat(Each(IsSimple(_))));
}

TEST_F(Commands, LatencyRepliesInRedisShapes) {
    core::latency_reset({});
    EXPECT_THAT(run({"CONFIG", "GET", "latency-monitor-threshold"}),
                IsArray(IsBulk("latency-monitor-threshold"), IsBulk("0")));
    EXPECT_NE(run({"LATENCY", "DOCTOR"}).find("Latency monitoring is off"), std::string::npos);
    EXPECT_THAT(run({"CONFIG", "SET", "latency-monitor-threshold", "5"}), IsOk());
    EXPECT_EQ(core::latency_threshold_ms(), 5);
    EXPECT_THAT(run({"LATENCY", "LATEST"}), IsArray());
    core::latency_add_sample_if_needed(core::kLatencyCommand, 4);
    EXPECT_THAT(run({"LATENCY", "LATEST"}), IsArray());
    core::latency_add_sample_if_needed(core::kLatencyCommand, 12);
    EXPECT_THAT(run({"LATENCY", "LATEST"}),
                IsArray(IsArray(IsBulk("command"), IsInt(_), IsInt(12), IsInt(12))));
    EXPECT_THAT(run({"LATENCY", "HISTORY", "command"}), IsArray(IsArray(IsInt(_), IsInt(12))));
    EXPECT_THAT(run({"LATENCY", "HISTORY", "none"}), IsArray());
    const std::string graph = run({"LATENCY", "GRAPH", "command"});
    // One sample: on the bottom level of the fourth row, then a blank line
    // and its age ("0s", or "1s" if a second went by) written downwards.
    const std::string drawn = "command - high 12 ms, low 12 ms (all time high 12 ms)\n" +
                              std::string(80, '-') + "\n \n \n \n_\n \n";
    EXPECT_NE(graph.find(drawn), std::string::npos) << graph;
    EXPECT_EQ(graph.substr(graph.find(drawn) + drawn.size(), 4).substr(1, 3), "\ns\n") << graph;
    EXPECT_THAT(run({"LATENCY", "GRAPH", "none"}),
                IsError("ERR No samples available for event 'none'"));
    const std::string doctor = run({"LATENCY", "DOCTOR"});
    EXPECT_NE(doctor.find("1. command: 1 latency spikes (average 12ms, mean deviation 0ms"),
              std::string::npos)
        << doctor;
    EXPECT_THAT(run({"LATENCY", "RESET", "COMMAND", "x"}), IsInt(1));
    EXPECT_THAT(run({"LATENCY", "LATEST"}), IsArray());
    EXPECT_THAT(run({"CONFIG", "SET", "latency-monitor-threshold", "x"}),
                IsError("ERR CONFIG SET failed (possibly related to argument "
                        "'latency-monitor-threshold') "
                        "- argument couldn't be parsed into an integer"));
    EXPECT_THAT(run({"CONFIG", "SET", "latency-monitor-threshold", "0"}), IsOk());
    EXPECT_THAT(run({"LATENCY", "NOPE"}),
                IsError("ERR unknown subcommand 'NOPE'. Try LATENCY HELP."));
}

TEST_F(Commands, LatencyHistogramCountsCallsPerPowerOfTwo) {
    hooks.command_table = &stats.command_stats;
    run({"BF.ADD", "k", "a"});
    run({"BF.ADD", "k", "b"});
    const RespValue reply = decode_reply(run({"LATENCY", "HISTOGRAM", "bf.add", "nosuch"}));
    ASSERT_THAT(reply, IsArray(IsBulk("bf.add"),
                               IsArray(IsBulk("calls"), IsInt(2), IsBulk("histogram_usec"),
                                       IsArrayThat(Not(IsEmpty())))));
    // Bucket, count, bucket, count: the counts are cumulative.
    EXPECT_THAT(reply.elements[1].elements[3].elements.back(), IsInt(2));
    EXPECT_THAT(run({"LATENCY", "HISTOGRAM", "bf.card"}), IsArray());
}

TEST_F(Commands, BfDebugReportsEveryLayerAsRedisBloom) {
    run({"BF.RESERVE", "k", "0.01", "100", "LAYOUT", "CLASSIC"});
    run({"BF.ADD", "k", "a"});
    EXPECT_EQ(run({"BF.DEBUG", "k"}),
              "*2\r\n$6\r\nsize:1\r\n$73\r\nbytes:144 bits:1152 hashes:8 hashwidth:64 "
              "capacity:100 size:1 ratio:0.005\r\n");
    EXPECT_EQ(run({"BF.DEBUG", "missing"}), "-ERR not found\r\n");
    EXPECT_EQ(run({"BF.DEBUG", "k", "x"}),
              "-ERR wrong number of arguments for 'bf.debug' command\r\n");
}

TEST_F(Commands, ConfigSetsTheOutputBufferLimitsInRedisForm) {
    EXPECT_THAT(run({"CONFIG", "GET", "client-output-buffer-limit"}),
                IsArray(IsBulk("client-output-buffer-limit"),
                        IsBulk("normal 1073741824 0 0 slave 268435456 67108864 "
                               "60 pubsub 33554432 8388608 60")));
    EXPECT_THAT(run({"CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 1kb 9"}), IsOk());
    EXPECT_EQ(settings.client_output_buffer_limits().get(core::ClientClass::pubsub),
              (core::OutputBufferLimit{1 << 20, 1024, 9}));
    EXPECT_THAT(run({"CONFIG", "SET", "client-output-buffer-limit", "normal 1 2"}),
                IsError("ERR CONFIG SET failed (possibly related to argument "
                        "'client-output-buffer-limit') "
                        "- Wrong number of arguments in buffer limit configuration."));
    // Every pair is checked first: a bad second one changes nothing.
    EXPECT_EQ(run({"CONFIG", "SET", "client-output-buffer-limit", "normal 5 5 5",
                   "latency-monitor-threshold", "-1"})
                  .rfind("-ERR CONFIG SET failed", 0),
              0u);
    EXPECT_EQ(settings.client_output_buffer_limits().get(core::ClientClass::normal).hard_bytes,
              1ull << 30);
}

TEST_F(Commands, ErrorRepliesAreCountedByPrefix) {
    core::reset_error_stats();
    writer.set_error_stats(&stats.error_stats);
    run({"BF.INFO", "missing"});
    run({"BF.RESERVE", "k", "0.01", "10", "NONSCALING", "EXPANSION", "2"});
    run({"NOSUCH"});
    run({"BF.ADD", "k", "a"});
    EXPECT_EQ(core::error_stats_sum({&stats.error_stats}),
              (std::vector<std::pair<std::string, std::uint64_t>>{{"ERR", 2}, {"Nonscaling", 1}}));
    writer.set_error_stats(nullptr);
    core::reset_error_stats();
}

}  // namespace
}  // namespace bloomery::command
