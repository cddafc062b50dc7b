// Command handlers driven without sockets: argv in, a reply out, read with
// the matchers of resp_matchers.hpp. The BF.* family, the generic key
// commands, HELLO, CLIENT, SAVE, COMMAND and MODULE, and how every command
// reads an integer argument.
//
// Byte-exact on purpose (the point of these is RedisBloom's or Redis's exact
// bytes, which clients and redis-cli scripts compare):
// ReserveValidatesLikeRedisBloom,
// InsertReadsOptionsByTheirFirstLettersAsRedisBloom,
// InfoRepliesWithRedisBloomFields, HelloSwitchesToResp3 and
// ModuleListReportsTheBloomModule.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bloomery/command/errors.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/core/parse_int64.hpp"
#include "command_fixture.hpp"
#include "resp_matchers.hpp"

namespace bloomery::command {
namespace {

// A handler that does nothing, for tables built in a test.
void ignore_command(Context&, Args) {}

using command::ShutdownMode;
using ::testing::_;
using testing::Commands;
using ::testing::Each;
using ::testing::ElementsAre;
using testing::FakeHooks;
using ::testing::Matches;
using namespace resp::testing;  // the reply matchers

TEST_F(Commands, AddCreatesDefaultFilterAndReportsNewItemsOnce) {
    EXPECT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
    EXPECT_THAT(run({"bf.add", "k", "a"}), IsInt(0));
    EXPECT_THAT(run({"BF.EXISTS", "k", "a"}), IsInt(1));
    EXPECT_THAT(run({"BF.EXISTS", "k", "b"}), IsInt(0));
    EXPECT_THAT(run({"BF.INFO", "k", "CAPACITY"}), IsArray(IsInt(100)));
    EXPECT_THAT(run({"BF.INFO", "k", "EXPANSION"}), IsArray(IsInt(2)));
    EXPECT_THAT(run({"BF.INFO", "k", "ITEMS"}), IsArray(IsInt(1)));
}

TEST_F(Commands, ExistsOnMissingKeyAnswersZeroWithoutCreatingIt) {
    EXPECT_THAT(run({"BF.EXISTS", "missing", "a"}), IsInt(0));
    EXPECT_THAT(run({"BF.MEXISTS", "missing", "a", "b"}), IsArray(IsInt(0), IsInt(0)));
    EXPECT_THAT(run({"EXISTS", "missing"}), IsInt(0));
    EXPECT_THAT(run({"BF.CARD", "missing"}), IsInt(0));
}

TEST_F(Commands, ReserveValidatesLikeRedisBloom) {
    EXPECT_EQ(run({"BF.RESERVE", "k", "abc", "100"}), "-ERR bad error rate\r\n");
    // RedisBloom's text ends in a space.
    EXPECT_EQ(run({"BF.RESERVE", "k", "1", "100"}), "-ERR (0 < error rate range < 1) \r\n");
    EXPECT_EQ(run({"BF.RESERVE", "k", "0", "100"}), "-ERR (0 < error rate range < 1) \r\n");
    EXPECT_EQ(run({"BF.RESERVE", "k", "0.01", "x"}), "-ERR bad capacity\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "k", "0.01", "0"}), "-ERR (capacity should be larger than 0)\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "k", "0.01", "10", "EXPANSION", "0"}),
              "-ERR expansion should be greater or equal to 1\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "k", "0.01"}),
              "-ERR wrong number of arguments for 'bf.reserve' command\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "k", "0.01", "10", "NONSCALING"}), "+OK\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "k", "0.01", "10"}), "-ERR item exists\r\n");
    EXPECT_EQ(run({"BF.INFO", "k", "EXPANSION"}), "*1\r\n$-1\r\n");
    // RedisBloom's reading of the options: NONSCALING and EXPANSION anywhere
    // after the capacity, other words ignored, at most 7 arguments (LAYOUT
    // and its value apart), "Nonscaling ..." without "ERR".
    EXPECT_EQ(run({"BF.RESERVE", "n", "0.01", "10", "EXPANSION", "2", "NONSCALING"}),
              "-Nonscaling filters cannot expand\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "n", "0.01", "10", "NONSCALING", "EXPANSION"}),
              "-ERR no expansion\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "n", "0.01", "10", "EXPANSION", "x"}), "-ERR bad expansion\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "n", "0.01", "10", "a", "b", "c", "d"}),
              "-ERR wrong number of arguments for 'bf.reserve' command\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "n", "0.01", "10", "FOO", "EXPANSION", "3"}), "+OK\r\n");
    EXPECT_EQ(run({"BF.INFO", "n", "EXPANSION"}), "*1\r\n:3\r\n");
    EXPECT_EQ(
        run({"BF.RESERVE", "m", "0.01", "10", "EXPANSION", "3", "NONSCALING", "LAYOUT", "CLASSIC"}),
        "-Nonscaling filters cannot expand\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "m", "0.01", "10", "EXPANSION", "3", "LAYOUT", "CLASSIC", "x"}),
              "+OK\r\n");
    EXPECT_EQ(run({"BF.INFO", "m", "LAYOUT"}), "*1\r\n$7\r\nclassic\r\n");
}

