// The write path under allocation failure, through the command layer: a
// command whose record cannot be allocated answers one error, changes
// nothing, and the pipeline stays one reply per command.

#include <gmock/gmock.h>
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
#include "resp_matchers.hpp"

namespace bloomery::command {
namespace {

namespace fs = std::filesystem;
using namespace resp::testing;  // the reply matchers

class WritePath : public ::testing::Test {
protected:
    void SetUp() override {
        const auto built = build_default_registry(registry);
        ASSERT_TRUE(built) << built.error();
        dir = fs::temp_directory_path() / ("write_path_test." + std::to_string(::getpid()));
        fs::create_directories(dir);
        const core::Status opened = journal.open(7, 0, "");
        ASSERT_TRUE(opened.ok()) << opened.error();
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
            DispatchContext ctx{registry, keyspace, config, settings, hooks,
                                client,   stats,    writer, nullptr};
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
    core::RuntimeSettings settings{config};
    testing::FakeHooks hooks;
    ClientState client;
    WorkerStats stats;
    std::string out;
    resp::Writer writer{out};
};

ReplyMatcher error_reply(std::string_view text) {
    return IsError(std::string(text));
}

TEST_F(WritePath, AnAddWhoseRecordCannotBeAllocatedAnswersOneErrorAndAddsNothing) {
    EXPECT_THAT(pipeline({{"BF.ADD", "k", "a"}}), IsInt(1));
    failing.fail_next = 1;
    // One reply per command: the failing add's error, then the others.
    EXPECT_THAT(pipeline({{"BF.ADD", "k", "b"}, {"BF.EXISTS", "k", "b"}, {"BF.ADD", "k", "c"}}),
                Replies(error_reply(errors::kOom), IsInt(0), IsInt(1)));
    failing.fail_next = 1;
    EXPECT_THAT(pipeline({{"BF.MADD", "k", "d", "e"}, {"BF.MEXISTS", "k", "d", "e"}}),
                Replies(IsArray(error_reply(errors::kOom)), IsArray(IsInt(0), IsInt(0))));
    EXPECT_THAT(pipeline({{"BF.INFO", "k", "ITEMS"}}), IsArray(IsInt(2)));
}

TEST_F(WritePath, AnAddThatCannotRecordItsNewKeyAnswersOneErrorAndCreatesNothing) {
    failing.fail_next = 1;  // the new key's CREATE record
    EXPECT_THAT(pipeline({{"BF.MADD", "new", "a", "b", "c"}, {"EXISTS", "new"}}),
                Replies(IsArray(error_reply(errors::kOom)), IsInt(0)));
    failing.fail_next = 1;
    EXPECT_THAT(pipeline({{"BF.ADD", "new", "a"}, {"EXISTS", "new"}}),
                Replies(error_reply(errors::kOom), IsInt(0)));
    EXPECT_THAT(pipeline({{"BF.ADD", "new", "a"}, {"EXISTS", "new"}}), Replies(IsInt(1), IsInt(1)));
}

TEST_F(WritePath, KeyspaceChangesWhoseRecordCannotBeAllocatedChangeNothing) {
    pipeline({{"BF.ADD", "k", "a"}});
    failing.fail_next = 1;
    EXPECT_THAT(pipeline({{"BF.RESERVE", "new", "0.01", "100"}, {"EXISTS", "new"}}),
                Replies(error_reply(errors::kNoMemory), IsInt(0)));
    failing.fail_next = 1;
    EXPECT_THAT(pipeline({{"DEL", "k"}, {"EXISTS", "k"}}),
                Replies(error_reply(errors::kNoMemory), IsInt(1)));
    failing.fail_next = 1;
    EXPECT_THAT(pipeline({{"RENAME", "k", "other"}, {"EXISTS", "k"}}),
                Replies(error_reply(errors::kNoMemory), IsInt(1)));
    failing.fail_next = 1;
    EXPECT_THAT(pipeline({{"EXPIRE", "k", "100"}, {"TTL", "k"}}),
                Replies(error_reply(errors::kNoMemory), IsInt(-1)));
}

TEST_F(WritePath, AChunkWhoseRecordCannotBeAllocatedIsNotApplied) {
    pipeline({{"BF.RESERVE", "src", "0.01", "1000"}, {"BF.MADD", "src", "a", "b", "c"}});
    const bloom::FilterRef source = keyspace.get("src")->value.filter_ref();
    const bloom::DumpChunk header = bloom::dump_chunk(*source, 0);
    const bloom::DumpChunk data = bloom::dump_chunk(*source, header.next_iter);
    EXPECT_THAT(pipeline({{"BF.LOADCHUNK", "dst", "1", header.data}}), IsOk());
    failing.fail_next = 1;
    EXPECT_THAT(pipeline({{"BF.LOADCHUNK", "dst", std::to_string(data.next_iter), data.data},
                          {"BF.EXISTS", "dst", "a"}}),
                Replies(error_reply(errors::kNoMemory), IsInt(0)));
    EXPECT_THAT(pipeline({{"BF.LOADCHUNK", "dst", std::to_string(data.next_iter), data.data},
                          {"BF.EXISTS", "dst", "a"}}),
                Replies(IsOk(), IsInt(1)));
}

}  // namespace
}  // namespace bloomery::command
