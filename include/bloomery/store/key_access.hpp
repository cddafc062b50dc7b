#pragma once
// How a key is used, in one 32-bit word per key, as Redis keeps it in an
// object's 24 `lru` bits: when a command last used the key (OBJECT IDLETIME)
// and how often it is used (OBJECT FREQ, `redis-cli --hotkeys`). Redis keeps
// one or the other, by its maxmemory-policy; bloomery evicts nothing and
// keeps both: the access clock's low 24 bits (seconds, Redis's LRU clock,
// which wraps after 194 days) above an 8-bit logarithmic counter that
// counts and decays as Redis's LFU does (lfu-log-factor, lfu-decay-time:
// the core::LfuSettings each keyspace is given, which CONFIG SET changes).
// The access clock that stamps the words is in clock.hpp.

#include <atomic>
#include <cstdint>

#include "bloomery/core/runtime_settings.hpp"
#include "bloomery/store/clock.hpp"

namespace bloomery::store {

namespace key_access {
inline constexpr unsigned kCounterBits = 8;
inline constexpr std::uint32_t kCounterMax = 255;
inline constexpr std::uint32_t kClockMask = (std::uint32_t{1} << 24) - 1;
// A new key's counter (Redis's LFU_INIT_VAL): new keys are not the first
// to look cold.
inline constexpr std::uint32_t kInitialCount = 5;

inline std::uint32_t stamp_of(std::uint32_t word) {
    return word >> kCounterBits;
}
inline std::uint32_t counter_of(std::uint32_t word) {
    return word & kCounterMax;
}
inline std::uint32_t make_word(std::uint32_t clock, std::uint32_t counter) {
    return ((clock & kClockMask) << kCounterBits) | counter;
}
// Seconds from a word's stamp to `clock` (a full access_clock() value).
inline std::uint32_t elapsed(std::uint32_t word, std::uint32_t clock) {
    return (clock - stamp_of(word)) & kClockMask;
}
// The counter after the decay owed since the word's stamp: one per
// lfu-decay-time minutes, counted in whole minutes of the clock as Redis
// counts them (a key used every 30 s still crosses a minute each minute).
inline std::uint32_t decayed(std::uint32_t word, std::uint32_t clock, std::int64_t decay_minutes) {
    const std::uint32_t counter = counter_of(word);
    if (decay_minutes <= 0) return counter;
    const std::uint32_t then = clock - elapsed(word, clock);
    const std::uint64_t periods = static_cast<std::uint64_t>(clock / 60 - then / 60) /
                                  static_cast<std::uint64_t>(decay_minutes);
    return periods >= counter ? 0 : counter - static_cast<std::uint32_t>(periods);
}
// Whether one more use counts, `random` uniform over 32 bits: with odds of
// one in (counter - kInitialCount) * lfu-log-factor + 1, as Redis's
// LFULogIncr (every use up to kInitialCount; none past kCounterMax).
inline bool counts(std::uint32_t counter, std::uint32_t random, std::int64_t log_factor) {
    if (counter >= kCounterMax) return false;
    const std::uint64_t base = counter > kInitialCount ? counter - kInitialCount : 0;
    const std::uint64_t odds = base * static_cast<std::uint64_t>(log_factor) + 1;
    // random < 2^32 / odds, without a division.
    return odds < (std::uint64_t{1} << 32) &&
           std::uint64_t{random} * odds < (std::uint64_t{1} << 32);
}
// The word after one more use at `clock`: decayed, counted (counts()), and
// stamped with `clock`.
inline std::uint32_t used(std::uint32_t word, std::uint32_t clock, std::uint32_t random,
                          std::int64_t log_factor, std::int64_t decay_minutes) {
    std::uint32_t counter = decayed(word, clock, decay_minutes);
    if (counts(counter, random, log_factor)) ++counter;
    return make_word(clock, counter);
}
// A per-thread random stream for counts(): a 64-bit linear congruential
// generator's high half (Knuth's MMIX constants), two instructions, good
// enough for a counter that is an estimate by design.
inline std::uint32_t next_random() {
    static thread_local std::uint64_t state = 0x853C49E6748FEA9Bull;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::uint32_t>(state >> 32);
}
// One use of the key whose word is `word`, now (every lookup that finds
// it). Writes the word only when the clock moved on since its last use (at
// most once a second) or the counter goes up (with odds that fall as it
// grows), so readers of a hot key rarely share a written line. The
// counter counts and decays as `lfu` says.
inline void use(std::atomic<std::uint32_t>& word, const core::LfuSettings& lfu) {
    const std::uint32_t current = word.load(std::memory_order_relaxed);
    const std::uint32_t clock = access_clock();
    // Not compare-and-swaps: a use lost to a racing one only makes the
    // estimate a little lower, and Redis's counter is an estimate too.
    if (stamp_of(current) == (clock & kClockMask)) {
        // Used again within the second: nothing decays; the counter may go
        // up (rarely once past a few uses, never past 255).
        const std::uint32_t counter = counter_of(current);
        if (counter < kCounterMax && counts(counter, next_random(), lfu.log_factor())) {
            word.store(current + 1, std::memory_order_relaxed);
        }
        return;
    }
    word.store(used(current, clock, next_random(), lfu.log_factor(), lfu.decay_minutes()),
               std::memory_order_relaxed);
}
}  // namespace key_access

// The word a key starts with: stamped `idle_seconds` before now (at most
// the clock's 194 days), with `counter` (kInitialCount for a new key,
// RESTORE FREQ's value).
std::uint32_t access_word(std::int64_t idle_seconds, std::uint32_t counter);
// Seconds since the key was last used (OBJECT IDLETIME).
std::int64_t idle_seconds(std::uint32_t word);
// The counter as of now, its decay of one per `decay_minutes` (the
// keyspace's lfu-decay-time) applied (OBJECT FREQ; reading it is no use of
// the key).
std::uint32_t access_frequency(std::uint32_t word, std::int64_t decay_minutes);

}  // namespace bloomery::store