TEST_F(Commands, InsertReadsOptionsByTheirFirstLettersAsRedisBloom) {
    EXPECT_EQ(run({"BF.INSERT", "k", "CAP", "7", "ERRORS", "0.1", "EXP", "5", "ITEMS", "a"}),
              "*1\r\n:1\r\n");
    EXPECT_EQ(run({"BF.INFO", "k", "CAPACITY"}), "*1\r\n:7\r\n");
    EXPECT_EQ(run({"BF.INFO", "k", "EXPANSION"}), "*1\r\n:5\r\n");
    EXPECT_EQ(run({"BF.INSERT", "n", "NOC", "I", "a"}), "-ERR not found\r\n");
    EXPECT_EQ(run({"BF.INSERT", "n", "NX", "I", "a"}), "*1\r\n:1\r\n");
    EXPECT_EQ(run({"BF.INFO", "n", "EXPANSION"}), "*1\r\n$-1\r\n");  // NONSCALING
    EXPECT_EQ(run({"BF.INSERT", "o", "e", "0.2", "ITEMS", "a"}), "-Bad expansion\r\n");
    EXPECT_EQ(run({"BF.INSERT", "o", "ERROR", "x", "ITEMS", "a"}), "-Bad error rate\r\n");
    EXPECT_EQ(run({"BF.INSERT", "o", "CAPACITY", "x", "ITEMS", "a"}), "-Bad capacity\r\n");
    EXPECT_EQ(run({"BF.INSERT", "o", "ERROR", "0", "ITEMS", "a"}), "-Bad argument received\r\n");
    EXPECT_EQ(run({"BF.INSERT", "o", "CAPACITY", "0", "ITEMS", "a"}), "-Bad argument received\r\n");
    EXPECT_EQ(run({"BF.INSERT", "o", "EXPANSION", "0", "ITEMS", "a"}),
              "-Bad argument received\r\n");
    EXPECT_EQ(run({"BF.INSERT", "o", "", "ITEMS", "a"}), "-Unknown argument received\r\n");
    EXPECT_EQ(run({"BF.INSERT", "o", "LAYOUTS", "x", "ITEMS", "a"}),
              "-Unknown argument received\r\n");
    EXPECT_EQ(run({"BF.INSERT", "o", "CAPACITY"}),
              "-ERR wrong number of arguments for 'bf.insert' command\r\n");
    EXPECT_EQ(run({"EXISTS", "o"}), ":0\r\n");
    // An expansion beside NONSCALING is taken, as RedisBloom takes it.
    EXPECT_EQ(run({"BF.INSERT", "p", "EXPANSION", "1", "NONSCALING", "ITEMS", "a", "b"}),
              "*2\r\n:1\r\n:1\r\n");
    EXPECT_EQ(run({"BF.INFO", "p", "EXPANSION"}), "*1\r\n$-1\r\n");
}

TEST_F(Commands, ReserveRefusesFiltersBeyondMaxFilterBytes) {
    config.max_filter_bytes = 1024 * 1024;
    const std::string reply = run({"BF.RESERVE", "huge", "0.0001", "100000000"});
    EXPECT_EQ(reply.rfind("-ERR filter would exceed max-filter-bytes", 0), 0u) << reply;
    EXPECT_THAT(run({"EXISTS", "huge"}), IsInt(0));
}

