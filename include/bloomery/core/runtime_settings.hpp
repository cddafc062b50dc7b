#pragma once
// The settings that change while the server runs (CONFIG SET), in one
// object. It is made from the Config at start (which keeps the values as
// they were configured), changed only by the option spec's setters
// (core/options.hpp), and read by what follows the settings: the store's
// key use counters (LfuSettings), the slow log, the connections' output
// buffer limits, the eviction of clients past maxmemory-clients and the
// latency monitor. The server owns one; the command layer reaches it through
// command::Context, the store through the LfuSettings it was given.
//
// Thread safety: every value is an atomic, read and written relaxed: a
// reader racing a change sees the old value or the new one (the output
// buffer limits number by number: one check may pair an old hard limit with
// a new soft one). A read on a hot path is one relaxed load.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "bloomery/core/config.hpp"

namespace bloomery::core {

// How keys' use counters grow and fade (OBJECT FREQ; store/key_access.hpp),
// as Redis's LFU settings.
class LfuSettings {
public:
    LfuSettings(std::int64_t log_factor, std::int64_t decay_minutes)
        : log_factor_(log_factor), decay_minutes_(decay_minutes) {}
    LfuSettings(const LfuSettings&) = delete;
    LfuSettings& operator=(const LfuSettings&) = delete;

    // Config's defaults (Redis's), never changed: what a keyspace made
    // without settings of its own follows.
    static const LfuSettings& defaults();

    // lfu-log-factor: the counter's logarithm base (about a million uses
    // reach 255 at 10).
    std::int64_t log_factor() const { return log_factor_.load(std::memory_order_relaxed); }
    void set_log_factor(std::int64_t factor) {
        log_factor_.store(factor, std::memory_order_relaxed);
    }
    // lfu-decay-time: minutes for an unused key's counter to lose one (0:
    // never).
    std::int64_t decay_minutes() const { return decay_minutes_.load(std::memory_order_relaxed); }
    void set_decay_minutes(std::int64_t minutes) {
        decay_minutes_.store(minutes, std::memory_order_relaxed);
    }

private:
    std::atomic<std::int64_t> log_factor_;
    std::atomic<std::int64_t> decay_minutes_;
};

class RuntimeSettings {
public:
    // Config's defaults.
    RuntimeSettings();
    // The values `start` was configured with.
    explicit RuntimeSettings(const Config& start);
    RuntimeSettings(const RuntimeSettings&) = delete;
    RuntimeSettings& operator=(const RuntimeSettings&) = delete;

    LfuSettings& lfu() { return lfu_; }
    const LfuSettings& lfu() const { return lfu_; }

    // latency-monitor-threshold in milliseconds (0: off). Setting it also
    // sets the threshold of the process-wide latency monitor
    // (core/latency_monitor.hpp), which every layer records against, the
    // persistence threads included.
    std::int64_t latency_monitor_threshold_ms() const {
        return latency_threshold_ms_.load(std::memory_order_relaxed);
    }
    void set_latency_monitor_threshold_ms(std::int64_t milliseconds);

    // slowlog-log-slower-than in microseconds (-1: off; 0: every command),
    // kept in nanoseconds for the check after every command. Thresholds
    // past 2^63 - 1 ns are that; a negative one reads back as -1.
    std::int64_t slowlog_threshold_ns() const {
        return slowlog_threshold_ns_.load(std::memory_order_relaxed);
    }
    std::int64_t slowlog_log_slower_than_us() const;
    void set_slowlog_log_slower_than_us(std::int64_t microseconds);
    // slowlog-max-len: the most entries the slow log keeps.
    std::size_t slowlog_max_len() const { return slowlog_max_len_.load(std::memory_order_relaxed); }
    void set_slowlog_max_len(std::size_t entries) {
        slowlog_max_len_.store(entries, std::memory_order_relaxed);
    }

    // min-replicas-to-write and min-replicas-max-lag (seconds): while
    // both are above 0, a primary takes writes only with that many
    // replicas acknowledged within the lag (ReplicaGate::good_replicas).
    std::int64_t min_replicas_to_write() const {
        return min_replicas_to_write_.load(std::memory_order_relaxed);
    }
    void set_min_replicas_to_write(std::int64_t count) {
        min_replicas_to_write_.store(count, std::memory_order_relaxed);
    }
    std::int64_t min_replicas_max_lag_seconds() const {
        return min_replicas_max_lag_.load(std::memory_order_relaxed);
    }
    void set_min_replicas_max_lag_seconds(std::int64_t seconds) {
        min_replicas_max_lag_.store(seconds, std::memory_order_relaxed);
    }

    // client-output-buffer-limit, every class.
    OutputBufferLimits& client_output_buffer_limits() { return output_buffer_limits_; }
    const OutputBufferLimits& client_output_buffer_limits() const { return output_buffer_limits_; }
    // maxmemory-clients.
    ClientsMemoryLimit& maxmemory_clients() { return maxmemory_clients_; }
    const ClientsMemoryLimit& maxmemory_clients() const { return maxmemory_clients_; }

private:
    LfuSettings lfu_;
    std::atomic<std::int64_t> latency_threshold_ms_;
    std::atomic<std::int64_t> slowlog_threshold_ns_;
    std::atomic<std::size_t> slowlog_max_len_;
    std::atomic<std::int64_t> min_replicas_to_write_;
    std::atomic<std::int64_t> min_replicas_max_lag_;
    OutputBufferLimits output_buffer_limits_;
    ClientsMemoryLimit maxmemory_clients_;
};

}  // namespace bloomery::core
