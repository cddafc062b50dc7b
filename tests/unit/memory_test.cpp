// Process-wide memory accounting: the sum by use and the peak.

#include "bloomery/core/memory.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace bloomery::core {
namespace {

// A large growth is in the peak at once, even if freed before anything
// reads it; small ones are in it once the peak is read or sampled.
TEST(Memory, ThePeakHoldsLargeGrowthsAtOnceAndSmallOnesWhenSampled) {
    const std::uint64_t before = memory_used_total();
    const std::int64_t big = kPeakNotedAtOnce * 1000;
    memory_add(MemoryUse::other, big);
    memory_add(MemoryUse::other, -big);
    EXPECT_GE(memory_peak(), before + static_cast<std::uint64_t>(big));
    EXPECT_EQ(memory_used_total(), before);

    const std::uint64_t peak = memory_peak();
    // Small growths past the peak: read back as soon as the peak is read.
    const std::int64_t small = 100;
    const std::int64_t many = (static_cast<std::int64_t>(peak - before) / small) + 10;
    for (std::int64_t i = 0; i < many; ++i) memory_add(MemoryUse::keyspace, small);
    EXPECT_EQ(memory_peak(), before + static_cast<std::uint64_t>(many * small));
    memory_add(MemoryUse::keyspace, -many * small);
    // Noted by the cron's call, then kept after the bytes are freed.
    for (std::int64_t i = 0; i < many + 10; ++i) memory_add(MemoryUse::keyspace, small);
    memory_note_peak();
    memory_add(MemoryUse::keyspace, -(many + 10) * small);
    EXPECT_EQ(memory_peak(), before + static_cast<std::uint64_t>((many + 10) * small));
    EXPECT_EQ(memory_used_total(), before);
}

// Reservations against a limit never pass it together.
TEST(Memory, TryAddRefusesWhatWouldPassTheLimit) {
    const std::uint64_t before = memory_used_total();
    EXPECT_TRUE(memory_try_add(MemoryUse::other, 1000, before + 1500));
    EXPECT_FALSE(memory_try_add(MemoryUse::other, 1000, before + 1500));
    EXPECT_EQ(memory_used_total(), before + 1000);
    EXPECT_GE(memory_peak(), before + 1000);
    memory_add(MemoryUse::other, -1000);
    EXPECT_EQ(memory_used_total(), before);
}

}  // namespace
}  // namespace bloomery::core