TEST_F(Commands, EveryCreatingPathAppliesTheSameBounds) {
    // bloom/bounds.hpp: RESERVE, INSERT and the defaults share one table.
    EXPECT_THAT(run({"BF.RESERVE", "k", "1e-300", "100"}),
                IsError("ERR error rate should be at least 1e-15"));
    EXPECT_THAT(run({"BF.INSERT", "k", "ERROR", "9e-16", "ITEMS", "a"}),
                IsError("ERR error rate should be at least 1e-15"));
    EXPECT_THAT(run({"BF.RESERVE", "k", "0.01", "281474976710657"}),
                IsError("ERR capacity should be at most 281474976710656 (2^48)"));
    EXPECT_THAT(run({"BF.INSERT", "k", "CAPACITY", "281474976710657", "ITEMS", "a"}),
                IsError("ERR capacity should be at most 281474976710656 (2^48)"));
    EXPECT_THAT(run({"BF.INSERT", "k", "EXPANSION", "32769", "ITEMS", "a"}),
                IsError("ERR expansion should be at most 32768"));
    EXPECT_THAT(run({"EXISTS", "k"}), IsInt(0));
    EXPECT_EQ(run({"BF.RESERVE", "k", "1e-15", "281474976710656"}).rfind("-ERR filter would", 0),
              0u);
    EXPECT_THAT(run({"BF.RESERVE", "k", "1e-15", "10", "EXPANSION", "32768"}), IsOk());
}

TEST_F(Commands, MaxmemoryRefusesCommandsThatMayAllocateButNotReadsOrDeletes) {
    ASSERT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
    config.maxmemory = 1;  // already exceeded by the filter just created
    const auto oom = IsError("OOM command not allowed when used memory > 'maxmemory'.");
    EXPECT_THAT(run({"BF.ADD", "k", "b"}), oom);
    EXPECT_THAT(run({"BF.MADD", "k", "b"}), oom);
    EXPECT_THAT(run({"BF.INSERT", "k", "ITEMS", "b"}), oom);
    EXPECT_THAT(run({"BF.RESERVE", "n", "0.01", "10"}), oom);
    EXPECT_THAT(run({"BF.LOADCHUNK", "n", "1", "x"}), oom);
    EXPECT_THAT(run({"BF.EXISTS", "k", "a"}), IsInt(1));
    EXPECT_THAT(run({"DEL", "k"}), IsInt(1));
    // A reservation that would take used_memory past the limit is refused
    // even when used_memory is still below it.
    config.maxmemory = core::memory_used_total() + 1000;
    EXPECT_THAT(run({"BF.RESERVE", "n", "0.01", "100000"}), oom);
    EXPECT_THAT(run({"BF.RESERVE", "n", "0.01", "10"}), IsOk());
}

TEST_F(Commands, FailingSnapshotsRefuseWritesWithMisconfUnlessConfiguredNot) {
    hooks.snapshot_failed = true;
    const std::string reply = run({"BF.ADD", "k", "a"});
    EXPECT_EQ(reply.rfind("-MISCONF bloomery is configured to save snapshots", 0), 0u) << reply;
    EXPECT_EQ(run({"DEL", "k"}).rfind("-MISCONF", 0), 0u);
    EXPECT_THAT(run({"BF.EXISTS", "k", "a"}), IsInt(0));
    EXPECT_THAT(run({"PING"}), IsSimple("PONG"));
    config.stop_writes_on_bgsave_error = false;
    EXPECT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
}

TEST_F(Commands, NonScalingFilterFillsUpAndMaddStopsAtTheFirstError) {
    ASSERT_THAT(run({"BF.RESERVE", "k", "0.01", "2", "NONSCALING"}), IsOk());
    EXPECT_THAT(run({"BF.MADD", "k", "a", "b", "c", "d"}),
                IsArray(IsInt(1), IsInt(1), IsError("ERR non scaling filter is full")));
    EXPECT_THAT(run({"BF.ADD", "k", "e"}), IsError("ERR non scaling filter is full"));
    EXPECT_THAT(run({"BF.ADD", "k", "a"}), IsInt(0));
}

TEST_F(Commands, ScalingFilterAddsASubFilterWhenFull) {
    ASSERT_THAT(run({"BF.RESERVE", "k", "0.01", "10"}), IsOk());
    for (int i = 0; i < 10; ++i) run({"BF.ADD", "k", "item" + std::to_string(i)});
    EXPECT_THAT(run({"BF.INFO", "k", "FILTERS"}), IsArray(IsInt(1)));
    // Adds that report "exists" (false positives) do not count; keep adding
    // new names until one is accepted.
    for (int i = 10; Matches(IsArray(IsInt(10)))(run({"BF.INFO", "k", "ITEMS"})) && i < 100; ++i) {
        run({"BF.ADD", "k", "item" + std::to_string(i)});
    }
    EXPECT_THAT(run({"BF.INFO", "k", "FILTERS"}), IsArray(IsInt(2)));
    EXPECT_THAT(run({"BF.INFO", "k", "CAPACITY"}), IsArray(IsInt(30)));
}

