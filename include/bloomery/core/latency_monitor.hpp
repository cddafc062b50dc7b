#pragma once
// The latency monitor, as Redis's (latency.c; LATENCY LATEST, HISTORY, RESET,
// DOCTOR, GRAPH): while `latency-monitor-threshold` is above 0 (milliseconds;
// 0, the default, keeps it off), every event that took at least that long is
// recorded in its event's history: the last kLatencyHistoryLength samples of
// (unix time in seconds, milliseconds), at most one per second (a second's
// sample keeps its worst), and the worst ever seen.
//
// Events are named by the code that records them, never by a client, so their
// number is bounded by the code: Redis's "command" (a command without the
// fast flag) and "fast-command", "expire-cycle" (one round of active expiry),
// and bloomery's own "snapshot" (a whole snapshot, written off the command
// threads), "snapshot-fsync" and "journal-fsync" (the fsync of the snapshot
// file and of the journal). kMaxLatencyEvents bounds them anyway; the
// histories are counted in used_memory.
//
// One process-wide monitor, like the memory accounting: every layer may
// record. Recording takes a mutex, but only for an event that passed the
// threshold (rare by definition); checking the threshold is one relaxed load.
//
// Thread safety: every function may be called from any thread.

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bloomery::core {

inline constexpr std::size_t kLatencyHistoryLength = 160;
inline constexpr std::size_t kMaxLatencyEvents = 32;
inline constexpr std::size_t kMaxLatencyEventName = 64;

// Event names recorded by bloomery (see above).
inline constexpr std::string_view kLatencyCommand = "command";
inline constexpr std::string_view kLatencyFastCommand = "fast-command";
inline constexpr std::string_view kLatencyExpireCycle = "expire-cycle";
inline constexpr std::string_view kLatencySnapshot = "snapshot";
inline constexpr std::string_view kLatencySnapshotFsync = "snapshot-fsync";
inline constexpr std::string_view kLatencyJournalFsync = "journal-fsync";

namespace latency_detail {
extern std::atomic<std::int64_t> threshold_ms;
}

// latency-monitor-threshold in milliseconds (0: off): set at start and by
// RuntimeSettings::set_latency_monitor_threshold_ms (CONFIG SET), the
// setting's one place.
inline std::int64_t latency_threshold_ms() {
    return latency_detail::threshold_ms.load(std::memory_order_relaxed);
}
void set_latency_threshold_ms(std::int64_t milliseconds);

// Records `milliseconds` for `event` (names longer than kMaxLatencyEventName
// are cut; a new event past kMaxLatencyEvents is dropped).
void latency_add_sample(std::string_view event, std::uint64_t milliseconds);
// Records it only if the monitor is on and it reached the threshold.
inline void latency_add_sample_if_needed(std::string_view event, std::uint64_t milliseconds) {
    const std::int64_t threshold = latency_threshold_ms();
    if (threshold > 0 && milliseconds >= static_cast<std::uint64_t>(threshold)) {
        latency_add_sample(event, milliseconds);
    }
}

struct LatencySample {
    std::int64_t time = 0;         // unix time, seconds
    std::uint32_t latency_ms = 0;  // milliseconds
};

struct LatencyEvent {
    std::string name;
    std::uint32_t max_ms = 0;            // the worst since the event was first recorded
    std::vector<LatencySample> samples;  // oldest first, at most kLatencyHistoryLength
};

// Every event recorded since start (or its last reset), in the order they
// were first recorded.
std::vector<LatencyEvent> latency_events();
// One event by its exact name; nothing if it has no history.
std::optional<LatencyEvent> latency_event(std::string_view name);
// Forgets the events named (case-insensitively, as Redis), or every event if
// `names` is empty; returns how many it forgot.
std::size_t latency_reset(std::span<const std::string_view> names);

}  // namespace bloomery::core
