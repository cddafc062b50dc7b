// Command handlers driven without sockets: argv in, a reply out, read with
// the matchers of resp_matchers.hpp. The BF.* family, the generic key
// commands, HELLO, CLIENT, SAVE, COMMAND and MODULE, and how every command
// reads an integer argument.
//
// Byte-exact on purpose (the point of these is RedisBloom's or Redis's exact
// bytes, which clients and redis-cli scripts compare):
// ReserveValidatesLikeRedisBloom, InsertReadsOptionsByTheirFirstLettersAsRedisBloom,
// InfoRepliesWithRedisBloomFields, HelloSwitchesToResp3 and
// ModuleListReportsTheBloomModule.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
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
using testing::Commands;
using testing::FakeHooks;
using namespace resp::testing;  // the reply matchers

TEST_F(Commands, AddCreatesDefaultFilterAndReportsNewItemsOnce) {
    EXPECT_EQ(run({"BF.ADD", "k", "a"}), ":1\r\n");
    EXPECT_EQ(run({"bf.add", "k", "a"}), ":0\r\n");
    EXPECT_EQ(run({"BF.EXISTS", "k", "a"}), ":1\r\n");
    EXPECT_EQ(run({"BF.EXISTS", "k", "b"}), ":0\r\n");
    EXPECT_EQ(run({"BF.INFO", "k", "CAPACITY"}), "*1\r\n:100\r\n");
    EXPECT_EQ(run({"BF.INFO", "k", "EXPANSION"}), "*1\r\n:2\r\n");
    EXPECT_EQ(run({"BF.INFO", "k", "ITEMS"}), "*1\r\n:1\r\n");
}

TEST_F(Commands, ExistsOnMissingKeyAnswersZeroWithoutCreatingIt) {
    EXPECT_EQ(run({"BF.EXISTS", "missing", "a"}), ":0\r\n");
    EXPECT_EQ(run({"BF.MEXISTS", "missing", "a", "b"}), "*2\r\n:0\r\n:0\r\n");
    EXPECT_EQ(run({"EXISTS", "missing"}), ":0\r\n");
    EXPECT_EQ(run({"BF.CARD", "missing"}), ":0\r\n");
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
    EXPECT_EQ(run({"EXISTS", "huge"}), ":0\r\n");
}

TEST_F(Commands, EveryCreatingPathAppliesTheSameBounds) {
    // bloom/bounds.hpp: RESERVE, INSERT and the defaults share one table.
    EXPECT_EQ(run({"BF.RESERVE", "k", "1e-300", "100"}),
              "-ERR error rate should be at least 1e-15\r\n");
    EXPECT_EQ(run({"BF.INSERT", "k", "ERROR", "9e-16", "ITEMS", "a"}),
              "-ERR error rate should be at least 1e-15\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "k", "0.01", "281474976710657"}),
              "-ERR capacity should be at most 281474976710656 (2^48)\r\n");
    EXPECT_EQ(run({"BF.INSERT", "k", "CAPACITY", "281474976710657", "ITEMS", "a"}),
              "-ERR capacity should be at most 281474976710656 (2^48)\r\n");
    EXPECT_EQ(run({"BF.INSERT", "k", "EXPANSION", "32769", "ITEMS", "a"}),
              "-ERR expansion should be at most 32768\r\n");
    EXPECT_EQ(run({"EXISTS", "k"}), ":0\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "k", "1e-15", "281474976710656"}).rfind("-ERR filter would", 0),
              0u);
    EXPECT_EQ(run({"BF.RESERVE", "k", "1e-15", "10", "EXPANSION", "32768"}), "+OK\r\n");
}

