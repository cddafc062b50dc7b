// The slow log: Redis's truncation of arguments, redaction, ordering and
// length, thresholds, and SLOWLOG / CONFIG SET through the dispatcher.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/resp/writer.hpp"
#include "fake_hooks.hpp"
#include "resp_matchers.hpp"

namespace bloomery::command {
namespace {

using namespace resp::testing;  // the reply matchers
using ::testing::_;
using ::testing::SizeIs;

std::vector<std::string> capture(const std::vector<std::string>& words,
                                 std::size_t redact_from = ~std::size_t{0}) {
    const std::vector<std::string_view> argv(words.begin(), words.end());
    return Slowlog::capture(argv, std::min(redact_from, argv.size()));
}

TEST(SlowlogCapture, KeepsShortCommandsAsTheyAre) {
    EXPECT_EQ(capture({"BF.ADD", "k", "item"}), (std::vector<std::string>{"BF.ADD", "k", "item"}));
}

TEST(SlowlogCapture, CutsArgumentsPast32WithRedisMarker) {
    std::vector<std::string> words{"BF.MADD", "k"};
    for (int i = 0; i < 98; ++i) words.push_back("i" + std::to_string(i));  // 100 in all
    const std::vector<std::string> kept = capture(words);
    ASSERT_EQ(kept.size(), Slowlog::kMaxArgs);
    EXPECT_EQ(kept[0], "BF.MADD");
    EXPECT_EQ(kept[30], "i28");
    // The 32nd slot names how many of the 100 are not shown: 100 - 31.
    EXPECT_EQ(kept[31], "... (69 more arguments)");
    // Exactly 32 arguments: all kept, no marker.
    words.resize(32);
    EXPECT_EQ(capture(words).back(), "i29");
    words.push_back("x");  // 33: the last two become one marker
    EXPECT_EQ(capture(words).back(), "... (2 more arguments)");
}

TEST(SlowlogCapture, CutsLongArgumentsAt128BytesWithRedisMarker) {
    const std::string exact(128, 'a');
    const std::string longer(300, 'b');
    const std::vector<std::string> kept = capture({"BF.ADD", exact, longer});
    EXPECT_EQ(kept[1], exact);
    EXPECT_EQ(kept[2], std::string(128, 'b') + "... (172 more bytes)");
}

TEST(SlowlogCapture, RedactsCredentials) {
    Registry registry;
    const auto built = build_default_registry(registry);
    ASSERT_TRUE(built) << built.error();
    auto redacted = [&](const std::vector<std::string>& words) {
        const std::vector<std::string_view> argv(words.begin(), words.end());
        return Slowlog::capture(argv, Slowlog::redact_from(registry.find(argv[0]), argv));
    };
    EXPECT_EQ(redacted({"AUTH", "secret"}), (std::vector<std::string>{"AUTH", "(redacted)"}));
    EXPECT_EQ(redacted({"AUTH", "user", "secret"}),
              (std::vector<std::string>{"AUTH", "(redacted)", "(redacted)"}));
    EXPECT_EQ(redacted({"HELLO", "3", "auth", "user", "secret"}),
              (std::vector<std::string>{"HELLO", "3", "auth", "(redacted)", "(redacted)"}));
    EXPECT_EQ(redacted({"HELLO", "3"}), (std::vector<std::string>{"HELLO", "3"}));
    EXPECT_EQ(redacted({"BF.ADD", "auth", "x"}), (std::vector<std::string>{"BF.ADD", "auth", "x"}));
}

TEST(Slowlog, ThresholdsAreRedisOnes) {
    core::RuntimeSettings settings;  // 10 ms
    Slowlog log(settings);
    EXPECT_FALSE(log.is_slow(9'999'999));
    EXPECT_TRUE(log.is_slow(10'000'000));
    settings.set_slowlog_log_slower_than_us(0);  // every command
    EXPECT_TRUE(log.is_slow(0));
    settings.set_slowlog_log_slower_than_us(-5);  // off
    EXPECT_FALSE(log.is_slow(~std::uint64_t{0}));
    EXPECT_EQ(settings.slowlog_log_slower_than_us(), -1);
}

TEST(Slowlog, KeepsTheNewestMaxLenEntriesNewestFirst) {
    core::RuntimeSettings settings;
    settings.set_slowlog_log_slower_than_us(0);
    settings.set_slowlog_max_len(3);
    Slowlog log(settings);
    ClientState client;
    client.address = "127.0.0.1:5000";
    client.set_name("worker-7");
    for (int i = 0; i < 5; ++i) {
        const std::string item = "item" + std::to_string(i);
        const std::vector<std::string_view> argv{"BF.ADD", "k", item};
        log.record(nullptr, argv, 12'345'678, client);
    }
    EXPECT_EQ(log.length(), 3u);
    const std::vector<SlowlogEntry> entries = log.newest(10);
    ASSERT_EQ(entries.size(), 3u);
    EXPECT_EQ(entries[0].id, 4);
    EXPECT_EQ(entries[2].id, 2);
    EXPECT_EQ(entries[0].argv[2], "item4");
    EXPECT_EQ(entries[0].duration_us, 12345);
    EXPECT_EQ(entries[0].client_address, "127.0.0.1:5000");
    EXPECT_EQ(entries[0].client_name, "worker-7");
    EXPECT_GT(entries[0].unix_time, 1700000000);
    EXPECT_EQ(log.newest(1).size(), 1u);
    settings.set_slowlog_max_len(1);
    log.trim();  // shrinking drops the oldest at once
    EXPECT_EQ(log.newest(10).at(0).id, 4);
    EXPECT_EQ(log.length(), 1u);
    log.reset();
    EXPECT_EQ(log.length(), 0u);
    // Ids go on after a reset, as Redis's.
    const std::vector<std::string_view> ping{"PING"};
    log.record(nullptr, ping, 1, client);
    EXPECT_EQ(log.newest(1).at(0).id, 5);
}

class SlowlogCommands : public ::testing::Test {
protected:
    void SetUp() override {
        const auto built = build_default_registry(registry);
        ASSERT_TRUE(built) << built.error();
        client.address = "10.0.0.1:4242";
    }
    std::string run(std::vector<std::string> words) {
        std::vector<std::string_view> argv(words.begin(), words.end());
        out.clear();
        DispatchContext ctx{registry, keyspace, config, settings, hooks,
                            client,   stats,    writer, nullptr,  &slowlog};
        dispatch(registry, ctx, argv);
        return out;
    }