TEST_F(Commands, InsertOptionsApplyOnlyWhenCreating) {
    EXPECT_THAT(run({"BF.INSERT", "k", "CAPACITY", "1000", "ERROR", "0.001", "ITEMS", "a", "b"}),
                IsArray(IsInt(1), IsInt(1)));
    EXPECT_THAT(run({"BF.INFO", "k", "CAPACITY"}), IsArray(IsInt(1000)));
    EXPECT_THAT(run({"BF.INSERT", "k", "CAPACITY", "5", "ITEMS", "c"}), IsArray(IsInt(1)));
    EXPECT_THAT(run({"BF.INFO", "k", "CAPACITY"}), IsArray(IsInt(1000)));
    EXPECT_THAT(run({"BF.INSERT", "nope", "NOCREATE", "ITEMS", "a"}), IsError("ERR not found"));
    // Everything after ITEMS is an item, even option names.
    EXPECT_THAT(run({"BF.INSERT", "k", "ITEMS", "NOCREATE", "CAPACITY"}),
                IsArray(IsInt(1), IsInt(1)));
    EXPECT_THAT(run({"BF.INSERT", "k", "ITEMS"}),
                IsError("ERR wrong number of arguments for 'bf.insert' command"));
    EXPECT_THAT(run({"BF.INSERT", "k", "BOGUS", "ITEMS", "a"}),
                IsError("Unknown argument received"));
}

TEST_F(Commands, InfoRepliesWithRedisBloomFields) {
    run({"BF.RESERVE", "k", "0.01", "100"});
    const std::string reply = run({"BF.INFO", "k"});
    EXPECT_EQ(reply.rfind("*10\r\n+Capacity\r\n:100\r\n+Size\r\n:", 0), 0u) << reply;
    EXPECT_NE(reply.find("+Number of filters\r\n:1\r\n+Number of items inserted\r\n:0\r\n"
                         "+Expansion rate\r\n:2\r\n"),
              std::string::npos)
        << reply;
    EXPECT_EQ(run({"BF.INFO", "missing"}), "-ERR not found\r\n");
    EXPECT_EQ(run({"BF.INFO", "k", "BOGUS"}), "-Invalid information value\r\n");
}

TEST_F(Commands, CardEstimatesDistinctItems) {
    run({"BF.RESERVE", "k", "0.001", "100000"});
    for (int i = 0; i < 5000; ++i) run({"BF.ADD", "k", std::to_string(i)});
    for (int i = 0; i < 5000; ++i) run({"BF.ADD", "k", std::to_string(i)});  // duplicates
    const std::string reply = run({"BF.CARD", "k"});
    const long estimate = std::stol(reply.substr(1));
    EXPECT_NEAR(estimate, 5000, 5000 * 0.03) << reply;
}

TEST_F(Commands, ScandumpLoadchunkRoundTripIntoANewKey) {
    run({"BF.RESERVE", "src", "0.01", "1000"});
    for (int i = 0; i < 3000; ++i) run({"BF.ADD", "src", "x" + std::to_string(i)});
    std::int64_t iter = 0;
    for (int guard = 0; guard < 1000; ++guard) {
        const RespValue reply = decode_reply(run({"BF.SCANDUMP", "src", std::to_string(iter)}));
        ASSERT_THAT(reply, IsArray(IsInt(_), IsBulk(_)));
        iter = reply.elements[0].integer;
        const std::string& data = reply.elements[1].text;
        if (iter == 0) break;
        ASSERT_THAT(run({"BF.LOADCHUNK", "dst", std::to_string(iter), data}), IsOk());
    }
    EXPECT_EQ(iter, 0);
    EXPECT_EQ(run({"BF.INFO", "dst"}), run({"BF.INFO", "src"}));
    for (int i = 0; i < 3000; ++i) {
        ASSERT_THAT(run({"BF.EXISTS", "dst", "x" + std::to_string(i)}), IsInt(1));
    }
    for (int i = 0; i < 200; ++i) {
        const std::string item = "absent" + std::to_string(i);
        EXPECT_EQ(run({"BF.EXISTS", "dst", item}), run({"BF.EXISTS", "src", item}));
    }
}