TEST_F(Commands, MaxmemoryRefusesCommandsThatMayAllocateButNotReadsOrDeletes) {
    ASSERT_EQ(run({"BF.ADD", "k", "a"}), ":1\r\n");
    config.maxmemory = 1;  // already exceeded by the filter just created
    const std::string oom = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    EXPECT_EQ(run({"BF.ADD", "k", "b"}), oom);
    EXPECT_EQ(run({"BF.MADD", "k", "b"}), oom);
    EXPECT_EQ(run({"BF.INSERT", "k", "ITEMS", "b"}), oom);
    EXPECT_EQ(run({"BF.RESERVE", "n", "0.01", "10"}), oom);
    EXPECT_EQ(run({"BF.LOADCHUNK", "n", "1", "x"}), oom);
    EXPECT_EQ(run({"BF.EXISTS", "k", "a"}), ":1\r\n");
    EXPECT_EQ(run({"DEL", "k"}), ":1\r\n");
    // A reservation that would take used_memory past the limit is refused
    // even when used_memory is still below it.
    config.maxmemory = core::memory_used_total() + 1000;
    EXPECT_EQ(run({"BF.RESERVE", "n", "0.01", "100000"}), oom);
    EXPECT_EQ(run({"BF.RESERVE", "n", "0.01", "10"}), "+OK\r\n");
}

TEST_F(Commands, FailingSnapshotsRefuseWritesWithMisconfUnlessConfiguredNot) {
    hooks.snapshot_failed = true;
    const std::string reply = run({"BF.ADD", "k", "a"});
    EXPECT_EQ(reply.rfind("-MISCONF bloomery is configured to save snapshots", 0), 0u) << reply;
    EXPECT_EQ(run({"DEL", "k"}).rfind("-MISCONF", 0), 0u);
    EXPECT_EQ(run({"BF.EXISTS", "k", "a"}), ":0\r\n");
    EXPECT_EQ(run({"PING"}), "+PONG\r\n");
    config.stop_writes_on_bgsave_error = false;
    EXPECT_EQ(run({"BF.ADD", "k", "a"}), ":1\r\n");
}

TEST_F(Commands, NonScalingFilterFillsUpAndMaddStopsAtTheFirstError) {
    ASSERT_EQ(run({"BF.RESERVE", "k", "0.01", "2", "NONSCALING"}), "+OK\r\n");
    EXPECT_EQ(run({"BF.MADD", "k", "a", "b", "c", "d"}),
              "*3\r\n:1\r\n:1\r\n-ERR non scaling filter is full\r\n");
    EXPECT_EQ(run({"BF.ADD", "k", "e"}), "-ERR non scaling filter is full\r\n");
    EXPECT_EQ(run({"BF.ADD", "k", "a"}), ":0\r\n");
}

TEST_F(Commands, ScalingFilterAddsASubFilterWhenFull) {
    ASSERT_EQ(run({"BF.RESERVE", "k", "0.01", "10"}), "+OK\r\n");
    for (int i = 0; i < 10; ++i) run({"BF.ADD", "k", "item" + std::to_string(i)});
    EXPECT_EQ(run({"BF.INFO", "k", "FILTERS"}), "*1\r\n:1\r\n");
    // Adds that report "exists" (false positives) do not count; keep adding
    // new names until one is accepted.
    for (int i = 10; run({"BF.INFO", "k", "ITEMS"}) == "*1\r\n:10\r\n" && i < 100; ++i) {
        run({"BF.ADD", "k", "item" + std::to_string(i)});
    }
    EXPECT_EQ(run({"BF.INFO", "k", "FILTERS"}), "*1\r\n:2\r\n");
    EXPECT_EQ(run({"BF.INFO", "k", "CAPACITY"}), "*1\r\n:30\r\n");
}

