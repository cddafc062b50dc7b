// Writes held while MIGRATE sends a key (cluster/write_holds.hpp): who
// waits, when they are resumed, and with what.

#include "bloomery/cluster/write_holds.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace bloomery::cluster {
namespace {

TEST(WriteHolds, AWriterWaitsForTheHoldAndLearnsWhetherTheKeyMoved) {
    WriteHolds holds;
    EXPECT_FALSE(holds.any());
    EXPECT_FALSE(holds.wait_if_held("k", [](bool) { FAIL() << "nothing is held"; }));
    holds.hold({"k", "stays"});
    EXPECT_TRUE(holds.any());
    EXPECT_TRUE(holds.held("k"));
    EXPECT_FALSE(holds.held("other"));
    std::vector<std::string> resumed;
    EXPECT_TRUE(holds.wait_if_held(
        "k", [&](bool moved) { resumed.push_back(moved ? "k moved" : "k stayed"); }));
    EXPECT_TRUE(holds.wait_if_held(
        "stays", [&](bool moved) { resumed.push_back(moved ? "stays moved" : "stays stayed"); }));
    EXPECT_TRUE(resumed.empty());
    holds.release({"k", "stays"}, [](std::string_view key) { return key == "k"; });
    EXPECT_EQ(resumed, (std::vector<std::string>{"k moved", "stays stayed"}));
    EXPECT_FALSE(holds.any());
    EXPECT_FALSE(holds.held("k"));
}

TEST(WriteHolds, AKeyHeldTwiceIsReleasedByItsLastHolder) {
    WriteHolds holds;
    holds.hold({"k"});
    holds.hold({"k"});
    int resumed = 0;
    ASSERT_TRUE(holds.wait_if_held("k", [&](bool) { ++resumed; }));
    holds.release({"k"}, [](std::string_view) { return true; });
    EXPECT_EQ(resumed, 0);
    EXPECT_TRUE(holds.held("k"));
    holds.release({"k"}, [](std::string_view) { return true; });
    EXPECT_EQ(resumed, 1);
    // A release of what is not held changes nothing.
    holds.release({"k"}, [](std::string_view) { return true; });
    EXPECT_EQ(resumed, 1);
}

TEST(WriteHolds, WaitersLeftAtTheEndAreResumedAsIfTheKeyStayed) {
    std::vector<bool> outcomes;
    {
        WriteHolds holds;
        holds.hold({"k"});
        ASSERT_TRUE(holds.wait_if_held("k", [&](bool moved) { outcomes.push_back(moved); }));
    }
    EXPECT_EQ(outcomes, std::vector<bool>{false});
}

TEST(WriteHolds, EveryWaiterIsResumedOnceUnderConcurrentWritersAndReleases) {
    WriteHolds holds;
    std::atomic<int> queued{0};
    std::atomic<int> resumed{0};
    std::atomic<bool> done{false};
    std::vector<std::thread> writers;
    for (int t = 0; t < 4; ++t) {
        writers.emplace_back([&] {
            while (!done.load()) {
                if (holds.wait_if_held("k", [&](bool) { resumed.fetch_add(1); })) {
                    queued.fetch_add(1);
                }
            }
        });
    }
    for (int round = 0; round < 2000; ++round) {
        holds.hold({"k"});
        holds.release({"k"}, [](std::string_view) { return false; });
    }
    done.store(true);
    for (std::thread& writer : writers) writer.join();
    EXPECT_FALSE(holds.any());
    EXPECT_EQ(resumed.load(), queued.load());
}

}  // namespace
}  // namespace bloomery::cluster
