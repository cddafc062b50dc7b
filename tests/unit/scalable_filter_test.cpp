#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "bloom_test_support.hpp"
#include "bloomery/bloom/params.hpp"
#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::bloom {
namespace {

using testing::absent_item;
using testing::make_options;
using testing::present_item;

// Adds distinct items until the filter has counted `target` items; returns the
// next unused item index.
std::uint64_t fill_to(ScalableFilter& filter, std::uint64_t target, std::uint64_t next = 0) {
    while (filter.items() < target) {
        const AddResult r = filter.add(present_item(next++));
        EXPECT_TRUE(r == AddResult::added || r == AddResult::exists);
    }
    return next;
}

using testing::popcount_words;

TEST(ScalableFilter, FirstLayerUsesHalfTheErrorRateWhenScaling) {
    const ScalableFilter filter(make_options(1000, 0.01));
    ASSERT_EQ(filter.num_layers(), 1u);
    EXPECT_EQ(filter.layer(0).capacity(), 1000u);
    EXPECT_DOUBLE_EQ(filter.layer(0).error_rate(), 0.005);
    EXPECT_EQ(filter.layer(0).hashes(), 8u);
    EXPECT_EQ(filter.capacity(), 1000u);
    EXPECT_EQ(filter.items(), 0u);
}

TEST(ScalableFilter, NonscalingLayerKeepsTheFullErrorRate) {
    const ScalableFilter filter(make_options(1000, 0.01, 2, true));
    EXPECT_DOUBLE_EQ(filter.layer(0).error_rate(), 0.01);
    EXPECT_EQ(filter.layer(0).hashes(), 7u);
}

TEST(ScalableFilter, AddThenContainsAndDuplicateReportsExists) {
    ScalableFilter filter(make_options(100, 0.01));
    EXPECT_FALSE(filter.contains("a"));
    EXPECT_EQ(filter.add("a"), AddResult::added);
    EXPECT_TRUE(filter.contains("a"));
    EXPECT_EQ(filter.add("a"), AddResult::exists);
    EXPECT_EQ(filter.items(), 1u);
    EXPECT_TRUE(filter.contains(hash_item("a")));
}

TEST(ScalableFilter, GrowsWhenFullAndKeepsNoFalseNegatives) {
    const std::uint64_t c = 1000;
    ScalableFilter filter(make_options(c, 0.01, 2));
    std::uint64_t next = fill_to(filter, c);
    // Exactly at capacity: still one layer. The next new item makes a second.
    EXPECT_EQ(filter.num_layers(), 1u);
    EXPECT_EQ(filter.items(), c);
    AddResult r;
    do {
        r = filter.add(present_item(next++));
    } while (r == AddResult::exists);
    EXPECT_EQ(r, AddResult::added);
    ASSERT_EQ(filter.num_layers(), 2u);
    EXPECT_EQ(filter.layer(0).items(), c);
    EXPECT_EQ(filter.layer(1).items(), 1u);

    next = fill_to(filter, c + 2 * c + 1, next);
    ASSERT_EQ(filter.num_layers(), 3u);
    EXPECT_EQ(filter.layer(0).capacity(), c);
    EXPECT_EQ(filter.layer(1).capacity(), 2 * c);
    EXPECT_EQ(filter.layer(2).capacity(), 4 * c);
    EXPECT_DOUBLE_EQ(filter.layer(0).error_rate(), 0.01 / 2);
    EXPECT_DOUBLE_EQ(filter.layer(1).error_rate(), 0.01 / 4);
    EXPECT_DOUBLE_EQ(filter.layer(2).error_rate(), 0.01 / 8);
    EXPECT_EQ(filter.capacity(), 7 * c);
    EXPECT_EQ(filter.items(), 3 * c + 1);

    for (std::uint64_t i = 0; i < next; ++i) {
        ASSERT_TRUE(filter.contains(present_item(i))) << i;
    }
}

TEST(ScalableFilter, ExpansionMultipliesEachLayerCapacity) {
    ScalableFilter filter(make_options(100, 0.01, 3));
    fill_to(filter, 100 + 300 + 1);
    ASSERT_EQ(filter.num_layers(), 3u);
    EXPECT_EQ(filter.layer(1).capacity(), 300u);
    EXPECT_EQ(filter.layer(2).capacity(), 900u);
}

TEST(ScalableFilter, NonscalingFilterReportsFullAtCapacity) {
    ScalableFilter filter(make_options(100, 0.01, 2, true));
    std::uint64_t next = fill_to(filter, 100);
    AddResult r;
    do {
        r = filter.add(present_item(next++));
    } while (r == AddResult::exists);
    EXPECT_EQ(r, AddResult::full);
    EXPECT_EQ(filter.num_layers(), 1u);
    EXPECT_EQ(filter.items(), 100u);
    // Present items still answer exists, not full.
    EXPECT_EQ(filter.add(present_item(0)), AddResult::exists);
}

TEST(ScalableFilter, StopsAtMaxLayers) {
    // Expansion 1, capacity 1: every new item needs a new layer.
    ScalableFilter filter(make_options(1, 0.01, 1));
    std::vector<std::uint64_t> added;
    std::uint64_t next = 0;
    AddResult r = AddResult::added;
    while (r == AddResult::added || r == AddResult::exists) {
        r = filter.add(present_item(next));
        if (r == AddResult::added) added.push_back(next);
        ++next;
    }
    EXPECT_EQ(r, AddResult::too_many_layers);
    EXPECT_EQ(filter.num_layers(), ScalableFilter::kMaxLayers);
    EXPECT_EQ(filter.items(), ScalableFilter::kMaxLayers);
    EXPECT_EQ(added.size(), ScalableFilter::kMaxLayers);
    for (std::uint64_t i : added) EXPECT_TRUE(filter.contains(present_item(i))) << i;
    // The last layer's error rate is p / 2^64, still a valid rate.
    EXPECT_GT(filter.layer(ScalableFilter::kMaxLayers - 1).error_rate(), 0.0);
}

TEST(ScalableFilter, RefusesLayersLargerThanTheLimit) {
    const FilterOptions options = make_options(1000, 0.01, 2);
    const std::uint64_t first_bytes = optimal_bits(1000, 0.005) / 8;  // 1,384 bytes
    EXPECT_TRUE(ScalableFilter::would_fit(options, first_bytes));
    EXPECT_FALSE(ScalableFilter::would_fit(options, first_bytes - 1));
    EXPECT_TRUE(ScalableFilter::would_fit(options, 0));

    ScalableFilter filter(options, first_bytes * 2);  // second layer needs ~3.1 kB
    std::uint64_t next = fill_to(filter, 1000);
    AddResult r;
    do {
        r = filter.add(present_item(next++));
    } while (r == AddResult::exists);
    EXPECT_EQ(r, AddResult::too_large);
    EXPECT_EQ(filter.num_layers(), 1u);
}

TEST(ScalableFilter, CapacityOverflowIsTooLargeNotAWrap) {
    const std::uint64_t huge = std::numeric_limits<std::uint64_t>::max() / 2 + 10;
    ScalableFilter filter(ScalableFilter::Empty{}, make_options(huge, 0.01, 2));
    filter.append_layer(huge, 0.005, 64, 1).set_items(huge);
    EXPECT_EQ(filter.add("x"), AddResult::too_large);
    EXPECT_EQ(filter.num_layers(), 1u);
    EXPECT_EQ(filter.capacity(), huge);
}

TEST(ScalableFilter, EmptyChainCreatesItsFirstLayerOnAdd) {
    ScalableFilter filter(ScalableFilter::Empty{}, make_options(50, 0.01));
    EXPECT_EQ(filter.num_layers(), 0u);
    EXPECT_FALSE(filter.contains("a"));
    EXPECT_EQ(filter.capacity(), 0u);
    EXPECT_EQ(filter.add("a"), AddResult::added);
    ASSERT_EQ(filter.num_layers(), 1u);
    EXPECT_EQ(filter.layer(0).capacity(), 50u);
    EXPECT_DOUBLE_EQ(filter.layer(0).error_rate(), 0.005);
}

TEST(ScalableFilter, SizesAddUpOverLayers) {
    ScalableFilter filter(make_options(1000, 0.01));
    fill_to(filter, 1001);
    const std::uint64_t bits = filter.layer(0).byte_size() + filter.layer(1).byte_size();
    EXPECT_EQ(filter.bits_size(), bits);
    EXPECT_GT(filter.byte_size(), bits);
}

TEST(ScalableFilter, CompoundFalsePositiveRateStaysWithinTargetAfterGrowing) {
    const double p = 0.01;
    ScalableFilter filter(make_options(10000, p, 2));
    // 10k + 20k + 40k + 80k: four full layers.
    const std::uint64_t next = fill_to(filter, 150000);
    ASSERT_EQ(filter.num_layers(), 4u);
    for (std::uint64_t i = 0; i < next; ++i) ASSERT_TRUE(filter.contains(present_item(i))) << i;

    constexpr std::uint64_t kProbes = 1000000;
    std::uint64_t false_positives = 0;
    for (std::uint64_t i = 0; i < kProbes; ++i) false_positives += filter.contains(absent_item(i));
    const double measured = static_cast<double>(false_positives) / kProbes;
    std::printf("[ measured ] 4-layer compound p=%g fpr=%.6f\n", p, measured);
    EXPECT_LE(measured, p + 4 * std::sqrt(p * (1 - p) / kProbes));

    // Estimated cardinality within 3 % of the true count (measured ~0.5 %).
    const double estimate = static_cast<double>(filter.estimate_cardinality());
    std::printf("[ measured ] estimate=%.0f true=%llu\n", estimate,
                static_cast<unsigned long long>(filter.items()));
    EXPECT_NEAR(estimate, static_cast<double>(filter.items()), filter.items() * 0.03);
}

TEST(ScalableFilter, EstimateCardinalityTracksSmallCounts) {
    ScalableFilter filter(make_options(10000, 0.01));
    EXPECT_EQ(filter.estimate_cardinality(), 0u);
    fill_to(filter, 2000);
    EXPECT_NEAR(static_cast<double>(filter.estimate_cardinality()), 2000.0, 2000 * 0.05);
}

TEST(ScalableFilter, ConcurrentAddsAndReadsKeepCountsExact) {
    constexpr int kWriters = 4;
    constexpr std::uint64_t kPerWriter = 10000;
    // Capacity 2,000: 40,000 items force layers of 2k, 4k, 8k, 16k, 32k.
    ScalableFilter filter(make_options(2000, 0.01, 2));
    std::atomic<std::uint64_t> added{0};
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> missing{0};

    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w) {
        threads.emplace_back([&, w] {
            std::uint64_t mine = 0;
            for (std::uint64_t i = 0; i < kPerWriter; ++i) {
                const std::string item = present_item(i * kWriters + w);
                const AddResult r = filter.add(item);
                if (r == AddResult::added) ++mine;
                // Read your own write, whatever the answer was.
                if (!filter.contains(item)) missing.fetch_add(1);
            }
            added.fetch_add(mine);
        });
    }
    threads.emplace_back([&] {
        std::uint64_t i = 0;
        while (!done.load()) {
            (void)filter.contains(absent_item(i++));
            (void)filter.items();
            (void)filter.capacity();
            (void)filter.estimate_cardinality();
        }
    });
    for (int w = 0; w < kWriters; ++w) threads[w].join();
    done.store(true);
    threads.back().join();

    EXPECT_EQ(missing.load(), 0u);
    EXPECT_GE(filter.num_layers(), 4u);
    EXPECT_EQ(filter.items(), added.load());
    for (std::uint64_t i = 0; i < kWriters * kPerWriter; ++i) {
        ASSERT_TRUE(filter.contains(present_item(i))) << i;
    }
    for (std::size_t l = 0; l < filter.num_layers(); ++l) {
        EXPECT_EQ(filter.layer(l).set_bits(), popcount_words(filter.layer(l))) << l;
    }
    // No double growth: each layer's capacity doubles the previous one.
    for (std::size_t l = 1; l < filter.num_layers(); ++l) {
        EXPECT_EQ(filter.layer(l).capacity(), filter.layer(l - 1).capacity() * 2);
    }
}

}  // namespace
}  // namespace bloomery::bloom
