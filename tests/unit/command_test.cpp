// Command handlers driven without sockets: argv in, RESP bytes out.

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bloomery/app/command_line.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/glob.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/core/error_stats.hpp"
#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/core/parse_int64.hpp"
#include "bloomery/resp/writer.hpp"
#include "fake_hooks.hpp"

namespace bloomery::command {
namespace {

// A handler that does nothing, for tables built in a test.
void ignore_command(Context&, Args) {}

using command::ShutdownMode;
using testing::FakeHooks;

// Stands in for a connection: records deferred replies; run() applies them
// after the command, as the connection does on its thread.
class FakeSuspender : public ClientSuspender {
public:
    struct Sink : ReplySink {
        explicit Sink(std::vector<ReplyWriter>& into) : delivered(into) {}
        void deliver(ReplyWriter write_reply) override {
            delivered.push_back(std::move(write_reply));
        }
        std::vector<ReplyWriter>& delivered;
    };
    std::shared_ptr<ReplySink> suspend() override {
        ++suspensions;
        return std::make_shared<Sink>(delivered);
    }
    std::vector<ReplyWriter> delivered;
    int suspensions = 0;
};

class Commands : public ::testing::Test {
protected:
    void SetUp() override {
        const auto built = build_default_registry(registry);
        ASSERT_TRUE(built) << built.error();
    }

    // Runs one command and returns its raw reply.
    std::string run(std::vector<std::string> words) {
        std::vector<std::string_view> argv(words.begin(), words.end());
        out.clear();
        DispatchContext ctx{registry, keyspace, config, hooks, client, stats, writer, &suspender};
        dispatch(registry, ctx, argv);
        for (auto& write_reply : suspender.delivered) write_reply(writer);
        suspender.delivered.clear();
        return out;
    }

