#include "bloomery/core/error_stats.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "bloomery/core/memory.hpp"
#include "bloomery/core/printable.hpp"

namespace bloomery::core {
namespace {

constexpr std::string_view kDisabled = "ERRORSTATS_DISABLED";

// The prefixes met since start or the last reset; an id is an index.
struct PrefixRegistry {
    std::mutex mutex;
    std::vector<std::string> prefixes;  // under mutex
    bool disabled = false;              // under mutex
    std::atomic<bool> disabled_hint{false};
    // Changes on every reset and when the bound turns counting off, so that
    // tables drop counts whose ids meant other prefixes.
    std::atomic<std::uint64_t> generation{1};
    MemoryCharge charge{MemoryUse::other};

    void clear_locked() {
        prefixes.clear();
        charge.set(0);
        generation.fetch_add(1, std::memory_order_acq_rel);
    }
};

PrefixRegistry& registry() {
    static PrefixRegistry instance;
    return instance;
}

// The id of `prefix` in generation `generation`, adding it if there is room;
// -1 if counting is off or the generation moved on meanwhile.
int registry_id(std::string_view prefix, std::uint64_t generation) {
    PrefixRegistry& r = registry();
    std::lock_guard lock(r.mutex);
    if (r.disabled || r.generation.load(std::memory_order_relaxed) != generation) return -1;
    for (std::size_t i = 0; i < r.prefixes.size(); ++i) {
        if (r.prefixes[i] == prefix) return static_cast<int>(i);
    }
    if (r.prefixes.size() >= kMaxErrorPrefixes) {
        // Redis's warning, then only ERRORSTATS_DISABLED until a reset.
        std::string seen;
        for (const std::string& p : r.prefixes) {
            if (!seen.empty()) seen += ", ";
            append_printable(seen, p);
        }
        spdlog::warn(
            "Errorstats stopped adding new errors because the number of errors reached the "
            "limit ({} distinct error prefixes), please check INFO ERRORSTATS; this can be "
            "re-enabled via CONFIG RESETSTAT.",
            kMaxErrorPrefixes);
        spdlog::warn("Current errors code list: {}", seen);
        r.clear_locked();
        r.disabled = true;
        r.disabled_hint.store(true, std::memory_order_relaxed);
        return -1;
    }
    r.prefixes.emplace_back(prefix);
    r.charge.set(r.charge.bytes() + sizeof(std::string) + prefix.size());
    return static_cast<int>(r.prefixes.size() - 1);
}

}  // namespace

std::string_view error_prefix(std::string_view error_text) {
    // Redis searches "-TEXT" for a space in its first 32 bytes.
    const std::string_view window = error_text.substr(0, kMaxErrorPrefixBytes + 1);
    const std::size_t space = window.find(' ');
    if (space == std::string_view::npos || space == 0) return "ERR";
    return error_text.substr(0, space);
}

void ErrorStatsTable::record(std::string_view error_text) {
    PrefixRegistry& r = registry();
    if (r.disabled_hint.load(std::memory_order_relaxed)) return;
    const std::string_view prefix = error_prefix(error_text);
    const std::uint64_t generation = r.generation.load(std::memory_order_acquire);
    if (generation_.load(std::memory_order_relaxed) != generation) {
        for (auto& count : counts_) count.store(0, std::memory_order_relaxed);
        cached_ = 0;
        // Release: a reader that sees this generation sees the zeroes.
        generation_.store(generation, std::memory_order_release);
    }
    int id = -1;
    for (std::size_t i = 0; i < cached_; ++i) {
        const CachedPrefix& entry = cache_[i];
        if (entry.size == prefix.size() &&
            std::memcmp(entry.text.data(), prefix.data(), prefix.size()) == 0) {
            id = entry.id;
            break;
        }
    }
    if (id < 0) {
        id = registry_id(prefix, generation);
        if (id < 0) return;
        if (cached_ < cache_.size()) {
            CachedPrefix& entry = cache_[cached_++];
            std::memcpy(entry.text.data(), prefix.data(), prefix.size());
            entry.size = static_cast<std::uint8_t>(prefix.size());
            entry.id = static_cast<std::uint8_t>(id);
        }
    }
    std::atomic<std::uint64_t>& count = counts_[static_cast<std::size_t>(id)];
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

std::vector<std::pair<std::string, std::uint64_t>> error_stats_sum(
    const std::vector<const ErrorStatsTable*>& tables) {
    PrefixRegistry& r = registry();
    std::vector<std::pair<std::string, std::uint64_t>> out;
    std::uint64_t generation = 0;
    {
        std::lock_guard lock(r.mutex);
        if (r.disabled) return {{std::string(kDisabled), 1}};
        generation = r.generation.load(std::memory_order_relaxed);
        for (const std::string& prefix : r.prefixes) out.emplace_back(prefix, 0);
    }
    for (const ErrorStatsTable* table : tables) {
        if (table->generation_.load(std::memory_order_acquire) != generation) continue;
        for (std::size_t id = 0; id < out.size(); ++id) {
            out[id].second += table->counts_[id].load(std::memory_order_relaxed);
        }
    }
    std::erase_if(out, [](const auto& entry) { return entry.second == 0; });
    std::sort(out.begin(), out.end());
    return out;
}

void reset_error_stats() {
    PrefixRegistry& r = registry();
    std::lock_guard lock(r.mutex);
    r.clear_locked();
    r.disabled = false;
    r.disabled_hint.store(false, std::memory_order_relaxed);
}

}  // namespace bloomery::core
