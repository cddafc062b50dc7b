// The keys of a shard that have a deadline, each beside its deadline.

#include "bloomery/store/expiry_set.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>

namespace bloomery::store {
namespace {

TEST(ExpirySet, InsertEraseAndSampleAgreeWithASet) {
    ExpirySet set;
    std::set<std::uintptr_t> truth;
    std::mt19937_64 rng(3);
    for (int step = 0; step < 200000; ++step) {
        const std::uintptr_t entry = 16 * (1 + rng() % 5000);
        if (rng() % 3 != 0) {
            if (truth.insert(entry).second) {
                set.reserve(1);
                set.insert(entry, static_cast<std::int64_t>(entry) * 3);
            } else {
                EXPECT_TRUE(set.set_deadline(entry, static_cast<std::int64_t>(entry) * 3));
            }
        } else {
            EXPECT_EQ(set.erase(entry), truth.erase(entry) == 1);
        }
        ASSERT_EQ(set.size(), truth.size());
    }
    for (std::uintptr_t entry : truth) EXPECT_TRUE(set.contains(entry));
    EXPECT_FALSE(set.set_deadline(16 * 5001, 1));
    // Each entry beside the deadline it was given, once.
    std::set<std::uintptr_t> sampled;
    set.sample(0, SIZE_MAX, set.slots(), [&](std::uintptr_t entry, std::int64_t deadline) {
        EXPECT_TRUE(sampled.insert(entry).second);
        EXPECT_EQ(deadline, static_cast<std::int64_t>(entry) * 3);
    });
    EXPECT_EQ(sampled, truth);
    EXPECT_LE(set.slots(), truth.size() * 8);
    // A sample looks at no slot twice, however many entries it may take.
    std::size_t seen = 0;
    set.sample(0, SIZE_MAX, SIZE_MAX, [&](std::uintptr_t, std::int64_t) { ++seen; });
    EXPECT_EQ(seen, truth.size());
}

}  // namespace
}  // namespace bloomery::store