TEST_F(Commands, InsertOptionsApplyOnlyWhenCreating) {
    EXPECT_EQ(run({"BF.INSERT", "k", "CAPACITY", "1000", "ERROR", "0.001", "ITEMS", "a", "b"}),
              "*2\r\n:1\r\n:1\r\n");
    EXPECT_EQ(run({"BF.INFO", "k", "CAPACITY"}), "*1\r\n:1000\r\n");
    EXPECT_EQ(run({"BF.INSERT", "k", "CAPACITY", "5", "ITEMS", "c"}), "*1\r\n:1\r\n");
    EXPECT_EQ(run({"BF.INFO", "k", "CAPACITY"}), "*1\r\n:1000\r\n");
    EXPECT_EQ(run({"BF.INSERT", "nope", "NOCREATE", "ITEMS", "a"}), "-ERR not found\r\n");
    // Everything after ITEMS is an item, even option names.
    EXPECT_EQ(run({"BF.INSERT", "k", "ITEMS", "NOCREATE", "CAPACITY"}), "*2\r\n:1\r\n:1\r\n");
    EXPECT_EQ(run({"BF.INSERT", "k", "ITEMS"}),
              "-ERR wrong number of arguments for 'bf.insert' command\r\n");
    EXPECT_EQ(run({"BF.INSERT", "k", "BOGUS", "ITEMS", "a"}), "-Unknown argument received\r\n");
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
        const std::string reply = run({"BF.SCANDUMP", "src", std::to_string(iter)});
        // *2\r\n:<iter>\r\n$<len>\r\n<data>\r\n
        std::size_t pos = reply.find(':') + 1;
        const std::size_t eol = reply.find("\r\n", pos);
        iter = std::stoll(reply.substr(pos, eol - pos));
        pos = reply.find('$', eol) + 1;
        const std::size_t len_end = reply.find("\r\n", pos);
        const std::size_t len = std::stoul(reply.substr(pos, len_end - pos));
        const std::string data = reply.substr(len_end + 2, len);
        if (iter == 0) break;
        ASSERT_EQ(run({"BF.LOADCHUNK", "dst", std::to_string(iter), data}), "+OK\r\n");
    }
    EXPECT_EQ(iter, 0);
    EXPECT_EQ(run({"BF.INFO", "dst"}), run({"BF.INFO", "src"}));
    for (int i = 0; i < 3000; ++i) {
        ASSERT_EQ(run({"BF.EXISTS", "dst", "x" + std::to_string(i)}), ":1\r\n");
    }
    for (int i = 0; i < 200; ++i) {
        const std::string item = "absent" + std::to_string(i);
        EXPECT_EQ(run({"BF.EXISTS", "dst", item}), run({"BF.EXISTS", "src", item}));
    }
}

TEST_F(Commands, LoadchunkRejectsBadPayloadsWithoutCreatingTheKey) {
    EXPECT_EQ(run({"BF.LOADCHUNK", "k", "1", "garbage"}), "-ERR invalid dump header\r\n");
    EXPECT_EQ(run({"EXISTS", "k"}), ":0\r\n");
    EXPECT_EQ(run({"BF.LOADCHUNK", "k", "9", "garbage"}), "-ERR not found\r\n");
    EXPECT_EQ(run({"BF.LOADCHUNK", "k", "x", "garbage"}),
              "-ERR Second argument must be numeric\r\n");
    EXPECT_EQ(run({"BF.LOADCHUNK", "k", "0", "garbage"}), "-ERR not found\r\n");
    run({"BF.ADD", "k", "a"});
    EXPECT_EQ(run({"BF.LOADCHUNK", "k", "9", "garbage"}), "-ERR invalid chunk length\r\n");
    // A header for a filter that exists is read as data, and refused so.
    EXPECT_EQ(run({"BF.LOADCHUNK", "k", "1", "garbage"}), "-ERR received bad data\r\n");
    EXPECT_EQ(run({"BF.LOADCHUNK", "k", "0", "garbage"}), "-ERR invalid iterator\r\n");
    EXPECT_EQ(run({"BF.SCANDUMP", "missing", "x"}), "-ERR not found\r\n");
    EXPECT_EQ(run({"BF.SCANDUMP", "k", "x"}), "-Second argument must be numeric\r\n");
    EXPECT_EQ(run({"BF.SCANDUMP", "k", "-1"}), "*2\r\n:0\r\n$0\r\n\r\n");
    EXPECT_EQ(run({"BF.EXISTS", "k", "a"}), ":1\r\n");
}

