#include "bloomery/store/key_access.hpp"

#include <algorithm>

namespace bloomery::store {

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

std::uint32_t access_frequency(std::uint32_t word, std::int64_t decay_minutes) {
    return key_access::decayed(word, access_clock(), decay_minutes);
}

}  // namespace bloomery::store
