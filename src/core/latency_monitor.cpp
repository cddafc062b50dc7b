#include "bloomery/core/latency_monitor.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <mutex>

#include "bloomery/core/ascii.hpp"
#include "bloomery/core/memory.hpp"

namespace bloomery::core {

namespace latency_detail {
std::atomic<std::int64_t> threshold_ms{0};
}

namespace {

// One event's ring of samples, as Redis keeps it: `next` is where the next
// second's sample goes; a slot with time 0 was never used.
struct Series {
    std::string name;
    std::uint32_t max_ms = 0;
    std::size_t next = 0;
    std::array<LatencySample, kLatencyHistoryLength> samples{};
};

struct Monitor {
    std::mutex mutex;
    std::vector<std::unique_ptr<Series>> events;  // first recorded first
    MemoryCharge charge{MemoryUse::other};

    void recharge() {
        std::uint64_t bytes = events.capacity() * sizeof(std::unique_ptr<Series>);
        for (const auto& series : events) bytes += sizeof(Series) + series->name.capacity();
        charge.set(bytes);
    }
};

Monitor& monitor() {
    static Monitor instance;
    return instance;
}

std::int64_t unix_seconds() {
    using namespace std::chrono;
    return duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
}

LatencyEvent copy_of(const Series& series) {
    LatencyEvent event;
    event.name = series.name;
    event.max_ms = series.max_ms;
    for (std::size_t j = 0; j < kLatencyHistoryLength; ++j) {
        const LatencySample& sample = series.samples[(series.next + j) % kLatencyHistoryLength];
        if (sample.time != 0) event.samples.push_back(sample);
    }
    return event;
}

}  // namespace

void set_latency_threshold_ms(std::int64_t milliseconds) {
    latency_detail::threshold_ms.store(milliseconds < 0 ? 0 : milliseconds,
                                       std::memory_order_relaxed);
}

void latency_add_sample(std::string_view event, std::uint64_t milliseconds) {
    event = event.substr(0, kMaxLatencyEventName);
    const auto latency =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(milliseconds, UINT32_MAX));
    const std::int64_t now = unix_seconds();
    Monitor& m = monitor();
    std::lock_guard lock(m.mutex);
    Series* series = nullptr;
    for (const auto& candidate : m.events) {
        if (candidate->name == event) {
            series = candidate.get();
            break;
        }
    }
    if (series == nullptr) {
        if (m.events.size() >= kMaxLatencyEvents) return;
        m.events.push_back(std::make_unique<Series>());
        series = m.events.back().get();
        series->name = std::string(event);
        m.recharge();
    }
    series->max_ms = std::max(series->max_ms, latency);
    // One sample per second: a second already sampled keeps its worst.
    LatencySample& previous =
        series->samples[(series->next + kLatencyHistoryLength - 1) % kLatencyHistoryLength];
    if (previous.time == now) {
        previous.latency_ms = std::max(previous.latency_ms, latency);
        return;
    }
    series->samples[series->next] = LatencySample{now, latency};
    series->next = (series->next + 1) % kLatencyHistoryLength;
}

std::vector<LatencyEvent> latency_events() {
    Monitor& m = monitor();
    std::lock_guard lock(m.mutex);
    std::vector<LatencyEvent> out;
    out.reserve(m.events.size());
    for (const auto& series : m.events) out.push_back(copy_of(*series));
    return out;
}

std::optional<LatencyEvent> latency_event(std::string_view name) {
    Monitor& m = monitor();
    std::lock_guard lock(m.mutex);
    for (const auto& series : m.events) {
        if (series->name == name) return copy_of(*series);
    }
    return std::nullopt;
}

std::size_t latency_reset(std::span<const std::string_view> names) {
    Monitor& m = monitor();
    std::lock_guard lock(m.mutex);
    std::size_t removed = 0;
    std::erase_if(m.events, [&](const std::unique_ptr<Series>& series) {
        bool match = names.empty();
        for (std::string_view name : names) match = match || iequals(series->name, name);
        if (match) ++removed;
        return match;
    });
    if (m.events.empty()) std::vector<std::unique_ptr<Series>>().swap(m.events);
    m.recharge();
    return removed;
}

}  // namespace bloomery::core