TEST_F(Commands, LoadchunkRejectsBadPayloadsWithoutCreatingTheKey) {
    // No header of either format: RedisBloom's answer.
    EXPECT_THAT(run({"BF.LOADCHUNK", "k", "1", "garbage"}), IsError("ERR received bad data"));
    EXPECT_THAT(run({"BF.LOADCHUNK", "k", "1", ""}), IsError("ERR received bad data"));
    EXPECT_THAT(run({"BF.LOADCHUNK", "k", "1", std::string(100, 'x')}),
                IsError("ERR received bad data"));
    // bloomery's own format keeps naming the check that failed.
    EXPECT_THAT(run({"BF.LOADCHUNK", "k", "1", "BLMDUMP1" + std::string(80, 'x')}),
                IsError("ERR dump header checksum mismatch"));
    EXPECT_THAT(run({"EXISTS", "k"}), IsInt(0));
    EXPECT_THAT(run({"BF.LOADCHUNK", "k", "9", "garbage"}), IsError("ERR not found"));
    EXPECT_THAT(run({"BF.LOADCHUNK", "k", "x", "garbage"}),
                IsError("ERR Second argument must be numeric"));
    EXPECT_THAT(run({"BF.LOADCHUNK", "k", "0", "garbage"}), IsError("ERR not found"));
    run({"BF.ADD", "k", "a"});
    EXPECT_THAT(run({"BF.LOADCHUNK", "k", "9", "garbage"}), IsError("ERR invalid chunk length"));
    // A header for a filter that exists is read as data, and refused so.
    EXPECT_THAT(run({"BF.LOADCHUNK", "k", "1", "garbage"}), IsError("ERR received bad data"));
    // Iterators below 1 for a filter that exists: data RedisBloom refuses.
    EXPECT_THAT(run({"BF.LOADCHUNK", "k", "0", "garbage"}), IsError("ERR received bad data"));
    EXPECT_THAT(run({"BF.LOADCHUNK", "k", "-1", "garbage"}), IsError("ERR received bad data"));
    EXPECT_THAT(run({"BF.SCANDUMP", "missing", "x"}), IsError("ERR not found"));
    EXPECT_THAT(run({"BF.SCANDUMP", "k", "x"}), IsError("Second argument must be numeric"));
    EXPECT_THAT(run({"BF.SCANDUMP", "k", "-1"}), IsArray(IsInt(0), IsBulk("")));
    EXPECT_THAT(run({"BF.EXISTS", "k", "a"}), IsInt(1));
}

TEST_F(Commands, UnknownCommandsAndWrongArityAnswerRedisTexts) {
    EXPECT_THAT(run({"NOPE", "a", "b"}),
                IsError("ERR unknown command 'NOPE', with args beginning with: 'a' 'b' "));
    EXPECT_THAT(run({"NOPE", "a\r\nb"}),
                IsError("ERR unknown command 'NOPE', with args beginning with: 'a  b' "));
    EXPECT_THAT(run({"BF.ADD", "k"}),
                IsError("ERR wrong number of arguments for 'bf.add' command"));
    EXPECT_THAT(run({"CLIENT", "NOPE"}),
                IsError("ERR unknown subcommand 'NOPE'. Try CLIENT HELP."));
}

TEST_F(Commands, GenericKeyCommands) {
    run({"BF.ADD", "a", "x"});
    run({"BF.ADD", "b", "x"});
    EXPECT_THAT(run({"TYPE", "a"}), IsSimple("MBbloom--"));
    EXPECT_THAT(run({"TYPE", "zz"}), IsSimple("none"));
    EXPECT_THAT(run({"EXISTS", "a", "b", "a", "zz"}), IsInt(3));
    EXPECT_THAT(run({"DBSIZE"}), IsInt(2));
    EXPECT_THAT(run({"RENAME", "a", "c"}), IsOk());
    EXPECT_THAT(run({"RENAME", "a", "c"}), IsError("ERR no such key"));
    EXPECT_THAT(run({"BF.EXISTS", "c", "x"}), IsInt(1));
    EXPECT_THAT(run({"KEYS", "c*"}), IsArray(IsBulk("c")));
    EXPECT_THAT(run({"DEL", "b", "c", "zz"}), IsInt(2));
    EXPECT_THAT(run({"DBSIZE"}), IsInt(0));
    EXPECT_THAT(run({"SELECT", "0"}), IsOk());
    EXPECT_THAT(run({"SELECT", "1"}), IsError("ERR DB index is out of range"));
}

