// The server's counters (server_statistics.hpp).

#include "server_statistics.hpp"

#include <algorithm>

#include "bloomery/core/error_stats.hpp"

namespace bloomery::net {

namespace {

// Every per-thread counter and the total it feeds.
struct CounterField {
    std::atomic<std::uint64_t> command::WorkerStats::*worker;
    std::uint64_t command::StatsTotals::*total;
};
constexpr CounterField kCounterFields[] = {
    {&command::WorkerStats::commands, &command::StatsTotals::commands},
    {&command::WorkerStats::connections_received, &command::StatsTotals::connections_received},
    {&command::WorkerStats::rejected_connections, &command::StatsTotals::rejected_connections},
    {&command::WorkerStats::changes, &command::StatsTotals::changes},
    {&command::WorkerStats::keyspace_hits, &command::StatsTotals::keyspace_hits},
    {&command::WorkerStats::keyspace_misses, &command::StatsTotals::keyspace_misses},
    {&command::WorkerStats::protocol_errors, &command::StatsTotals::protocol_errors},
    {&command::WorkerStats::net_input_bytes, &command::StatsTotals::net_input_bytes},
    {&command::WorkerStats::net_output_bytes, &command::StatsTotals::net_output_bytes},
    {&command::WorkerStats::net_repl_output_bytes, &command::StatsTotals::net_repl_output_bytes},
    {&command::WorkerStats::reads_processed, &command::StatsTotals::reads_processed},
    {&command::WorkerStats::writes_processed, &command::StatsTotals::writes_processed},
    {&command::WorkerStats::error_replies, &command::StatsTotals::error_replies},
    {&command::WorkerStats::query_buffer_limit_disconnections,
     &command::StatsTotals::query_buffer_limit_disconnections},
    {&command::WorkerStats::output_buffer_limit_disconnections,
     &command::StatsTotals::output_buffer_limit_disconnections},
};

}  // namespace

ServerStatistics::ServerStatistics(const store::Keyspace& keyspace,
                                   const command::Registry& registry, const WorkerPool& pool)
    : keyspace_(keyspace), registry_(registry), pool_(pool), start_time_ms_(store::now_ms()) {}

command::StatsTotals ServerStatistics::raw_totals() const {
    command::StatsTotals t;
    t.expired_keys = keyspace_.expired_keys();
    for (const auto& worker : pool_.workers()) {
        for (const CounterField& field : kCounterFields) {
            t.*field.total += (worker->stats.*field.worker).load(std::memory_order_relaxed);
        }
    }
    return t;
}

command::StatsTotals ServerStatistics::stats() {
    command::StatsTotals t = raw_totals();
    std::lock_guard lock(mutex_);
    std::uint64_t sum = 0;
    for (std::uint64_t sample : ops_samples_) sum += sample;
    t.instantaneous_ops_per_sec = static_cast<double>(sum) / kOpsSamples;
    // CONFIG RESETSTAT baselines (counters only grow, so never above t).
    for (const CounterField& field : kCounterFields) t.*field.total -= stats_base_.*field.total;
    t.expired_keys -= stats_base_.expired_keys;
    return t;
}

void ServerStatistics::reset_stats() {
    command::StatsTotals base = raw_totals();
    base.changes = 0;  // never reset: save points depend on the running count
    std::vector<core::CommandTotals> command_base = raw_command_stats();
    core::reset_error_stats();
    std::lock_guard lock(mutex_);
    stats_base_ = base;
    command_stats_base_ = std::move(command_base);
}

std::vector<std::pair<std::string, std::uint64_t>> ServerStatistics::error_stats() {
    std::vector<const core::ErrorStatsTable*> tables;
    tables.reserve(pool_.size());
    for (const auto& worker : pool_.workers()) tables.push_back(&worker->stats.error_stats);
    return core::error_stats_sum(tables);
}

std::vector<core::CommandTotals> ServerStatistics::raw_command_stats() const {
    std::vector<core::CommandTotals> totals(
        std::min(registry_.by_id().size(), core::kMaxCommandIds));
    for (const auto& worker : pool_.workers())
        core::add_command_stats(totals, worker->stats.command_stats);
    return totals;
}

std::vector<core::CommandTotals> ServerStatistics::command_stats() {
    std::vector<core::CommandTotals> totals = raw_command_stats();
    std::lock_guard lock(mutex_);
    core::subtract_command_stats(totals, command_stats_base_);
    return totals;
}

void ServerStatistics::sample_ops(std::int64_t now_ms) {
    std::uint64_t commands = 0;
    for (const auto& worker : pool_.workers())
        commands += worker->stats.commands.load(std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    if (last_sample_ms_ != 0 && now_ms > last_sample_ms_) {
        ops_samples_[ops_index_] = (commands - last_commands_) * 1000 /
                                   static_cast<std::uint64_t>(now_ms - last_sample_ms_);
        ops_index_ = (ops_index_ + 1) % kOpsSamples;
    }
    last_commands_ = commands;
    last_sample_ms_ = now_ms;
}

}  // namespace bloomery::net
