// A key's use word (store/key_access.hpp): Redis's LRU clock and LFU
// counter side by side, counted and decayed as Redis does.
#include "bloomery/store/key_access.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>

namespace bloomery::store {
namespace {

using namespace key_access;

constexpr std::uint32_t kAlwaysHit = 0;          // below every threshold
constexpr std::uint32_t kNeverHit = 0xFFFFFFFF;  // at or above every threshold past 1

TEST(KeyAccess, WordKeepsTheClocksLow24BitsAndTheCounter) {
    const std::uint32_t clock = 0x12345678;
    const std::uint32_t word = make_word(clock, 200);
    EXPECT_EQ(stamp_of(word), clock & kClockMask);
    EXPECT_EQ(counter_of(word), 200u);
    EXPECT_EQ(elapsed(word, clock), 0u);
    EXPECT_EQ(elapsed(word, clock + 1000), 1000u);
    // The 24-bit clock wraps after 194 days, as Redis's LRU clock.
    EXPECT_EQ(elapsed(make_word(0x00FFFFFF, 0), 0x01000005), 6u);
}

TEST(KeyAccess, EveryUseCountsWhileTheCounterIsAtMostTheInitialValue) {
    // Odds of one in (counter - 5) * factor + 1: 1 at or below 5.
    std::uint32_t word = make_word(1000, 0);
    for (std::uint32_t i = 1; i <= kInitialCount + 1; ++i) {
        word = used(word, 1000, kNeverHit, 10, 1);
        EXPECT_EQ(counter_of(word), i);
    }
    // Past it, a draw above the threshold does not count; one below does.
    EXPECT_EQ(counter_of(used(word, 1000, kNeverHit, 10, 1)), kInitialCount + 1);
    EXPECT_EQ(counter_of(used(word, 1000, kAlwaysHit, 10, 1)), kInitialCount + 2);
    // The threshold is 2^32 / 11 at counter 6, factor 10.
    const std::uint32_t threshold = static_cast<std::uint32_t>((std::uint64_t{1} << 32) / 11);
    EXPECT_EQ(counter_of(used(word, 1000, threshold - 1, 10, 1)), kInitialCount + 2);
    EXPECT_EQ(counter_of(used(word, 1000, threshold + 1, 10, 1)), kInitialCount + 1);
    // Factor 0 counts every use, up to 255 and no further.
    word = make_word(1000, 250);
    for (int i = 0; i < 10; ++i) word = used(word, 1000, kNeverHit, 0, 1);
    EXPECT_EQ(counter_of(word), kCounterMax);
    // A factor so large that the odds pass 2^32 never counts, without overflow.
    EXPECT_EQ(counter_of(used(make_word(1000, 200), 1000, kAlwaysHit, 2147483647, 1)), 200u);
}

TEST(KeyAccess, CounterLosesOnePerDecayPeriodInWholeClockMinutes) {
    const std::uint32_t at = 60 * 1000 + 59;  // the last second of a minute
    const std::uint32_t word = make_word(at, 20);
    EXPECT_EQ(decayed(word, at, 1), 20u);
    // One second later is the next minute: one period, as Redis's minute clock.
    EXPECT_EQ(decayed(word, at + 1, 1), 19u);
    EXPECT_EQ(decayed(word, at + 1 + 60 * 9, 1), 10u);
    EXPECT_EQ(decayed(word, at + 1 + 60 * 9, 5), 18u);
    EXPECT_EQ(decayed(word, at + 1 + 60 * 100, 1), 0u);
    // lfu-decay-time 0: never.
    EXPECT_EQ(decayed(word, at + 60 * 100, 0), 20u);
    // A use decays first, then counts, and moves the stamp.
    const std::uint32_t next = used(word, at + 1 + 60 * 9, kAlwaysHit, 10, 1);
    EXPECT_EQ(counter_of(next), 11u);
    EXPECT_EQ(elapsed(next, at + 1 + 60 * 9), 0u);
}

TEST(KeyAccess, ManyUsesGrowTheCounterLogarithmicallyAsRedisTable) {
    // redis.conf's table for lfu-log-factor 10: 100 uses reach about 10,
    // 1,000 about 18 and 100,000 about 142.
    // Its own seeded stream: the same draws whatever ran before.
    const auto after = [](int uses) {
        std::mt19937 random(12345);
        std::uint32_t word = make_word(1000, kInitialCount);
        for (int i = 0; i < uses; ++i)
            word = used(word, 1000, static_cast<std::uint32_t>(random()), 10, 1);
        return counter_of(word);
    };
    EXPECT_NEAR(after(100), 10, 3);
    EXPECT_NEAR(after(1000), 18, 4);
    EXPECT_NEAR(after(100000), 142, 15);
}

TEST(KeyAccess, NewWordsStartNowOrIdleAndClampTheCounter) {
    tick_access_clock();
    const std::uint32_t fresh = access_word(0, kInitialCount);
    EXPECT_EQ(idle_seconds(fresh), 0);
    EXPECT_EQ(counter_of(fresh), kInitialCount);
    EXPECT_EQ(idle_seconds(access_word(1000, 0)), 1000);
    // Past the clock's reach, the most it can say.
    EXPECT_EQ(idle_seconds(access_word(std::int64_t{1} << 40, 0)), std::int64_t{kClockMask});
    EXPECT_EQ(idle_seconds(access_word(-5, 0)), 0);
    EXPECT_EQ(counter_of(access_word(0, 1000)), kCounterMax);
    EXPECT_EQ(access_frequency(access_word(600, 100), 0), 100u);  // lfu-decay-time 0: never
    EXPECT_EQ(access_frequency(access_word(600, 100), 1), 90u);   // ten whole minutes
}

TEST(KeyAccess, IdleTimeAndDecayFollowTheClock) {
    ManualClock clock;
    const std::uint32_t word = access_word(0, 100);
    EXPECT_EQ(idle_seconds(word), 0);
    EXPECT_EQ(access_clock(), static_cast<std::uint32_t>(clock.now() / 1000));
    clock.advance(std::chrono::minutes(10));
    EXPECT_EQ(idle_seconds(word), 600);
    EXPECT_EQ(access_frequency(word, 1), 90u);  // lfu-decay-time 1: one a minute
    EXPECT_EQ(now_ms(), clock.now());
}

}  // namespace
}  // namespace bloomery::store