TEST_F(Commands, ExpiryFollowsRedisRules) {
    run({"BF.ADD", "k", "x"});
    EXPECT_THAT(run({"TTL", "k"}), IsInt(-1));
    EXPECT_THAT(run({"TTL", "missing"}), IsInt(-2));
    EXPECT_THAT(run({"EXPIRE", "k", "100", "XX"}), IsInt(0));
    EXPECT_THAT(run({"EXPIRE", "k", "100", "NX"}), IsInt(1));
    EXPECT_THAT(run({"TTL", "k"}), IsInt(100));
    EXPECT_THAT(run({"EXPIRE", "k", "50", "GT"}), IsInt(0));
    EXPECT_THAT(run({"EXPIRE", "k", "50", "LT"}), IsInt(1));
    EXPECT_THAT(run({"EXPIRE", "k", "50", "NX", "XX"}),
                IsError("ERR NX and XX, GT or LT options at the same time are "
                        "not compatible"));
    EXPECT_THAT(run({"PERSIST", "k"}), IsInt(1));
    EXPECT_THAT(run({"PERSIST", "k"}), IsInt(0));
    EXPECT_THAT(run({"EXPIRE", "k", "abc"}),
                IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"EXPIRE", "k", "9223372036854775807"}),
                IsError("ERR invalid expire time in 'expire' command"));
    EXPECT_THAT(run({"PEXPIRE", "k", "-1"}), IsInt(1));  // in the past: deleted
    EXPECT_THAT(run({"EXISTS", "k"}), IsInt(0));
}

TEST_F(Commands, ScanVisitsEveryKeyExactlyOnce) {
    for (int i = 0; i < 300; ++i) run({"BF.ADD", "key:" + std::to_string(i), "x"});
    std::multiset<std::string> seen;
    std::string cursor = "0";
    for (int guard = 0; guard < 1000; ++guard) {
        const RespValue reply = decode_reply(run({"SCAN", cursor, "COUNT", "7"}));
        ASSERT_THAT(reply, IsArray(IsBulk(_), IsArrayThat(Each(IsBulk(_)))));
        cursor = reply.elements[0].text;
        for (const RespValue& key : reply.elements[1].elements) seen.insert(key.text);
        if (cursor == "0") break;
    }
    EXPECT_EQ(cursor, "0");
    EXPECT_EQ(seen.size(), 300u);
    EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), 300u);
}

TEST_F(Commands, HelloSwitchesToResp3) {
    const std::string reply = run({"HELLO", "3"});
    EXPECT_EQ(reply.rfind("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n", 0), 0u) << reply;
    EXPECT_EQ(client.protocol.load(), 3);
    run({"BF.RESERVE", "k", "0.01", "10", "NONSCALING"});
    // RedisBloom 2.8's RESP3 replies: a map of one field, booleans.
    EXPECT_EQ(run({"BF.INFO", "k", "EXPANSION"}), "%1\r\n+Expansion rate\r\n_\r\n");
    EXPECT_EQ(run({"BF.INFO", "k", "CAPACITY"}), "%1\r\n+Capacity\r\n:10\r\n");
    EXPECT_EQ(run({"BF.ADD", "k", "a"}), "#t\r\n");
    EXPECT_EQ(run({"BF.EXISTS", "k", "a"}), "#t\r\n");
    EXPECT_EQ(run({"BF.MEXISTS", "k", "a", "b"}), "*2\r\n#t\r\n#f\r\n");
    EXPECT_EQ(run({"BF.INSERT", "k", "ITEMS", "a"}), "*1\r\n#f\r\n");
    EXPECT_EQ(run({"HELLO", "4"}), "-NOPROTO unsupported protocol version\r\n");
    // The module list: RedisBloom's entry.
    EXPECT_NE(reply.find("$7\r\nmodules\r\n*1\r\n%4\r\n$4\r\nname\r\n$2\r\nbf\r\n$3\r\nver\r\n"
                         ":20423\r\n"),
              std::string::npos)
        << reply;
}

TEST_F(Commands, ClientNameAndShutdownGoThroughHooks) {
    EXPECT_THAT(run({"CLIENT", "SETNAME", "worker-1"}), IsOk());
    EXPECT_THAT(run({"CLIENT", "GETNAME"}), IsBulk("worker-1"));
    EXPECT_EQ(run({"CLIENT", "SETNAME", "bad name"}).rfind("-ERR Client names cannot", 0), 0u);
    // SHUTDOWN waits off the worker: no reply unless it fails.
    EXPECT_EQ(run({"SHUTDOWN", "NOSAVE", "NOW"}), "");
    EXPECT_EQ(suspender.suspensions, 1);
    EXPECT_EQ(hooks.last_shutdown.mode, ShutdownMode::nosave);
    EXPECT_TRUE(hooks.last_shutdown.now);
    EXPECT_FALSE(hooks.last_shutdown.force);
    EXPECT_THAT(run({"SHUTDOWN", "SAVE", "NOSAVE"}), IsError("ERR syntax error"));
    EXPECT_THAT(run({"SHUTDOWN", "ABORT", "NOW"}), IsError("ERR syntax error"));
    // ABORT cancels it: the SHUTDOWN's client gets Redis's error.
    EXPECT_THAT(run({"SHUTDOWN", "ABORT"}),
                Replies(IsError("ERR Errors trying to SHUTDOWN. Check logs."), IsOk()));
    EXPECT_THAT(run({"SHUTDOWN", "ABORT"}), IsError("ERR No shutdown in progress."));
    hooks.fail_saves = true;
    EXPECT_THAT(run({"SAVE"}), IsError("ERR disk on fire"));
}

