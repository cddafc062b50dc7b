#pragma once
// The server's counters as INFO, CONFIG RESETSTAT and /metrics see them:
// every worker's counters summed when read (a worker writes only its own),
// the ops/sec samples the cron takes, and the baselines CONFIG RESETSTAT
// sets. Implements the command layer's ServerStats.

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bloomery/command/registry.hpp"
#include "bloomery/command/server.hpp"
#include "bloomery/core/command_stats.hpp"
#include "bloomery/store/keyspace.hpp"
#include "worker_pool.hpp"

namespace bloomery::net {

class ServerStatistics final : public command::ServerStats {
public:
    // Counts from now (start_time_ms) what the workers of `pool` count.
    ServerStatistics(const store::Keyspace& keyspace, const command::Registry& registry,
                     const WorkerPool& pool);

    // command::ServerStats; any thread.
    command::StatsTotals stats() override;
    void reset_stats() override;
    std::vector<core::CommandTotals> command_stats() override;
    std::vector<std::pair<std::string, std::uint64_t>> error_stats() override;
    std::int64_t start_time_ms() override { return start_time_ms_; }
    unsigned worker_threads() override { return pool_.size(); }

    // Writes so far (never reset), for save points. Lock-free.
    std::uint64_t total_changes() const { return raw_totals().changes; }
    // Takes the ops/sec sample of the commands run since the last one. The
    // cron, every 100 ms.
    void sample_ops(std::int64_t now_ms);

private:
    // Sums of the per-thread counters, without CONFIG RESETSTAT baselines.
    command::StatsTotals raw_totals() const;
    std::vector<core::CommandTotals> raw_command_stats() const;

    const store::Keyspace& keyspace_;
    const command::Registry& registry_;
    const WorkerPool& pool_;
    const std::int64_t start_time_ms_;
    // ops/sec: Redis-style samples of the command counter every 100 ms.
    static constexpr std::size_t kOpsSamples = 16;
    std::mutex mutex_;  // guards everything below
    std::uint64_t ops_samples_[kOpsSamples] = {};
    std::size_t ops_index_ = 0;
    std::uint64_t last_commands_ = 0;
    std::int64_t last_sample_ms_ = 0;
    command::StatsTotals stats_base_;                      // CONFIG RESETSTAT baseline
    std::vector<core::CommandTotals> command_stats_base_;  // likewise
};

}  // namespace bloomery::net
