#pragma once
// Error replies counted by their prefix, as Redis 7 counts them for INFO
// errorstats: the first word of the error text ("ERR", "WRONGTYPE",
// RedisBloom's "Nonscaling"), looked for in the first 31 bytes; a text
// without a space there counts as "ERR".
//
// The prefixes are a client's to choose only through the texts the server
// sends, but a bug (or a future command that echoes text) must not grow the
// table without bound: like Redis, at most kMaxErrorPrefixes distinct
// prefixes are kept; the next new one empties the table, logs a warning once,
// and from then on the table shows only ERRORSTATS_DISABLED with a count of
// one, until CONFIG RESETSTAT (reset_error_stats) turns counting on again.
//
// Counting follows the per-thread rule of core/command_stats.hpp: each worker
// thread owns an ErrorStatsTable and is the only writer of its counters (a
// load and a store, never a read-modify-write on a shared line). The table of
// prefixes is shared, behind a mutex taken only the first time a thread meets
// a prefix: each thread keeps the prefixes it met in a small cache of its own.
// Readers (INFO, CONFIG RESETSTAT) sum the tables with relaxed loads.
//
// Thread safety: record() on the owning thread only; everything else from
// any thread.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bloomery::core {

// Redis's bound on distinct error prefixes.
inline constexpr std::size_t kMaxErrorPrefixes = 128;
// The longest prefix: Redis looks for the space in the first 32 bytes of
// "-TEXT", so a prefix has at most 30 bytes.
inline constexpr std::size_t kMaxErrorPrefixBytes = 30;

// The prefix Redis counts `error_text` under (the text without its '-').
std::string_view error_prefix(std::string_view error_text);

class ErrorStatsTable {
public:
    ErrorStatsTable() = default;
    ErrorStatsTable(const ErrorStatsTable&) = delete;
    ErrorStatsTable& operator=(const ErrorStatsTable&) = delete;

    // Owner thread only: one error reply with this text.
    void record(std::string_view error_text);

private:
    friend std::vector<std::pair<std::string, std::uint64_t>> error_stats_sum(
        const std::vector<const ErrorStatsTable*>& tables);
    struct CachedPrefix {
        std::array<char, kMaxErrorPrefixBytes> text;
        std::uint8_t size;
        std::uint8_t id;
    };
    // The generation (reset_error_stats) these counts belong to; a table of
    // an older generation counts nothing until its owner records again.
    std::atomic<std::uint64_t> generation_{0};
    std::array<std::atomic<std::uint64_t>, kMaxErrorPrefixes> counts_{};
    // Owner thread only: the prefixes this thread has met and their ids.
    std::array<CachedPrefix, kMaxErrorPrefixes> cache_{};
    std::size_t cached_ = 0;
};

// Every prefix counted since start or the last reset, with the sum of every
// table's count, sorted by prefix (bytewise, as Redis lists them); prefixes
// whose count is zero are left out. While counting is disabled: only
// ("ERRORSTATS_DISABLED", 1).
std::vector<std::pair<std::string, std::uint64_t>> error_stats_sum(
    const std::vector<const ErrorStatsTable*>& tables);

// CONFIG RESETSTAT: forgets every prefix and count, and turns counting back
// on if the bound had turned it off.
void reset_error_stats();

}  // namespace bloomery::core
