// The write path under allocation failure, through the command layer: a
// command whose record cannot be allocated answers one error, changes
// nothing, and the pipeline stays one reply per command.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/resp/writer.hpp"
#include "failing_log.hpp"
#include "fake_hooks.hpp"

namespace bloomery::command {
namespace {

namespace fs = std::filesystem;

class WritePath : public ::testing::Test {
protected:
    void SetUp() override {
        const auto built = build_default_registry(registry);
        ASSERT_TRUE(built) << built.error();
        dir = fs::temp_directory_path() / ("write_path_test." + std::to_string(::getpid()));
        fs::create_directories(dir);
        std::string error;
        ASSERT_TRUE(journal.open(7, 0, "", error)) << error;
        keyspace.set_mutation_log(&failing);
    }
    void TearDown() override {
        keyspace.set_mutation_log(nullptr);
        journal.close();
        std::error_code ignored;
        fs::remove_all(dir, ignored);
    }

    // Runs the commands as one pipeline into one output buffer, as a
    // connection does, and returns everything they wrote.
    std::string pipeline(const std::vector<std::vector<std::string>>& commands) {
        out.clear();
        for (const auto& words : commands) {
            std::vector<std::string_view> argv(words.begin(), words.end());
            DispatchContext ctx{registry, keyspace, config, hooks, client, stats, writer, nullptr};
            dispatch(registry, ctx, argv);
        }
        return out;
    }

    fs::path dir;
    Registry registry;
    store::Keyspace keyspace{8};
    persist::Journal journal{
        (fs::temp_directory_path() / ("write_path_test." + std::to_string(::getpid()))).string(),
        "journal", persist::FsyncPolicy::no, 64ull << 20};
    persist::testing::FailingLog failing{journal};
    core::Config config;
    testing::FakeHooks hooks;
    ClientState client;
    WorkerStats stats;
    std::string out;
    resp::Writer writer{out};
};

std::string error_reply(std::string_view text) {
    return "-" + std::string(text) + "\r\n";
}

TEST_F(WritePath, AnAddWhoseRecordCannotBeAllocatedAnswersOneErrorAndAddsNothing) {
    EXPECT_EQ(pipeline({{"BF.ADD", "k", "a"}}), ":1\r\n");
    failing.fail_next = 1;
    // One reply per command: the failing add's error, then the others.
    EXPECT_EQ(pipeline({{"BF.ADD", "k", "b"}, {"BF.EXISTS", "k", "b"}, {"BF.ADD", "k", "c"}}),
              error_reply(errors::kOom) + ":0\r\n:1\r\n");
    failing.fail_next = 1;
    EXPECT_EQ(pipeline({{"BF.MADD", "k", "d", "e"}, {"BF.MEXISTS", "k", "d", "e"}}),
              "*1\r\n" + error_reply(errors::kOom) + "*2\r\n:0\r\n:0\r\n");
    EXPECT_EQ(pipeline({{"BF.INFO", "k", "ITEMS"}}), "*1\r\n:2\r\n");
}

TEST_F(WritePath, AnAddThatCannotRecordItsNewKeyAnswersOneErrorAndCreatesNothing) {
    failing.fail_next = 1;  // the new key's CREATE record
    EXPECT_EQ(pipeline({{"BF.MADD", "new", "a", "b", "c"}, {"EXISTS", "new"}}),
              "*1\r\n" + error_reply(errors::kOom) + ":0\r\n");
    failing.fail_next = 1;
    EXPECT_EQ(pipeline({{"BF.ADD", "new", "a"}, {"EXISTS", "new"}}),
              error_reply(errors::kOom) + ":0\r\n");
    EXPECT_EQ(pipeline({{"BF.ADD", "new", "a"}, {"EXISTS", "new"}}), ":1\r\n:1\r\n");
}

TEST_F(WritePath, KeyspaceChangesWhoseRecordCannotBeAllocatedChangeNothing) {
    pipeline({{"BF.ADD", "k", "a"}});
    failing.fail_next = 1;
    EXPECT_EQ(pipeline({{"BF.RESERVE", "new", "0.01", "100"}, {"EXISTS", "new"}}),
              error_reply(errors::kNoMemory) + ":0\r\n");
    failing.fail_next = 1;
    EXPECT_EQ(pipeline({{"DEL", "k"}, {"EXISTS", "k"}}), error_reply(errors::kNoMemory) + ":1\r\n");
    failing.fail_next = 1;
    EXPECT_EQ(pipeline({{"RENAME", "k", "other"}, {"EXISTS", "k"}}),
              error_reply(errors::kNoMemory) + ":1\r\n");
    failing.fail_next = 1;
    EXPECT_EQ(pipeline({{"EXPIRE", "k", "100"}, {"TTL", "k"}}),
              error_reply(errors::kNoMemory) + ":-1\r\n");
}

TEST_F(WritePath, AChunkWhoseRecordCannotBeAllocatedIsNotApplied) {
    pipeline({{"BF.RESERVE", "src", "0.01", "1000"}, {"BF.MADD", "src", "a", "b", "c"}});
    const bloom::FilterRef source = keyspace.get("src")->filter;
    const bloom::DumpChunk header = bloom::dump_chunk(*source, 0);
    const bloom::DumpChunk data = bloom::dump_chunk(*source, header.next_iter);
    EXPECT_EQ(pipeline({{"BF.LOADCHUNK", "dst", "1", header.data}}), "+OK\r\n");
    failing.fail_next = 1;
    EXPECT_EQ(pipeline({{"BF.LOADCHUNK", "dst", std::to_string(data.next_iter), data.data},
                        {"BF.EXISTS", "dst", "a"}}),
              error_reply(errors::kNoMemory) + ":0\r\n");
    EXPECT_EQ(pipeline({{"BF.LOADCHUNK", "dst", std::to_string(data.next_iter), data.data},
                        {"BF.EXISTS", "dst", "a"}}),
              "+OK\r\n:1\r\n");
}

}  // namespace
}  // namespace bloomery::command
