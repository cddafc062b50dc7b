#include "bloomery/core/memory.hpp"

#include <unistd.h>

#include <atomic>
#include <fstream>

namespace bloomery::core {
namespace {

struct alignas(64) Counter {
    std::atomic<std::int64_t> bytes{0};
};
Counter counters[kMemoryUses];
std::atomic<std::uint64_t> peak{0};

void note_peak(std::uint64_t total) {
    std::uint64_t seen = peak.load(std::memory_order_relaxed);
    while (total > seen && !peak.compare_exchange_weak(seen, total, std::memory_order_relaxed)) {
    }
}

}  // namespace

void memory_add(MemoryUse use, std::int64_t delta) {
    counters[static_cast<unsigned>(use)].bytes.fetch_add(delta, std::memory_order_relaxed);
    // A large allocation is taken into the peak at once, as it may be
    // freed before the cron looks; small ones (a key, a small filter) add
    // up slowly and are left to it, so they cost one atomic add.
    if (delta >= kPeakNotedAtOnce) memory_note_peak();
}

void memory_note_peak() {
    note_peak(memory_used_total());
}

std::uint64_t memory_peak() {
    memory_note_peak();
    return peak.load(std::memory_order_relaxed);
}

namespace {
std::atomic<std::uint64_t> startup{0};
}

void memory_mark_startup() {
    startup.store(memory_used_total(), std::memory_order_relaxed);
}

std::uint64_t memory_startup() {
    return startup.load(std::memory_order_relaxed);
}

std::uint64_t memory_used(MemoryUse use) {
    const std::int64_t bytes =
        counters[static_cast<unsigned>(use)].bytes.load(std::memory_order_relaxed);
    // A free reported on one thread can be seen before the matching
    // allocation from another: never report a transient negative.
    return bytes < 0 ? 0 : static_cast<std::uint64_t>(bytes);
}

std::uint64_t memory_used_total() {
    std::uint64_t total = 0;
    for (unsigned i = 0; i < kMemoryUses; ++i) total += memory_used(static_cast<MemoryUse>(i));
    return total;
}

bool memory_would_exceed(std::uint64_t limit, std::uint64_t extra) {
    if (limit == 0) return false;
    const std::uint64_t used = memory_used_total();
    return used > limit || extra > limit - used;
}

bool memory_try_add(MemoryUse use, std::uint64_t bytes, std::uint64_t limit) {
    if (limit == 0) {
        memory_add(use, static_cast<std::int64_t>(bytes));
        return true;
    }
    // Add first, then look: of two reservations racing, whichever reads the
    // total last sees both (sequentially consistent adds and loads), so both
    // can only succeed if both fit.
    std::atomic<std::int64_t>& counter = counters[static_cast<unsigned>(use)].bytes;
    counter.fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_seq_cst);
    std::uint64_t total = 0;
    for (const Counter& each : counters) {
        const std::int64_t held = each.bytes.load(std::memory_order_seq_cst);
        total += held < 0 ? 0 : static_cast<std::uint64_t>(held);
    }
    if (total > limit) {
        counter.fetch_sub(static_cast<std::int64_t>(bytes), std::memory_order_seq_cst);
        return false;
    }
    note_peak(total);
    return true;
}

std::uint64_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    std::uint64_t pages_total = 0, pages_resident = 0;
    statm >> pages_total >> pages_resident;
    return pages_resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace bloomery::core