    Registry registry;
    store::Keyspace keyspace{8};
    core::Config config = [] {
        core::Config c;
        c.slowlog_log_slower_than_us = 0;  // every command
        return c;
    }();
    core::RuntimeSettings settings{config};
    testing::FakeHooks hooks;
    ClientState client;
    WorkerStats stats;
    Slowlog slowlog{settings};
    std::string out;
    resp::Writer writer{out};
};

TEST_F(SlowlogCommands, GetAnswersRedisEntryShape) {
    run({"BF.ADD", "k", "a"});
    const std::string reply = run({"SLOWLOG", "GET", "1"});
    // One entry: id, time, duration, argv, address, name.
    EXPECT_THAT(reply, IsArray(IsArray(IsInt(0), IsInt(_), IsInt(_),
                                       IsArray(IsBulk("BF.ADD"), IsBulk("k"), IsBulk("a")),
                                       IsBulk("10.0.0.1:4242"), IsBulk(""))));
}

TEST_F(SlowlogCommands, GetCountsLenAndReset) {
    for (int i = 0; i < 12; ++i) run({"PING"});
    // SLOWLOG GET itself is logged after it answers: 12 PINGs so far.
    EXPECT_THAT(run({"SLOWLOG", "LEN"}), IsInt(12));
    EXPECT_THAT(run({"SLOWLOG", "GET"}), IsArrayThat(SizeIs(10)));        // default 10
    EXPECT_THAT(run({"SLOWLOG", "GET", "-1"}), IsArrayThat(SizeIs(14)));  // all: 12 + LEN + GET
    EXPECT_THAT(run({"SLOWLOG", "GET", "0"}), IsArray());
    EXPECT_THAT(run({"SLOWLOG", "GET", "-2"}),
                IsError("ERR count should be greater than or equal to -1"));
    EXPECT_THAT(run({"SLOWLOG", "GET", "x"}),
                IsError("ERR count should be greater than or equal to -1"));
    EXPECT_THAT(run({"SLOWLOG", "RESET"}), IsOk());
    EXPECT_THAT(run({"SLOWLOG", "LEN"}), IsInt(1));  // the RESET itself
    EXPECT_EQ(
        run({"SLOWLOG", "NOPE"}).rfind("-ERR unknown subcommand 'NOPE'. Try SLOWLOG HELP.", 0), 0u);
    EXPECT_EQ(run({"SLOWLOG", "HELP"}).rfind("*", 0), 0u);
}

TEST_F(SlowlogCommands, ConfigSetChangesTheSlowlogSettings) {
    EXPECT_THAT(run({"CONFIG", "SET", "slowlog-log-slower-than", "-1", "slowlog-max-len", "5"}),
                IsOk());
    EXPECT_EQ(settings.slowlog_log_slower_than_us(), -1);
    EXPECT_EQ(settings.slowlog_max_len(), 5u);
    EXPECT_THAT(run({"CONFIG", "GET", "slowlog-*"}),
                IsArray(IsBulk("slowlog-log-slower-than"), IsBulk("-1"), IsBulk("slowlog-max-len"),
                        IsBulk("5")));
    // A bad pair changes nothing, not even the good one before it.
    EXPECT_THAT(run({"CONFIG", "SET", "slowlog-max-len", "7", "slowlog-log-slower-than", "soon"}),
                IsError("ERR CONFIG SET failed (possibly related to argument "
                        "'slowlog-log-slower-than') - argument couldn't be "
                        "parsed into an integer"));
    EXPECT_EQ(settings.slowlog_max_len(), 5u);
    EXPECT_THAT(run({"CONFIG", "SET", "slowlog-max-len", "-1"}),
                IsError("ERR CONFIG SET failed (possibly related to argument "
                        "'slowlog-max-len') - argument must be between 0 and "
                        "100000 inclusive"));
    EXPECT_THAT(run({"CONFIG", "SET", "slowlog-max-len", "1", "SLOWLOG-MAX-LEN", "2"}),
                IsError("ERR CONFIG SET failed (possibly related to argument "
                        "'slowlog-max-len') - duplicate parameter"));
    EXPECT_EQ(run({"CONFIG", "SET", "slowlog-max-len", "1", "maxmemory", "1"})
                  .rfind("-ERR CONFIG SET is not supported by bloomery for 'maxmemory'", 0),
              0u);
    EXPECT_THAT(run({"CONFIG", "SET", "slowlog-max-len", "1", "slowlog-log-slower-than"}),
                IsError("ERR wrong number of arguments for 'config|set' command"));
    EXPECT_EQ(settings.slowlog_max_len(), 5u);
}

}  // namespace
}  // namespace bloomery::command
