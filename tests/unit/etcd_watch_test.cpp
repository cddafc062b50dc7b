// EtcdClient::watch against a real etcd member: events in order, resuming
// from a revision, stopping, and etcd's compacted-revision answer.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "bloomery/cluster/etcd.hpp"
#include "etcd_test_cluster.hpp"

namespace bloomery::cluster {
namespace {

using testing::EtcdTestCluster;
using namespace std::chrono_literals;

using testing::make_client;

// A watch on a thread of its own, collecting what it is told.
class WatchRecorder {
public:
    WatchRecorder(EtcdClient& client, std::string prefix, std::int64_t start_revision)
        : thread_([this, &client, prefix, start_revision](std::stop_token stop) {
              end_ = client.watch(
                  prefix, start_revision,
                  [this](const std::vector<EtcdEvent>& events, std::int64_t) {
                      std::lock_guard lock(mutex_);
                      events_.insert(events_.end(), events.begin(), events.end());
                      changed_.notify_all();
                  },
                  stop);
              std::lock_guard lock(mutex_);
              ended_ = true;
              changed_.notify_all();
          }) {}

    // The first `count` events, waiting at most 10 s for them.
    std::vector<EtcdEvent> wait_for(std::size_t count) {
        std::unique_lock lock(mutex_);
        changed_.wait_for(lock, 10s, [&] { return events_.size() >= count || ended_; });
        return events_;
    }
    core::Result<EtcdWatchEnd> stop() {
        thread_.request_stop();
        thread_.join();
        return end_;
    }
    core::Result<EtcdWatchEnd> wait_end() {
        thread_.join();
        return end_;
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    std::vector<EtcdEvent> events_;
    bool ended_ = false;
    core::Result<EtcdWatchEnd> end_ = core::Error{"still running"};
    std::jthread thread_;  // last: it uses the members above
};

TEST(EtcdWatch, SeesPutsAndDeletesInOrderAndResumesFromARevision) {
    EtcdTestCluster etcd;
    auto client = make_client(etcd.settings());
    auto watcher_client = make_client(etcd.settings());
    std::vector<EtcdEvent> seen;
    {
        WatchRecorder watch(*watcher_client, "/w/", 0);
        // The watch starts "from now": wait until it is in place by watching
        // a key of its own appear.
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (watch.wait_for(0).empty() && std::chrono::steady_clock::now() < deadline) {
            ASSERT_TRUE(client->put("/w/probe", "p"));
            std::this_thread::sleep_for(20ms);
        }
        const std::size_t probes = watch.wait_for(0).size();
        ASSERT_GT(probes, 0u);
        ASSERT_TRUE(client->put("/w/a", "1"));
        ASSERT_TRUE(client->put("/outside", "x"));
        ASSERT_TRUE(client->put("/w/b", "2"));
        ASSERT_TRUE(client->erase("/w/a"));
        seen = watch.wait_for(probes + 3);
        ASSERT_GE(seen.size(), probes + 3);
        seen.erase(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(probes));
        const auto stopping = std::chrono::steady_clock::now();
        auto end = watch.stop();
        ASSERT_TRUE(end) << end.error();
        EXPECT_EQ(*end, EtcdWatchEnd::stopped);
        // Within request_timeout (1 s by default), though etcd sent nothing.
        EXPECT_LT(std::chrono::steady_clock::now() - stopping, 1s);
    }
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[0].type, EtcdEvent::Type::put);
    EXPECT_EQ(seen[0].kv.key, "/w/a");
    EXPECT_EQ(seen[0].kv.value, "1");
    EXPECT_EQ(seen[1].kv.key, "/w/b");
    EXPECT_EQ(seen[2].type, EtcdEvent::Type::erase);
    EXPECT_EQ(seen[2].kv.key, "/w/a");
    EXPECT_LT(seen[0].kv.mod_revision, seen[1].kv.mod_revision);
    EXPECT_LT(seen[1].kv.mod_revision, seen[2].kv.mod_revision);

    // Resuming from the second event's revision replays it and what followed.
    WatchRecorder resumed(*watcher_client, "/w/", seen[1].kv.mod_revision);
    auto again = resumed.wait_for(2);
    ASSERT_EQ(again.size(), 2u);
    EXPECT_EQ(again[0].kv.key, "/w/b");
    EXPECT_EQ(again[1].type, EtcdEvent::Type::erase);
    EXPECT_EQ(again[1].kv.mod_revision, seen[2].kv.mod_revision);
    watcher_client->cancel();  // from another thread, as a stop_token would
    auto end = resumed.wait_end();
    ASSERT_TRUE(end) << end.error();
    EXPECT_EQ(*end, EtcdWatchEnd::stopped);
}

TEST(EtcdWatch, StartingBeforeTheCompactedRevisionSaysSo) {
    EtcdTestCluster etcd;
    auto client = make_client(etcd.settings());
    std::int64_t last = 0;
    for (int i = 0; i < 4; ++i) last = *client->put("/c/key", std::to_string(i));
    etcd.etcdctl("compact " + std::to_string(last));
    WatchRecorder watch(*client, "/c/", 1);
    auto end = watch.wait_end();
    ASSERT_TRUE(end) << end.error();
    EXPECT_EQ(*end, EtcdWatchEnd::compacted);
}

}  // namespace
}  // namespace bloomery::cluster
