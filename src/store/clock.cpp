#include "bloomery/store/clock.hpp"

#include <atomic>
#include <cstdlib>
#include <limits>

namespace bloomery::store {

namespace {

// What now_ms() answers while a ManualClock exists; kSystem otherwise.
constexpr std::int64_t kSystem = std::numeric_limits<std::int64_t>::min();
std::atomic<std::int64_t> g_manual_ms{kSystem};
// jump_clock()'s offset, added to the system clock.
std::atomic<std::int64_t> g_jumped_ms{0};

std::int64_t system_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::uint32_t unix_seconds() {
    return static_cast<std::uint32_t>(now_ms() / 1000);
}

std::atomic<std::uint32_t> g_access_clock{static_cast<std::uint32_t>(system_ms() / 1000)};

}  // namespace

std::int64_t now_ms() {
    const std::int64_t manual = g_manual_ms.load(std::memory_order_relaxed);
    return manual != kSystem ? manual : system_ms() + g_jumped_ms.load(std::memory_order_relaxed);
}

void jump_clock(std::int64_t ms) {
    if (ms > 0) g_jumped_ms.fetch_add(ms, std::memory_order_relaxed);
    tick_access_clock();
}

std::int64_t clock_jumped_ms() {
    return g_jumped_ms.load(std::memory_order_relaxed);
}

std::uint32_t access_clock() {
    return g_access_clock.load(std::memory_order_relaxed);
}

void tick_access_clock() {
    const std::uint32_t now = unix_seconds();
    // Written only when it moves on: lookups load it on every command.
    if (g_access_clock.load(std::memory_order_relaxed) != now) {
        g_access_clock.store(now, std::memory_order_relaxed);
    }
}

ManualClock::ManualClock(std::int64_t start_ms) {
    std::int64_t expected = kSystem;
    // Two at once would give the clock back while the other still holds it.
    if (!g_manual_ms.compare_exchange_strong(expected, start_ms)) std::abort();
    tick_access_clock();
}

ManualClock::~ManualClock() {
    g_manual_ms.store(kSystem, std::memory_order_relaxed);
    tick_access_clock();
}

std::int64_t ManualClock::now() const {
    return g_manual_ms.load(std::memory_order_relaxed);
}

void ManualClock::set(std::int64_t ms) {
    g_manual_ms.store(ms, std::memory_order_relaxed);
    tick_access_clock();
}

void ManualClock::advance(std::chrono::milliseconds by) {
    set(now() + by.count());
}

}  // namespace bloomery::store