TEST_F(Commands, SaveDefersItsReplyUntilTheSnapshotIsDone) {
    EXPECT_THAT(run({"SAVE"}), IsOk());
    EXPECT_EQ(suspender.suspensions, 1);
    EXPECT_EQ(hooks.saves, 1);
}

TEST_F(Commands, SaveWhereRepliesCannotWaitAnswersAnError) {
    std::vector<std::string_view> argv{"SAVE"};
    out.clear();
    DispatchContext ctx{registry, keyspace, config, settings, hooks, client, stats, writer};
    dispatch(registry, ctx, argv);
    EXPECT_THAT(out, IsError(std::string(errors::kCannotWait)));
    EXPECT_EQ(hooks.saves, 0);
    EXPECT_EQ(stats.error_replies.load(), 1u);
}

TEST_F(Commands, CommandTableMatchesProtoFile) {
    EXPECT_THAT(run({"COMMAND", "COUNT"}), IsInt(static_cast<std::int64_t>(registry.all().size())));
    EXPECT_THAT(
        run({"COMMAND", "INFO", "bf.add"}),
        IsArray(IsArrayThat(ElementsAre(IsBulk("bf.add"), IsInt(3), _, _, _, _, _, _, _, _))));
    EXPECT_THAT(run({"COMMAND", "GETKEYS", "BF.ADD", "mykey", "item"}), IsArray(IsBulk("mykey")));
    EXPECT_THAT(run({"COMMAND", "GETKEYS", "DEL", "a", "b"}), IsArray(IsBulk("a"), IsBulk("b")));
    const CommandSpec* rename = registry.find("RENAME");
    ASSERT_NE(rename, nullptr);
    EXPECT_EQ(rename->first_key, 1);
    EXPECT_EQ(rename->last_key, 2);
}

TEST_F(Commands, ModuleListReportsTheBloomModule) {
    EXPECT_EQ(run({"MODULE", "LIST"}),
              "*1\r\n*8\r\n$4\r\nname\r\n$2\r\nbf\r\n$"
              "3\r\nver\r\n:20423\r\n$4\r\npath\r\n"
              "$8\r\nbuilt-in\r\n$4\r\nargs\r\n*0\r\n");
}

TEST(Registry, RefusesJsonWithoutHandlerOrHandlerWithoutJson) {
    Registry registry;
    registry.register_handler<ignore_command>("ping");
    const core::Status no_entry = registry.build(R"({"commands":[]})");
    EXPECT_FALSE(no_entry);
    EXPECT_NE(no_entry.error().find("ping"), std::string::npos) << no_entry.error();
    const core::Status no_handler = registry.build(
        R"({"commands":[{"name":"ping","arity":-1,"flags":[],"first_key":0,"last_key":0,"step":0},
                        {"name":"echo","arity":2,"flags":[],"first_key":0,"last_key":0,"step":0}]})");
    EXPECT_FALSE(no_handler);
    EXPECT_NE(no_handler.error().find("echo"), std::string::npos) << no_handler.error();
    const core::Status matching = registry.build(
        R"({"commands":[{"name":"ping","arity":-1,"flags":[],"first_key":0,"last_key":0,"step":0}]})");
    EXPECT_TRUE(matching) << matching.error();
}

// Redis's string2ll, the one rule for every integer a client writes: what it
// accepts and refuses, directly and through commands.
constexpr const char* kIntegerTexts[] = {"0", "1", "-1", "9223372036854775807",
                                         "-9223372036854775808"};
constexpr const char* kNotIntegerTexts[] = {
    "007", "-0",  "00", "+1", " 1", "1 ", "", "-", "9223372036854775808", "-9223372036854775809",
    "1.0", "0x10"};

