// Set operations on filters (bloom/set_operations.hpp): a merge answers 1
// for every item of every source, and the union and intersection estimates
// stay within the bounds docs/filters.md gives (measured here: the test
// prints what it measured).

#include "bloomery/bloom/set_operations.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::bloom {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // 5 to 15 times slower: the small sizes only
#else
constexpr bool kSanitized = false;
#endif

std::string item(std::uint64_t i) {
    return "item:" + std::to_string(i);
}

FilterRef filter_of(std::uint64_t capacity, double error_rate, bool nonscaling = true,
                    Layout layout = Layout::classic) {
    FilterOptions options;
    options.capacity = capacity;
    options.error_rate = error_rate;
    options.nonscaling = nonscaling;
    options.layout = layout;
    return ScalableFilter::create(options);
}

void add_range(ScalableFilter& filter, std::uint64_t first, std::uint64_t last) {
    for (std::uint64_t i = first; i < last; ++i) {
        ASSERT_NE(filter.add(item(i), GrowthLimits{}), AddResult::full) << i;
    }
}

TEST(SetOperations, MergeOfOneShapeOrsAndAnswersEveryItem) {
    const FilterRef a = filter_of(1000, 0.01, false);
    const FilterRef b = filter_of(1000, 0.01, false);
    add_range(*a, 0, 400);
    add_range(*b, 300, 2500);  // b grows a second layer
    ASSERT_EQ(b->num_layers(), 2u);
    const std::vector<const ScalableFilter*> sources{a.get(), b.get()};
    MergePlan plan;
    ASSERT_EQ(plan_merge(sources, 0, plan), SetRefusal::none);
    ASSERT_EQ(plan.layers.size(), 2u);  // b's first ORed into a's, its second appended
    EXPECT_EQ(plan.parts[0].size(), 2u);
    EXPECT_EQ(plan.parts[1].size(), 1u);
    const FilterRef merged = build_merge(plan, sources);
    for (std::uint64_t i = 0; i < 2500; ++i) ASSERT_TRUE(merged->contains(item(i))) << i;
    // The merged first layer counts at least what either source's held.
    EXPECT_GE(merged->layer(0).items(), b->layer(0).items());
    EXPECT_EQ(merged->layer(1).items(), b->layer(1).items());
    EXPECT_LE(merged->estimated_false_positive_rate(), 0.02);
}

TEST(SetOperations, MergeOfOtherShapesAppendsTheirLayers) {
    const FilterRef a = filter_of(1000, 0.01, false);
    const FilterRef b = filter_of(300, 0.001, false, Layout::blocked);
    add_range(*a, 0, 900);
    add_range(*b, 900, 1200);
    const std::vector<const ScalableFilter*> sources{a.get(), b.get()};
    MergePlan plan;
    ASSERT_EQ(plan_merge(sources, 1, plan), SetRefusal::none);
    EXPECT_EQ(plan.options.error_rate, 0.001);  // the base's options
    ASSERT_EQ(plan.layers.size(), 2u);
    const FilterRef merged = build_merge(plan, sources);
    for (std::uint64_t i = 0; i < 1200; ++i) ASSERT_TRUE(merged->contains(item(i))) << i;
    EXPECT_EQ(merged->items(), a->items() + b->items());
}

TEST(SetOperations, MergeRefusals) {
    const FilterRef nonscaling = filter_of(1000, 0.01);
    const FilterRef other = filter_of(2000, 0.01);
    MergePlan plan;
    const std::vector<const ScalableFilter*> pair{nonscaling.get(), other.get()};
    EXPECT_EQ(plan_merge(pair, 0, plan), SetRefusal::nonscaling_shape);
    // The same pair with the scaling one first: its chain takes the layer.
    const FilterRef scaling = filter_of(2000, 0.01, false);
    const std::vector<const ScalableFilter*> scaled{scaling.get(), nonscaling.get()};
    EXPECT_EQ(plan_merge(scaled, 0, plan), SetRefusal::none);
    FilterOptions redisbloom;
    redisbloom.scheme = HashScheme::redisbloom;
    redisbloom.redisbloom_options = 1 | 4;  // RedisBloom's default: no rounding, 64-bit hashes
    const FilterRef foreign = ScalableFilter::create(redisbloom);
    const std::vector<const ScalableFilter*> mixed{scaling.get(), foreign.get()};
    EXPECT_EQ(plan_merge(mixed, 0, plan), SetRefusal::schemes_differ);
}