    Registry registry;
    store::Keyspace keyspace{8};
    core::Config config;
    FakeHooks hooks;
    FakeSuspender suspender;
    ClientState client;
    WorkerStats stats;
    std::string out;
    resp::Writer writer{out};
};

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

TEST(Glob, MatchesLikeRedis) {
    EXPECT_TRUE(glob_match("*", "anything"));
    EXPECT_TRUE(glob_match("h?llo", "hello"));
    EXPECT_TRUE(glob_match("h[ae]llo", "hallo"));
    EXPECT_FALSE(glob_match("h[ae]llo", "hillo"));
    EXPECT_TRUE(glob_match("h[^e]llo", "hallo"));
    EXPECT_FALSE(glob_match("h[^e]llo", "hello"));
    EXPECT_TRUE(glob_match("h[a-c]llo", "hbllo"));
    EXPECT_TRUE(glob_match("a\\*b", "a*b"));
    EXPECT_FALSE(glob_match("a\\*b", "axb"));
    EXPECT_TRUE(glob_match("user:*:name", "user:42:name"));
    EXPECT_FALSE(glob_match("user:*:name", "user:42:age"));
    EXPECT_TRUE(glob_match("SAVE", "save", GlobCase::insensitive));
    // A pathological pattern finishes quickly (no exponential backtracking).
    const std::string text(10000, 'a');
    EXPECT_FALSE(glob_match("*a*a*a*a*a*a*a*a*a*a*b", text));
}

// A plain backtracking matcher (exponential at worst): the reference the
// compiled matcher must agree with on small inputs.
bool reference_glob(std::string_view p, std::string_view s, bool nocase) {
    const auto fold = [&](char c) {
        return nocase ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : c;
    };
    if (p.empty()) return s.empty();
    if (p[0] == '*') {
        for (std::size_t k = 0; k <= s.size(); ++k) {
            if (reference_glob(p.substr(1), s.substr(k), nocase)) return true;
        }
        return false;
    }
    if (s.empty()) return false;
    std::size_t used = 1;
    bool ok;
    if (p[0] == '?') {
        ok = true;
    } else if (p[0] == '[') {
        std::size_t i = 1;
        const bool negate = i < p.size() && p[i] == '^';
        if (negate) ++i;
        bool matched = false;
        while (i < p.size() && p[i] != ']') {
            if (p[i] == '\\' && i + 1 < p.size()) {
                matched |= fold(p[i + 1]) == fold(s[0]);
                i += 2;
            } else if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
                auto lo = static_cast<unsigned char>(fold(p[i]));
                auto hi = static_cast<unsigned char>(fold(p[i + 2]));
                if (lo > hi) std::swap(lo, hi);
                const auto x = static_cast<unsigned char>(fold(s[0]));
                matched |= x >= lo && x <= hi;
                i += 3;
            } else {
                matched |= fold(p[i]) == fold(s[0]);
                ++i;
            }
        }
        if (i < p.size()) ++i;
        used = i;
        ok = negate ? !matched : matched;
    } else if (p[0] == '\\' && p.size() > 1) {
        used = 2;
        ok = fold(p[1]) == fold(s[0]);
    } else {
        ok = fold(p[0]) == fold(s[0]);
    }
    return ok && reference_glob(p.substr(used), s.substr(1), nocase);
}

TEST(Glob, AgreesWithABacktrackingMatcher) {
    std::mt19937 rng(7);
    const std::string pattern_chars = "ab*?[]^-\\Ac";
    const std::string text_chars = "abcA-]";
    for (int round = 0; round < 20000; ++round) {
        std::string pattern, text;
        for (int i = rng() % 9; i > 0; --i)
            pattern.push_back(pattern_chars[rng() % pattern_chars.size()]);
        for (int i = rng() % 9; i > 0; --i) text.push_back(text_chars[rng() % text_chars.size()]);
        const bool nocase = rng() % 4 == 0;
        const GlobCase letters = nocase ? GlobCase::insensitive : GlobCase::sensitive;
        ASSERT_EQ(glob_match(pattern, text, letters), reference_glob(pattern, text, nocase))
            << "pattern '" << pattern << "' text '" << text << "' nocase " << nocase;
    }
}

// A star, thousands of characters and a mismatch at the end, against a
// megabyte key: one pass over the key, not pattern x key (that took
// seconds with a matcher that backtracks to the star).
TEST(Glob, LongPatternsAgainstLongKeysStayLinear) {
    const std::string key(1 << 20, 'a');
    const std::string run(8000, 'a');
    EXPECT_FALSE(glob_match("*" + run + "b", key));
    EXPECT_FALSE(glob_match("*" + run + "b*", key));
    EXPECT_TRUE(glob_match("*" + run + "*", key));
    EXPECT_FALSE(glob_match("*" + run + "?b*", key));
    EXPECT_FALSE(glob_match("*[a]" + run + "[b]*", key));
    EXPECT_TRUE(glob_match("*[a]" + run + "?*", key));
    std::string keyed = key;
    keyed.back() = 'b';
    EXPECT_TRUE(glob_match("*" + run + "b", keyed));
    EXPECT_TRUE(glob_match("*a?" + run + "[b]", keyed));
}

// Redis 7's meanings (INFO commandstats): rejected = refused before running,
// failed = ran and replied an error; unknown commands count for none.
TEST_F(Commands, CommandStatsTellRejectedFromFailedCalls) {
    hooks.command_table = &stats.command_stats;
    EXPECT_EQ(run({"BF.ADD", "k", "a"}), ":1\r\n");
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

}  // namespace
}  // namespace bloomery::command

