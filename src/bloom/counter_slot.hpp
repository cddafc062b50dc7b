#pragma once
// Private to src/bloom: which of kCounterSlots per-thread counter slots the
// calling thread uses (large layers' counters, expiring filters' budgets).
// Threads take slots round-robin on first use, so up to kCounterSlots
// workers never share a cache line; more threads share slots, which stays
// correct (the slots are atomics).

#include <atomic>
#include <cstddef>

namespace bloomery::bloom {

inline constexpr std::size_t kCounterSlots = 16;

inline std::size_t counter_slot() {
    static std::atomic<std::size_t> next{0};
    thread_local const std::size_t slot =
        next.fetch_add(1, std::memory_order_relaxed) % kCounterSlots;
    return slot;
}

}  // namespace bloomery::bloom
