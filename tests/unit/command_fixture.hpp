#pragma once
// The fixture of the command tests: the command table of proto/commands.json,
// a keyspace, a configuration, a fake server (fake_hooks.hpp) and a reply
// writer. run() dispatches one command as a connection does and returns the
// bytes of its reply (resp_matchers.hpp reads them).

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/command/context.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/options.hpp"
#include "bloomery/resp/writer.hpp"
#include "bloomery/store/keyspace.hpp"
#include "fake_hooks.hpp"

namespace bloomery::command::testing {

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
        DispatchContext ctx{registry, keyspace, config, settings,  hooks,
                            client,   stats,    writer, &suspender};
        dispatch(registry, ctx, argv);
        for (auto& write_reply : suspender.delivered) write_reply(writer);
        suspender.delivered.clear();
        return out;
    }

    Registry registry;
    core::Config config;
    core::RuntimeSettings settings{config};
    store::Keyspace keyspace{8, settings.lfu()};
    FakeHooks hooks;
    FakeSuspender suspender;
    ClientState client;
    WorkerStats stats;
    std::string out;
    resp::Writer writer{out};
};

}  // namespace bloomery::command::testing