TEST(ParseInt64, FollowsRedisString2ll) {
    std::int64_t value = 42;
    for (const char* text : kIntegerTexts) EXPECT_TRUE(core::parse_int64(text, value)) << text;
    EXPECT_TRUE(core::parse_int64("-9223372036854775808", value));
    EXPECT_EQ(value, std::numeric_limits<std::int64_t>::min());
    EXPECT_TRUE(core::parse_int64("9223372036854775807", value));
    EXPECT_EQ(value, std::numeric_limits<std::int64_t>::max());
    for (const char* text : kNotIntegerTexts) {
        value = 42;
        EXPECT_FALSE(core::parse_int64(text, value)) << "'" << text << "'";
        EXPECT_EQ(value, 42) << "'" << text << "'";
    }
}

TEST_F(Commands, IntegerArgumentsFollowRedisString2ll) {
    // PEXPIREAT on a missing key answers 0 for any integer, so its reply
    // tells which texts the command took for integers.
    for (const char* text : kIntegerTexts) {
        EXPECT_THAT(run({"PEXPIREAT", "missing", text}), IsInt(0)) << text;
    }
    for (const char* text : kNotIntegerTexts) {
        EXPECT_THAT(run({"PEXPIREAT", "missing", text}),
                    IsError("ERR value is not an integer or out of range"))
            << "'" << text << "'";
    }
    EXPECT_THAT(run({"SELECT", "-0"}), IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"SELECT", "00"}), IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"WAIT", "007", "0"}), IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"HELLO", "03"}),
                IsError("ERR Protocol version is not an integer or out of range"));
    EXPECT_THAT(run({"BF.RESERVE", "f", "0.01", "0100"}), IsError("ERR bad capacity"));
}

// Redis 7.0's expireGenericCommand: seconds are refused when multiplying by
// 1000 overflows, any deadline when adding the base time overflows; a
// negative deadline is in the past and deletes the key.
TEST_F(Commands, ExpireAtTheInt64ExtremesAnswersAsRedis) {
    const std::string kMin = "-9223372036854775808";
    const std::string kMax = "9223372036854775807";
    struct Case {
        std::string command;
        std::string amount;
        std::optional<ReplyMatcher> reply;  // none: deleted, answering 1
    };
    const std::optional<ReplyMatcher> deleted;
    const auto invalid = [](const std::string& name) {
        return IsError("ERR invalid expire time in '" + name + "' command");
    };
    const std::vector<Case> cases = {
        {"EXPIRE", kMin, invalid("expire")},
        {"EXPIRE", kMax, invalid("expire")},
        {"EXPIRE", "-9223372036854775", deleted},
        {"EXPIRE", "-9223372036854776", invalid("expire")},
        {"EXPIRE", "9223372036854775", invalid("expire")},  // + now overflows
        {"PEXPIRE", kMin, deleted},
        {"PEXPIRE", "-9223372036854775807", deleted},
        {"PEXPIRE", kMax, invalid("pexpire")},
        {"PEXPIRE", "9223372036854775", IsInt(1)},
        {"EXPIREAT", kMin, invalid("expireat")},
        {"EXPIREAT", kMax, invalid("expireat")},
        {"EXPIREAT", "-9223372036854775", deleted},
        {"EXPIREAT", "-9223372036854776", invalid("expireat")},
        {"EXPIREAT", "9223372036854775", IsInt(1)},
        {"EXPIREAT", "9223372036854776", invalid("expireat")},
        {"PEXPIREAT", kMin, deleted},
        {"PEXPIREAT", kMax, IsInt(1)},
        {"PEXPIREAT", "-1", deleted},
        {"PEXPIREAT", "0", deleted},
    };
    for (const Case& c : cases) {
        run({"DEL", "k"});
        run({"BF.ADD", "k", "x"});
        const std::string reply = run({c.command, "k", c.amount});
        if (!c.reply) {
            EXPECT_THAT(reply, IsInt(1)) << c.command << " " << c.amount;
            EXPECT_THAT(run({"EXISTS", "k"}), IsInt(0)) << c.command << " " << c.amount;
        } else {
            EXPECT_THAT(reply, *c.reply) << c.command << " " << c.amount;
            EXPECT_THAT(run({"EXISTS", "k"}), IsInt(1)) << c.command << " " << c.amount;
        }
    }
    // Options are read before the amount, as Redis does.
    EXPECT_THAT(run({"EXPIRE", "k", "abc", "foo"}), IsError("ERR Unsupported option foo"));
}

}  // namespace
}  // namespace bloomery::command