TEST_F(Commands, UnknownCommandsAndWrongArityAnswerRedisTexts) {
    EXPECT_EQ(run({"NOPE", "a", "b"}),
              "-ERR unknown command 'NOPE', with args beginning with: 'a' 'b' \r\n");
    EXPECT_EQ(run({"NOPE", "a\r\nb"}),
              "-ERR unknown command 'NOPE', with args beginning with: 'a  b' \r\n");
    EXPECT_EQ(run({"BF.ADD", "k"}), "-ERR wrong number of arguments for 'bf.add' command\r\n");
    EXPECT_EQ(run({"CLIENT", "NOPE"}), "-ERR unknown subcommand 'NOPE'. Try CLIENT HELP.\r\n");
}

TEST_F(Commands, GenericKeyCommands) {
    run({"BF.ADD", "a", "x"});
    run({"BF.ADD", "b", "x"});
    EXPECT_EQ(run({"TYPE", "a"}), "+MBbloom--\r\n");
    EXPECT_EQ(run({"TYPE", "zz"}), "+none\r\n");
    EXPECT_EQ(run({"EXISTS", "a", "b", "a", "zz"}), ":3\r\n");
    EXPECT_EQ(run({"DBSIZE"}), ":2\r\n");
    EXPECT_EQ(run({"RENAME", "a", "c"}), "+OK\r\n");
    EXPECT_EQ(run({"RENAME", "a", "c"}), "-ERR no such key\r\n");
    EXPECT_EQ(run({"BF.EXISTS", "c", "x"}), ":1\r\n");
    EXPECT_EQ(run({"KEYS", "c*"}), "*1\r\n$1\r\nc\r\n");
    EXPECT_EQ(run({"DEL", "b", "c", "zz"}), ":2\r\n");
    EXPECT_EQ(run({"DBSIZE"}), ":0\r\n");
    EXPECT_EQ(run({"SELECT", "0"}), "+OK\r\n");
    EXPECT_EQ(run({"SELECT", "1"}), "-ERR DB index is out of range\r\n");
}

TEST_F(Commands, ExpiryFollowsRedisRules) {
    run({"BF.ADD", "k", "x"});
    EXPECT_EQ(run({"TTL", "k"}), ":-1\r\n");
    EXPECT_EQ(run({"TTL", "missing"}), ":-2\r\n");
    EXPECT_EQ(run({"EXPIRE", "k", "100", "XX"}), ":0\r\n");
    EXPECT_EQ(run({"EXPIRE", "k", "100", "NX"}), ":1\r\n");
    EXPECT_EQ(run({"TTL", "k"}), ":100\r\n");
    EXPECT_EQ(run({"EXPIRE", "k", "50", "GT"}), ":0\r\n");
    EXPECT_EQ(run({"EXPIRE", "k", "50", "LT"}), ":1\r\n");
    EXPECT_EQ(run({"EXPIRE", "k", "50", "NX", "XX"}),
              "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n");
    EXPECT_EQ(run({"PERSIST", "k"}), ":1\r\n");
    EXPECT_EQ(run({"PERSIST", "k"}), ":0\r\n");
    EXPECT_EQ(run({"EXPIRE", "k", "abc"}), "-ERR value is not an integer or out of range\r\n");
    EXPECT_EQ(run({"EXPIRE", "k", "9223372036854775807"}),
              "-ERR invalid expire time in 'expire' command\r\n");
    EXPECT_EQ(run({"PEXPIRE", "k", "-1"}), ":1\r\n");  // in the past: deleted
    EXPECT_EQ(run({"EXISTS", "k"}), ":0\r\n");
}