namespace bloomery::command {
namespace {

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

TEST_F(Commands, HelloOnAReplicaSaysReplica) {
    EXPECT_NE(run({"HELLO", "3"}).find("$4\r\nrole\r\n$6\r\nmaster\r\n"), std::string::npos);
    hooks.replication_flags = command::kReplicationReplica;
    EXPECT_NE(run({"HELLO", "3"}).find("$4\r\nrole\r\n$7\r\nreplica\r\n"), std::string::npos);
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
    EXPECT_EQ(run({"CLIENT", "KILL", "ID", "1"}), ":0\r\n");
    EXPECT_FALSE(client.close_after_reply);
    EXPECT_EQ(run({"CLIENT", "KILL", "ADDR", "127.0.0.1:1", "SKIPME", "yes"}), ":0\r\n");
    EXPECT_FALSE(client.close_after_reply);
    EXPECT_EQ(run({"CLIENT", "KILL", "ID", "1", "SKIPME", "no"}), ":1\r\n");
    EXPECT_TRUE(client.close_after_reply);  // after this reply
    client.close_after_reply = false;
    EXPECT_EQ(run({"CLIENT", "KILL", "127.0.0.1:1"}), "+OK\r\n");  // the old form kills itself
    EXPECT_TRUE(client.close_after_reply);
    client.close_after_reply = false;
    EXPECT_EQ(run({"CLIENT", "KILL", "127.0.0.1:2"}), "-ERR No such client\r\n");
    // Every filter must match (Redis ANDs them).
    EXPECT_EQ(run({"CLIENT", "KILL", "ID", "1", "ADDR", "127.0.0.1:2", "SKIPME", "no"}), ":0\r\n");
    EXPECT_FALSE(client.close_after_reply);
    EXPECT_EQ(run({"CLIENT", "KILL", "SKIPME", "maybe"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"CLIENT", "KILL", "ID", "1", "SKIPME"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"CLIENT", "KILL", "ID", "0"}), "-ERR client-id should be greater than 0\r\n");
    EXPECT_EQ(run({"CLIENT", "KILL", "ID", "007"}), "-ERR client-id should be greater than 0\r\n");
    EXPECT_EQ(run({"CLIENT", "KILL", "TYPE", "foo"}), "-ERR Unknown client type 'foo'\r\n");
    EXPECT_EQ(run({"CLIENT", "KILL", "TYPE", "master"}), ":0\r\n");
    EXPECT_EQ(run({"CLIENT", "KILL", "USER", "nobody"}), "-ERR No such user 'nobody'\r\n");
    EXPECT_FALSE(client.close_after_reply);
}

// CONFIG SET reads the same range table as the command line.
TEST_F(Commands, ConfigSetTakesItsRangesFromTheOptionTable) {
    Slowlog slowlog{config.slowlog_log_slower_than_us, config.slowlog_max_len};
    const auto config_set = [&](std::string name, std::string value) {
        std::vector<std::string_view> argv{"CONFIG", "SET", name, value};
        out.clear();
        DispatchContext ctx{registry, keyspace, config,     hooks,   client,
                            stats,    writer,   &suspender, &slowlog};
        dispatch(registry, ctx, argv);
        return out;
    };
    const std::string prefix = "-ERR CONFIG SET failed (possibly related to argument '";
    for (const char* name : {"slowlog-log-slower-than", "slowlog-max-len"}) {
        const core::OptionRange* range = core::find_option_range(name);
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
                                                "masterauth-file"};
    // Answers Redis clients expect that no option sets here.
    const std::set<std::string> fixed = {"io-threads", "databases", "maxmemory-policy",
                                         "replica-read-only"};
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
    EXPECT_EQ(run({"CONFIG", "GET", "bf-error-rate"}),
              "*2\r\n$13\r\nbf-error-rate\r\n$5\r\n1e-09\r\n");
    config.default_error_rate = 0.01;
    EXPECT_EQ(run({"CONFIG", "GET", "bf-error-rate"}),
              "*2\r\n$13\r\nbf-error-rate\r\n$4\r\n0.01\r\n");
    config.default_error_rate = 0.1 + 0.2;  // 0.30000000000000004: every digit it takes
    EXPECT_EQ(run({"CONFIG", "GET", "bf-error-rate"}),
              "*2\r\n$13\r\nbf-error-rate\r\n$19\r\n0.30000000000000004\r\n");
}

TEST_F(Commands, ConfigGetShowsTheShutdownAndMetricsBounds) {
    config.shutdown_timeout_seconds = 7;
    config.metrics_max_connections_per_client = 3;
    EXPECT_EQ(run({"CONFIG", "GET", "shutdown-timeout"}),
              "*2\r\n$16\r\nshutdown-timeout\r\n$1\r\n7\r\n");
    EXPECT_EQ(run({"CONFIG", "GET", "metrics-max-connections-per-client"}),
              "*2\r\n$34\r\nmetrics-max-connections-per-client\r\n$1\r\n3\r\n");
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
    EXPECT_EQ(run({"MEMORY", "USAGE", "missing"}), "$-1\r\n");
    EXPECT_EQ(run({"MEMORY", "USAGE", "key", "SAMPLES"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"MEMORY", "USAGE", "key", "SAMPLES", "-1"}), "-ERR syntax error\r\n");
    EXPECT_EQ(run({"MEMORY", "USAGE", "key", "SAMPLES", "x"}),
              "-ERR value is not an integer or out of range\r\n");
    EXPECT_EQ(run({"MEMORY", "USAGE"}),
              "-ERR wrong number of arguments for 'memory|usage' command\r\n");
    EXPECT_EQ(run({"MEMORY", "NOPE"}), "-ERR unknown subcommand 'NOPE'. Try MEMORY HELP.\r\n");
}

TEST_F(Commands, MemoryStatsListsRedisFieldsAndADatabaseOnlyWithKeys) {
    std::string reply = run({"MEMORY", "STATS"});
    EXPECT_EQ(reply.rfind("*54\r\n$14\r\npeak.allocated\r\n:", 0), 0u) << reply;
    EXPECT_EQ(reply.find("db.0"), std::string::npos);
    run({"BF.ADD", "k", "a"});
    reply = run({"MEMORY", "STATS"});
    EXPECT_EQ(reply.rfind("*56\r\n", 0), 0u) << reply;
    EXPECT_NE(reply.find("$4\r\ndb.0\r\n*6\r\n$23\r\noverhead.hashtable.main\r\n:"),
              std::string::npos);
    EXPECT_NE(reply.find("$10\r\nkeys.count\r\n:1\r\n"), std::string::npos) << reply;
    EXPECT_NE(reply.find("$19\r\nreplication.backlog\r\n:0\r\n"), std::string::npos);
    EXPECT_NE(reply.find("$19\r\nfragmentation.bytes\r\n:"), std::string::npos);
    EXPECT_EQ(run({"MEMORY", "PURGE"}), "+OK\r\n");
    reply = run({"MEMORY", "DOCTOR"});
    EXPECT_NE(reply.find("less than 5 MB"), std::string::npos) << reply;
    // Unit tests run on the C library's allocator.
    EXPECT_EQ(run({"MEMORY", "MALLOC-STATS"}),
              "$45\r\nStats not supported for the current allocator\r\n");
}

TEST_F(Commands, ObjectAnswersAsRedisForAModuleValue) {
    store::tick_access_clock();  // the server's cron does it every 100 ms
    run({"BF.ADD", "k", "a"});
    EXPECT_EQ(run({"OBJECT", "ENCODING", "k"}), "$3\r\nraw\r\n");
    EXPECT_EQ(run({"OBJECT", "REFCOUNT", "k"}), ":1\r\n");
    EXPECT_EQ(run({"OBJECT", "IDLETIME", "k"}), ":0\r\n");
    // Every use counts while lfu-log-factor is 0, and nothing decays while
    // lfu-decay-time is 0; OBJECT itself is no use of the key.
    struct Restore {
        ~Restore() {
            store::set_lfu_log_factor(10);
            store::set_lfu_decay_time(1);
        }
    } restore_defaults;
    EXPECT_EQ(run({"CONFIG", "GET", "lfu-*"}),
              "*4\r\n$14\r\nlfu-log-factor\r\n$2\r\n10\r\n$14\r\nlfu-decay-time\r\n$1\r\n1\r\n");
    EXPECT_EQ(run({"CONFIG", "SET", "lfu-log-factor", "0"}), "+OK\r\n");
    EXPECT_EQ(run({"CONFIG", "SET", "lfu-decay-time", "0"}), "+OK\r\n");
    EXPECT_EQ(run({"CONFIG", "SET", "lfu-decay-time", "-1"}).rfind("-ERR CONFIG SET failed", 0),
              0u);
    const std::string before = run({"OBJECT", "FREQ", "k"});
    ASSERT_EQ(before.rfind(":", 0), 0u) << before;
    const long counter = std::stol(before.substr(1));
    EXPECT_GE(counter, long{store::key_access::kInitialCount});
    for (int i = 0; i < 10; ++i) run({"BF.EXISTS", "k", "a"});
    EXPECT_EQ(run({"OBJECT", "FREQ", "k"}), ":" + std::to_string(counter + 10) + "\r\n");
    EXPECT_EQ(run({"OBJECT", "FREQ", "k"}), ":" + std::to_string(counter + 10) + "\r\n");
    for (const char* sub : {"ENCODING", "REFCOUNT", "IDLETIME", "FREQ"}) {
        EXPECT_EQ(run({"OBJECT", sub, "missing"}), "$-1\r\n") << sub;
    }
    EXPECT_EQ(run({"OBJECT", "ENCODING"}),
              "-ERR wrong number of arguments for 'object|encoding' command\r\n");
    EXPECT_EQ(run({"OBJECT", "HELP"}).rfind("*", 0), 0u);
}

TEST_F(Commands, LatencyRepliesInRedisShapes) {
    core::latency_reset({});
    EXPECT_EQ(run({"CONFIG", "GET", "latency-monitor-threshold"}),
              "*2\r\n$25\r\nlatency-monitor-threshold\r\n$1\r\n0\r\n");
    EXPECT_NE(run({"LATENCY", "DOCTOR"}).find("Latency monitoring is off"), std::string::npos);
    EXPECT_EQ(run({"CONFIG", "SET", "latency-monitor-threshold", "5"}), "+OK\r\n");
    EXPECT_EQ(core::latency_threshold_ms(), 5);
    EXPECT_EQ(run({"LATENCY", "LATEST"}), "*0\r\n");
    core::latency_add_sample_if_needed(core::kLatencyCommand, 4);
    EXPECT_EQ(run({"LATENCY", "LATEST"}), "*0\r\n");
    core::latency_add_sample_if_needed(core::kLatencyCommand, 12);
    const std::string latest = run({"LATENCY", "LATEST"});
    EXPECT_EQ(latest.rfind("*1\r\n*4\r\n$7\r\ncommand\r\n:", 0), 0u) << latest;
    EXPECT_EQ(latest.substr(latest.size() - 10), ":12\r\n:12\r\n") << latest;
    const std::string history = run({"LATENCY", "HISTORY", "command"});
    EXPECT_EQ(history.rfind("*1\r\n*2\r\n:", 0), 0u) << history;
    EXPECT_EQ(run({"LATENCY", "HISTORY", "none"}), "*0\r\n");
    const std::string graph = run({"LATENCY", "GRAPH", "command"});
    // One sample: on the bottom level of the fourth row, then a blank line
    // and its age ("0s", or "1s" if a second went by) written downwards.
    const std::string drawn = "command - high 12 ms, low 12 ms (all time high 12 ms)\n" +
                              std::string(80, '-') + "\n \n \n \n_\n \n";
    EXPECT_NE(graph.find(drawn), std::string::npos) << graph;
    EXPECT_EQ(graph.substr(graph.find(drawn) + drawn.size(), 4).substr(1, 3), "\ns\n") << graph;
    EXPECT_EQ(run({"LATENCY", "GRAPH", "none"}), "-ERR No samples available for event 'none'\r\n");
    const std::string doctor = run({"LATENCY", "DOCTOR"});
    EXPECT_NE(doctor.find("1. command: 1 latency spikes (average 12ms, mean deviation 0ms"),
              std::string::npos)
        << doctor;
    EXPECT_EQ(run({"LATENCY", "RESET", "COMMAND", "x"}), ":1\r\n");
    EXPECT_EQ(run({"LATENCY", "LATEST"}), "*0\r\n");
    EXPECT_EQ(run({"CONFIG", "SET", "latency-monitor-threshold", "x"}),
              "-ERR CONFIG SET failed (possibly related to argument 'latency-monitor-threshold') - "
              "argument couldn't be parsed into an integer\r\n");
    EXPECT_EQ(run({"CONFIG", "SET", "latency-monitor-threshold", "0"}), "+OK\r\n");
    EXPECT_EQ(run({"LATENCY", "NOPE"}), "-ERR unknown subcommand 'NOPE'. Try LATENCY HELP.\r\n");
}

TEST_F(Commands, LatencyHistogramCountsCallsPerPowerOfTwo) {
    hooks.command_table = &stats.command_stats;
    run({"BF.ADD", "k", "a"});
    run({"BF.ADD", "k", "b"});
    const std::string reply = run({"LATENCY", "HISTOGRAM", "bf.add", "nosuch"});
    EXPECT_EQ(reply.rfind(
                  "*2\r\n$6\r\nbf.add\r\n*4\r\n$5\r\ncalls\r\n:2\r\n$14\r\nhistogram_usec\r\n*", 0),
              0u)
        << reply;
    EXPECT_EQ(reply.substr(reply.size() - 4), ":2\r\n") << reply;  // cumulative
    EXPECT_EQ(run({"LATENCY", "HISTOGRAM", "bf.card"}), "*0\r\n");
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
    EXPECT_EQ(run({"CONFIG", "GET", "client-output-buffer-limit"}),
              "*2\r\n$26\r\nclient-output-buffer-limit\r\n$76\r\nnormal 1073741824 0 0 slave "
              "268435456 67108864 60 pubsub 33554432 8388608 60\r\n");
    EXPECT_EQ(run({"CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 1kb 9"}), "+OK\r\n");
    EXPECT_EQ(config.client_output_buffer_limits.get(core::ClientClass::pubsub),
              (core::OutputBufferLimit{1 << 20, 1024, 9}));
    EXPECT_EQ(
        run({"CONFIG", "SET", "client-output-buffer-limit", "normal 1 2"}),
        "-ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - "
        "Wrong number of arguments in buffer limit configuration.\r\n");
    // Every pair is checked first: a bad second one changes nothing.
    EXPECT_EQ(run({"CONFIG", "SET", "client-output-buffer-limit", "normal 5 5 5",
                   "latency-monitor-threshold", "-1"})
                  .rfind("-ERR CONFIG SET failed", 0),
              0u);
    EXPECT_EQ(config.client_output_buffer_limits.get(core::ClientClass::normal).hard_bytes,
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
