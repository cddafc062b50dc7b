#include "bloomery/store/key_access.hpp"

#include <algorithm>

namespace bloomery::store {

void set_lfu_log_factor(std::int64_t factor) {
    key_access::g_log_factor.store(factor, std::memory_order_relaxed);
}
void set_lfu_decay_time(std::int64_t minutes) {
    key_access::g_decay_minutes.store(minutes, std::memory_order_relaxed);
}
std::int64_t lfu_log_factor() {
    return key_access::g_log_factor.load(std::memory_order_relaxed);
}
std::int64_t lfu_decay_time() {
    return key_access::g_decay_minutes.load(std::memory_order_relaxed);
}

std::uint32_t access_word(std::int64_t idle_seconds, std::uint32_t counter) {
    const std::int64_t idle = std::clamp<std::int64_t>(idle_seconds, 0, key_access::kClockMask);
    return key_access::make_word(access_clock() - static_cast<std::uint32_t>(idle),
                                 std::min(counter, key_access::kCounterMax));
}

std::int64_t idle_seconds(std::uint32_t word) {
    // Against the clock keys are stamped with, as Redis's LRU clock: a key
    // used since the last tick is idle 0.
    return key_access::elapsed(word, access_clock());
}

std::uint32_t access_frequency(std::uint32_t word) {
    return key_access::decayed(word, access_clock(), lfu_decay_time());
}

}  // namespace bloomery::store
