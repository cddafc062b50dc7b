// DeferredReply: a reply completed later, exactly once, from any thread.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/command/context.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/resp/writer.hpp"
#include "resp_matchers.hpp"

namespace bloomery::command {
namespace {

using resp::testing::IsError;
using resp::testing::IsOk;
using ::testing::ElementsAre;

// Records every delivery; a real connection posts it to its own thread.
class RecordingSink : public ReplySink {
public:
    void deliver(ReplyWriter write_reply) override {
        std::lock_guard lock(mutex);
        std::string out;
        resp::Writer writer(out);
        write_reply(writer);
        replies.push_back(out);
    }
    std::vector<std::string> taken() {
        std::lock_guard lock(mutex);
        return replies;
    }

    std::mutex mutex;
    std::vector<std::string> replies;
};

TEST(DeferredReply, FirstCompletionIsDeliveredAndLaterOnesDoNothing) {
    auto sink = std::make_shared<RecordingSink>();
    {
        const DeferredReply reply(sink);
        ASSERT_TRUE(reply);
        reply.complete([](resp::Writer& out) { out.ok(); });
        reply.complete([](resp::Writer& out) { out.error("ERR second"); });
        const DeferredReply copy = reply;
        copy.complete([](resp::Writer& out) { out.error("ERR third"); });
    }
    EXPECT_THAT(sink->taken(), ElementsAre(IsOk()));
}

TEST(DeferredReply, HandleDroppedWithoutCompletionAnswersAnErrorOnce) {
    auto sink = std::make_shared<RecordingSink>();
    {
        const DeferredReply reply(sink);
        const DeferredReply copy = reply;  // the last copy's end delivers
    }
    EXPECT_THAT(sink->taken(), ElementsAre(IsError(std::string(errors::kNoReply))));
}

TEST(DeferredReply, EmptyHandleIgnoresCompletion) {
    const DeferredReply reply;
    EXPECT_FALSE(reply);
    reply.complete([](resp::Writer& out) { out.ok(); });  // nothing to deliver to
}

TEST(DeferredReply, RacingCompletionsFromManyThreadsDeliverExactlyOne) {
    for (int round = 0; round < 50; ++round) {
        auto sink = std::make_shared<RecordingSink>();
        std::vector<std::thread> threads;
        {
            const DeferredReply reply(sink);
            for (int t = 0; t < 4; ++t) {
                threads.emplace_back(
                    [reply, t] { reply.complete([t](resp::Writer& out) { out.integer(t); }); });
            }
        }
        for (auto& thread : threads) thread.join();
        ASSERT_EQ(sink->taken().size(), 1u) << "round " << round;
    }
}

}  // namespace
}  // namespace bloomery::command
