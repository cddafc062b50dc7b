// The cache of sizings behind first_layer() and next_layer() (bounds.hpp:
// size_layer): whatever it answers, fresh or kept, is what a fresh sizing
// gives, field for field.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bloom_test_support.hpp"
#include "bloomery/bloom/bounds.hpp"

namespace bloomery::bloom {
namespace {

using testing::make_options;

bool same(const LayerGeometry& a, const LayerGeometry& b) {
    return a.capacity == b.capacity && a.error_rate == b.error_rate && a.bits == b.bits &&
           a.hashes == b.hashes && a.layout == b.layout && a.scheme == b.scheme &&
           a.redisbloom_bpe == b.redisbloom_bpe && a.redisbloom_n2 == b.redisbloom_n2;
}

TEST(SizingCache, FirstAndNextLayerEqualAFreshSizing) {
    // More distinct sizings than the shared table holds, twice over, so
    // answers come fresh, from the table and from the last entry.
    for (int pass = 0; pass < 2; ++pass) {
        for (const Layout layout : {Layout::classic, Layout::blocked, Layout::automatic,
                                    Layout::automatic_blocks, Layout::counting}) {
            for (const double p : {0.25, 0.01, 1e-3, 1e-4, 1e-6}) {
                for (const std::uint64_t n : {100u, 5000u, 100000u, 3000000u}) {
                    FilterOptions options = make_options(n, p, 2, false);
                    options.layout = layout;
                    SCOPED_TRACE(std::string(layout_name(layout)) + " " + std::to_string(p) + " " +
                                 std::to_string(n));
                    const LayerGeometry first = first_layer(options);
                    EXPECT_TRUE(same(first, size_layer(n, p / 2, layout)));
                    EXPECT_TRUE(same(first_layer(options), first));
                    const std::optional<LayerGeometry> next = next_layer(options, first);
                    ASSERT_TRUE(next);
                    EXPECT_TRUE(same(*next, size_layer(n * 2, p / 4, layout)));
                }
            }
        }
    }
}

TEST(SizingCache, AnswersFromSeveralThreadsEqualAFreshSizing) {
    std::vector<std::thread> threads;
    std::atomic<int> mismatches{0};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([t, &mismatches] {
            for (int i = 0; i < 2000; ++i) {
                const std::uint64_t n = 1000 + static_cast<std::uint64_t>((i * 7 + t) % 97);
                FilterOptions options = make_options(n, 0.01, 2, (i & 1) != 0);
                options.layout = Layout::automatic;
                const double rate = options.nonscaling ? 0.01 : 0.005;
                if (!same(first_layer(options), size_layer(n, rate, options.layout))) ++mismatches;
            }
        });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace bloomery::bloom