TEST(SetOperations, EstimatesNeedOneLayerOfOneShape) {
    const FilterRef a = filter_of(1000, 0.01);
    const FilterRef b = filter_of(2000, 0.01);
    const std::vector<const ScalableFilter*> pair{a.get(), b.get()};
    SetRefusal refusal = SetRefusal::none;
    EXPECT_EQ(union_estimate(pair, refusal), 0);
    EXPECT_EQ(refusal, SetRefusal::shapes_differ);
    EXPECT_EQ(intersection_estimate(pair, refusal), 0);
    EXPECT_EQ(refusal, SetRefusal::shapes_differ);
    std::vector<FilterRef> nine;
    std::vector<const ScalableFilter*> many;
    for (int i = 0; i < 9; ++i) {
        nine.push_back(filter_of(1000, 0.01));
        many.push_back(nine.back().get());
    }
    union_estimate(many, refusal);
    EXPECT_EQ(refusal, SetRefusal::too_many_filters);
    many.pop_back();
    union_estimate(many, refusal);
    EXPECT_EQ(refusal, SetRefusal::none);
}

// The union of two filters at their capacity together (60 % and 60 % of
// it, overlapping by 20 %) within 1 % of the truth.
void check_union(std::uint64_t n) {
    const FilterRef a = filter_of(n, 0.01);
    const FilterRef b = filter_of(n, 0.01);
    add_range(*a, 0, n * 6 / 10);
    add_range(*b, n * 4 / 10, n);
    SetRefusal refusal = SetRefusal::none;
    const std::vector<const ScalableFilter*> pair{a.get(), b.get()};
    const double estimate = union_estimate(pair, refusal);
    ASSERT_EQ(refusal, SetRefusal::none);
    const double error = std::abs(estimate - static_cast<double>(n)) / static_cast<double>(n);
    std::printf("[ measured ] union of %llu at capacity (1 %%): %.0f, error %.3f %%\n",
                static_cast<unsigned long long>(n), estimate, error * 100);
    EXPECT_LT(error, 0.01) << n;
}

TEST(SetOperations, UnionEstimateWithinOnePercentAtCapacity) {
    check_union(10000);
    if (!kSanitized) check_union(1000000);
}

// Two sets of n items overlapping by `share` of n, in filters of 2n
// capacity at 1 % (room for their union): the intersection's estimate is
// off by at most `bound` items.
void check_intersection(std::uint64_t n, double share, double bound) {
    const auto overlap = static_cast<std::uint64_t>(static_cast<double>(n) * share);
    const FilterRef a = filter_of(2 * n, 0.01);
    const FilterRef b = filter_of(2 * n, 0.01);
    add_range(*a, 0, n);
    add_range(*b, n - overlap, 2 * n - overlap);
    SetRefusal refusal = SetRefusal::none;
    const std::vector<const ScalableFilter*> pair{a.get(), b.get()};
    const double estimate = intersection_estimate(pair, refusal);
    ASSERT_EQ(refusal, SetRefusal::none);
    const double error = estimate - static_cast<double>(overlap);
    std::printf(
        "[ measured ] intersection of %llu and %llu sharing %llu (%.0f %%): %.0f, "
        "error %+.0f items (%+.2f %% of the overlap)\n",
        static_cast<unsigned long long>(n), static_cast<unsigned long long>(n),
        static_cast<unsigned long long>(overlap), share * 100, estimate, error,
        100 * error / static_cast<double>(overlap));
    EXPECT_LE(std::abs(error), bound) << n << " " << share;
}

TEST(SetOperations, IntersectionEstimateErrorIsBounded) {
    for (const double share : {0.01, 0.1, 0.5}) {
        check_intersection(10000, share, 150);
        if (!kSanitized) check_intersection(1000000, share, 1500);
    }
}

TEST(SetOperations, IntersectionOfThreeByInclusionExclusion) {
    const FilterRef a = filter_of(20000, 0.01);
    const FilterRef b = filter_of(20000, 0.01);
    const FilterRef c = filter_of(20000, 0.01);
    add_range(*a, 0, 6000);  // a ∩ b ∩ c = [4000, 6000)
    add_range(*b, 2000, 8000);
    add_range(*c, 4000, 10000);
    SetRefusal refusal = SetRefusal::none;
    const std::vector<const ScalableFilter*> three{a.get(), b.get(), c.get()};
    const double estimate = intersection_estimate(three, refusal);
    ASSERT_EQ(refusal, SetRefusal::none);
    EXPECT_NEAR(estimate, 2000, 150);
    EXPECT_NEAR(union_estimate(three, refusal), 10000, 100);
}

}  // namespace
}  // namespace bloomery::bloom
