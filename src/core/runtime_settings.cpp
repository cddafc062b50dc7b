#include "bloomery/core/runtime_settings.hpp"

#include <algorithm>
#include <limits>

#include "bloomery/core/latency_monitor.hpp"

namespace bloomery::core {

namespace {

// The threshold in nanoseconds, saturated: a value past what nanoseconds
// can count is "never", as near as a 64-bit count gets.
std::int64_t to_threshold_ns(std::int64_t microseconds) {
    if (microseconds < 0) return -1;
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max() / 1000;
    return std::min(microseconds, kMax) * 1000;
}

}  // namespace

const LfuSettings& LfuSettings::defaults() {
    static const Config config;
    static const LfuSettings settings(config.lfu_log_factor, config.lfu_decay_time_minutes);
    return settings;
}

RuntimeSettings::RuntimeSettings() : RuntimeSettings(Config{}) {}

RuntimeSettings::RuntimeSettings(const Config& start)
    : lfu_(start.lfu_log_factor, start.lfu_decay_time_minutes),
      latency_threshold_ms_(start.latency_monitor_threshold_ms),
      slowlog_threshold_ns_(to_threshold_ns(start.slowlog_log_slower_than_us)),
      slowlog_max_len_(start.slowlog_max_len),
      min_replicas_to_write_(start.min_replicas_to_write),
      min_replicas_max_lag_(start.min_replicas_max_lag_seconds),
      output_buffer_limits_(start.client_output_buffer_limits),
      maxmemory_clients_(start.maxmemory_clients) {}

void RuntimeSettings::set_latency_monitor_threshold_ms(std::int64_t milliseconds) {
    latency_threshold_ms_.store(milliseconds, std::memory_order_relaxed);
    set_latency_threshold_ms(milliseconds);
}

std::int64_t RuntimeSettings::slowlog_log_slower_than_us() const {
    const std::int64_t threshold = slowlog_threshold_ns();
    return threshold < 0 ? -1 : threshold / 1000;
}

void RuntimeSettings::set_slowlog_log_slower_than_us(std::int64_t microseconds) {
    slowlog_threshold_ns_.store(to_threshold_ns(microseconds), std::memory_order_relaxed);
}

}  // namespace bloomery::core