TEST_F(Commands, ScanVisitsEveryKeyExactlyOnce) {
    for (int i = 0; i < 300; ++i) run({"BF.ADD", "key:" + std::to_string(i), "x"});
    std::multiset<std::string> seen;
    std::string cursor = "0";
    for (int guard = 0; guard < 1000; ++guard) {
        const std::string reply = run({"SCAN", cursor, "COUNT", "7"});
        // *2\r\n$<n>\r\n<cursor>\r\n*<k>\r\n($<n>\r\n<key>\r\n)*
        std::size_t pos = reply.find("\r\n", 4) + 2;
        const std::size_t end = reply.find("\r\n", pos);
        cursor = reply.substr(pos, end - pos);
        pos = reply.find("\r\n", end + 2) + 2;  // past *<k>
        while (pos < reply.size()) {
            const std::size_t len_end = reply.find("\r\n", pos);
            const std::size_t len = std::stoul(reply.substr(pos + 1, len_end - pos - 1));
            seen.insert(reply.substr(len_end + 2, len));
            pos = len_end + 2 + len + 2;
        }
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
    EXPECT_EQ(run({"CLIENT", "SETNAME", "worker-1"}), "+OK\r\n");
    EXPECT_EQ(run({"CLIENT", "GETNAME"}), "$8\r\nworker-1\r\n");
    EXPECT_EQ(run({"CLIENT", "SETNAME", "bad name"}).rfind("-ERR Client names cannot", 0), 0u);
    // SHUTDOWN waits off the worker: no reply unless it fails.
    EXPECT_EQ(run({"SHUTDOWN", "NOSAVE", "NOW"}), "");
    EXPECT_EQ(suspender.suspensions, 1);
    EXPECT_EQ(hooks.last_shutdown.mode, ShutdownMode::nosave);
    EXPECT_TRUE(hooks.last_shutdown.now);
    EXPECT_FALSE(hooks.last_shutdown.force);
    EXPECT_EQ(run({"SHUTDOWN", "SAVE", "NOSAVE"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"SHUTDOWN", "ABORT", "NOW"}), "-ERR syntax error\r\n");
    // ABORT cancels it: the SHUTDOWN's client gets Redis's error.
    EXPECT_EQ(run({"SHUTDOWN", "ABORT"}), "-ERR Errors trying to SHUTDOWN. Check logs.\r\n+OK\r\n");
    EXPECT_EQ(run({"SHUTDOWN", "ABORT"}), "-ERR No shutdown in progress.\r\n");
    hooks.fail_saves = true;
    EXPECT_EQ(run({"SAVE"}), "-ERR disk on fire\r\n");
}

TEST_F(Commands, SaveDefersItsReplyUntilTheSnapshotIsDone) {
    EXPECT_EQ(run({"SAVE"}), "+OK\r\n");
    EXPECT_EQ(suspender.suspensions, 1);
    EXPECT_EQ(hooks.saves, 1);
}

TEST_F(Commands, SaveWhereRepliesCannotWaitAnswersAnError) {
    std::vector<std::string_view> argv{"SAVE"};
    out.clear();
    DispatchContext ctx{registry, keyspace, config, hooks, client, stats, writer};
    dispatch(registry, ctx, argv);
    EXPECT_EQ(out, "-" + std::string(errors::kCannotWait) + "\r\n");
    EXPECT_EQ(hooks.saves, 0);
    EXPECT_EQ(stats.error_replies.load(), 1u);
}

TEST_F(Commands, CommandTableMatchesProtoFile) {
    EXPECT_EQ(run({"COMMAND", "COUNT"}), ":" + std::to_string(registry.all().size()) + "\r\n");
    const std::string info = run({"COMMAND", "INFO", "bf.add"});
    EXPECT_EQ(info.rfind("*1\r\n*10\r\n$6\r\nbf.add\r\n:3\r\n", 0), 0u) << info;
    EXPECT_EQ(run({"COMMAND", "GETKEYS", "BF.ADD", "mykey", "item"}), "*1\r\n$5\r\nmykey\r\n");
    EXPECT_EQ(run({"COMMAND", "GETKEYS", "DEL", "a", "b"}), "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    const CommandSpec* rename = registry.find("RENAME");
    ASSERT_NE(rename, nullptr);
    EXPECT_EQ(rename->first_key, 1);
    EXPECT_EQ(rename->last_key, 2);
}

TEST_F(Commands, ModuleListReportsTheBloomModule) {
    EXPECT_EQ(run({"MODULE", "LIST"}),
              "*1\r\n*8\r\n$4\r\nname\r\n$2\r\nbf\r\n$3\r\nver\r\n:20423\r\n$4\r\npath\r\n"
              "$8\r\nbuilt-in\r\n$4\r\nargs\r\n*0\r\n");
}

TEST(Registry, RefusesJsonWithoutHandlerOrHandlerWithoutJson) {
    Registry registry;
    std::string error;
    registry.register_handler<ignore_command>("ping");
    EXPECT_FALSE(registry.build(R"({"commands":[]})", error));
    EXPECT_NE(error.find("ping"), std::string::npos) << error;
    EXPECT_FALSE(registry.build(
        R"({"commands":[{"name":"ping","arity":-1,"flags":[],"first_key":0,"last_key":0,"step":0},
                        {"name":"echo","arity":2,"flags":[],"first_key":0,"last_key":0,"step":0}]})",
        error));
    EXPECT_NE(error.find("echo"), std::string::npos) << error;
    EXPECT_TRUE(registry.build(
        R"({"commands":[{"name":"ping","arity":-1,"flags":[],"first_key":0,"last_key":0,"step":0}]})",
        error))
        << error;
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
        EXPECT_EQ(run({"PEXPIREAT", "missing", text}), ":0\r\n") << text;
    }
    for (const char* text : kNotIntegerTexts) {
        EXPECT_EQ(run({"PEXPIREAT", "missing", text}),
                  "-ERR value is not an integer or out of range\r\n")
            << "'" << text << "'";
    }
    EXPECT_EQ(run({"SELECT", "-0"}), "-ERR value is not an integer or out of range\r\n");
    EXPECT_EQ(run({"SELECT", "00"}), "-ERR value is not an integer or out of range\r\n");
    EXPECT_EQ(run({"WAIT", "007", "0"}), "-ERR value is not an integer or out of range\r\n");
    EXPECT_EQ(run({"HELLO", "03"}), "-ERR Protocol version is not an integer or out of range\r\n");
    EXPECT_EQ(run({"BF.RESERVE", "f", "0.01", "0100"}), "-ERR bad capacity\r\n");
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
        std::string reply;  // "" : deleted with :1
    };
    const auto invalid = [](std::string name) {
        return "-ERR invalid expire time in '" + name + "' command\r\n";
    };
    const std::vector<Case> cases = {
        {"EXPIRE", kMin, invalid("expire")},
        {"EXPIRE", kMax, invalid("expire")},
        {"EXPIRE", "-9223372036854775", ""},
        {"EXPIRE", "-9223372036854776", invalid("expire")},
        {"EXPIRE", "9223372036854775", invalid("expire")},  // + now overflows
        {"PEXPIRE", kMin, ""},
        {"PEXPIRE", "-9223372036854775807", ""},
        {"PEXPIRE", kMax, invalid("pexpire")},
        {"PEXPIRE", "9223372036854775", ":1\r\n"},
        {"EXPIREAT", kMin, invalid("expireat")},
        {"EXPIREAT", kMax, invalid("expireat")},
        {"EXPIREAT", "-9223372036854775", ""},
        {"EXPIREAT", "-9223372036854776", invalid("expireat")},
        {"EXPIREAT", "9223372036854775", ":1\r\n"},
        {"EXPIREAT", "9223372036854776", invalid("expireat")},
        {"PEXPIREAT", kMin, ""},
        {"PEXPIREAT", kMax, ":1\r\n"},
        {"PEXPIREAT", "-1", ""},
        {"PEXPIREAT", "0", ""},
    };
    for (const Case& c : cases) {
        run({"DEL", "k"});
        run({"BF.ADD", "k", "x"});
        const std::string reply = run({c.command, "k", c.amount});
        if (c.reply.empty()) {
            EXPECT_EQ(reply, ":1\r\n") << c.command << " " << c.amount;
            EXPECT_EQ(run({"EXISTS", "k"}), ":0\r\n") << c.command << " " << c.amount;
        } else {
            EXPECT_EQ(reply, c.reply) << c.command << " " << c.amount;
            EXPECT_EQ(run({"EXISTS", "k"}), ":1\r\n") << c.command << " " << c.amount;
        }
    }
    // Options are read before the amount, as Redis does.
    EXPECT_EQ(run({"EXPIRE", "k", "abc", "foo"}), "-ERR Unsupported option foo\r\n");
}

}  // namespace
}  // namespace bloomery::command
