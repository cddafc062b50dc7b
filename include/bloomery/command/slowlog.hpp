#pragma once
// The slow log, as Redis keeps it (SLOWLOG GET | LEN | RESET): the last
// --slowlog-max-len commands that took at least
// --slowlog-log-slower-than microseconds (negative: none, 0: every command),
// newest first, each with an id, the unix time, the duration, its arguments
// (at most 32, each at most 128 bytes, with Redis's markers for the rest),
// the client's address and name.
//
// Both settings are read from the server's core::RuntimeSettings, which
// CONFIG SET changes.
//
// Thread safety: every member may be called from any thread. is_slow() is
// one relaxed load, asked after every command; recording takes a mutex, which
// only slow commands reach.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/command/context.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/core/runtime_settings.hpp"

namespace bloomery::command {

struct CommandSpec;

struct SlowlogEntry {
    std::int64_t id = 0;
    std::int64_t unix_time = 0;    // seconds, when the command finished
    std::int64_t duration_us = 0;  // the command's time (command::dispatch)
    std::vector<std::string> argv;
    std::string client_address;  // "ip:port"
    std::string client_name;
};

class Slowlog {
public:
    // Redis's limits on what an entry keeps of a command.
    static constexpr std::size_t kMaxArgs = 32;
    static constexpr std::size_t kMaxArgBytes = 128;

    // `settings` must outlive the log.
    explicit Slowlog(const core::RuntimeSettings& settings) : settings_(settings) {}

    // True if a command that ran this long belongs in the log.
    bool is_slow(std::uint64_t nanoseconds) const {
        const std::int64_t threshold = settings_.slowlog_threshold_ns();
        return threshold >= 0 && nanoseconds >= static_cast<std::uint64_t>(threshold);
    }
    // Records a command (call after is_slow() said so). `spec` (may be null)
    // says which arguments to redact: AUTH's, HELLO's and MIGRATE's credentials never
    // reach the log, as in Redis.
    void record(const CommandSpec* spec, Args argv, std::uint64_t nanoseconds,
                const ClientState& client);

    // The newest `count` entries, newest first (every entry if count is
    // larger than the log).
    std::vector<SlowlogEntry> newest(std::size_t count) const;
    std::size_t length() const;
    void reset();
    // Drops the oldest entries past slowlog-max-len at once (after CONFIG
    // SET lowered it; recording trims too).
    void trim();

    // What an entry keeps of `argv`: Redis's truncation (slowlogCreateEntry):
    // past 32 arguments the 32nd becomes "... (N more arguments)"; an argument
    // over 128 bytes keeps 128 and gains "... (N more bytes)". Arguments listed
    // by `redact_from` onward (argv.size(): none) become "(redacted)".
    static std::vector<std::string> capture(Args argv, std::size_t redact_from);
    // The first argument `spec`'s command must not log (argv.size() if none).
    static std::size_t redact_from(const CommandSpec* spec, Args argv);

private:
    void trim_locked();

    const core::RuntimeSettings& settings_;
    mutable std::mutex mutex_;          // guards everything below
    std::deque<SlowlogEntry> entries_;  // newest first
    std::int64_t next_id_ = 0;
    std::size_t bytes_ = 0;  // what entries_ holds, as counted in used_memory
    core::MemoryCharge charge_{core::MemoryUse::other};
};

}  // namespace bloomery::command
