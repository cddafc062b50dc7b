#pragma once
// A stand-in for the network layer's server (command/server.hpp) in command tests:
// answers with fixed data and records what the commands asked of it.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bloomery/command/pubsub.hpp"
#include "bloomery/command/server.hpp"

namespace bloomery::command::testing {

class FakeHooks final : public command::ClientDirectory,
                        public command::ServerStats,
                        public command::Persistence,
                        public command::Shutdown,
                        public command::Replication,
                        public command::ReplicaGate,
                        public command::Migration {
public:
    std::size_t connected_clients() override { return 1; }
    std::int64_t blocked_clients() override { return blocked; }
    std::string client_list(std::span<const std::int64_t>) override {
        return "id=1 addr=127.0.0.1:1 name=\n";
    }
    bool kill_client(std::int64_t id) override { return id == 1; }
    bool kill_client(std::string_view) override { return false; }
    command::StatsTotals stats() override { return {}; }
    // The per-command counters of `command_table` (a test's WorkerStats), as
    // the server sums every worker's.
    std::vector<core::CommandTotals> command_stats() override {
        if (command_table == nullptr) return {};
        std::vector<core::CommandTotals> totals(core::kMaxCommandIds);
        core::add_command_stats(totals, *command_table);
        return totals;
    }
    void reset_stats() override {}
    void save_async(std::function<void(persist::SaveResult)> done) override {
        ++saves;
        if (fail_saves) {
            done({persist::SaveStatus::failed, "disk on fire"});
        } else {
            done({});
        }
    }
    persist::SaveResult bgsave() override { return {}; }
    persist::PersistenceInfo persistence() override { return {}; }
    bool snapshot_failing() override { return snapshot_failed; }
    void begin_shutdown(const command::ShutdownOptions& options,
                        std::function<void()> failed) override {
        last_shutdown = options;
        shutdown_failed = std::move(failed);
    }
    void abort_shutdown(std::function<void(bool)> done) override {
        const bool cancelled = static_cast<bool>(shutdown_failed);
        if (cancelled) std::exchange(shutdown_failed, nullptr)();
        done(cancelled);
    }
    std::int64_t start_time_ms() override { return 0; }
    unsigned worker_threads() override { return 1; }
    command::PubSub& pubsub() { return channels; }
    cluster::ClusterState& cluster_state() { return cluster; }

    command::PubSub channels;
    cluster::ClusterState cluster;
    const core::CommandStatsTable* command_table = nullptr;
    int saves = 0;
    std::int64_t blocked = 0;  // blocked_clients()
    bool snapshot_failed = false;
    bool fail_saves = false;
    command::ShutdownOptions last_shutdown;
    std::function<void()> shutdown_failed;  // the pending SHUTDOWN's, until aborted
};

}  // namespace bloomery::command::testing
