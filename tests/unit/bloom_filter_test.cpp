#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bloom_test_support.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/filter.hpp"
#include "bloomery/bloom/hash.hpp"
#include "bloomery/bloom/params.hpp"

namespace bloomery::bloom {
namespace {

using testing::absent_item;
using testing::make_options;
using testing::present_item;

using testing::layer_words;
using testing::popcount_words;

TEST(ItemHash, IsStableAcrossBuilds) {
    // Pinned: snapshots and SCANDUMP payloads depend on these exact values.
    const ItemHash empty = hash_item("");
    const ItemHash hello = hash_item("hello");
    EXPECT_EQ(empty.h1, 5932820873212145038u);
    EXPECT_EQ(hello.h1, 2806713834459357735u);
    EXPECT_EQ(hello.h2, 13917325602669399623u);  // MurmurHash3 out[1] | 1
}

TEST(ItemHash, SecondHashIsAlwaysOdd) {
    for (std::uint64_t i = 0; i < 10000; ++i) {
        EXPECT_EQ(hash_item(present_item(i)).h2 & 1, 1u);
    }
}

TEST(ItemHash, ProbePositionsCoverEveryBitForNonPowerOfTwoSizes) {
    for (std::uint64_t bits : {1000ull, 64ull * 157, 9600ull}) {
        std::vector<bool> seen(bits, false);
        // 20,000 items x 7 probes over <= 10,048 positions: a given position
        // is missed with probability about e^-14, so all must be hit.
        for (std::uint64_t i = 0; i < 20000; ++i) {
            const ItemHash h = hash_item(present_item(i));
            for (std::uint32_t k = 0; k < 7; ++k) {
                const std::uint64_t pos = probe_position(h, k, bits);
                ASSERT_LT(pos, bits);
                seen[pos] = true;
            }
        }
        std::uint64_t missed = 0;
        for (bool s : seen) missed += s ? 0 : 1;
        EXPECT_EQ(missed, 0u) << bits;
    }
}

TEST(ItemHash, ProbePositionsAreDistinctForOneItemMostly) {
    // Enhanced double hashing should not collapse probes of one item: with
    // 10 probes in 1 Mbit collisions are ~4.3e-5 per item; allow a handful.
    std::uint64_t collisions = 0;
    for (std::uint64_t i = 0; i < 10000; ++i) {
        const ItemHash h = hash_item(present_item(i));
        std::vector<std::uint64_t> pos;
        for (std::uint32_t k = 0; k < 10; ++k) pos.push_back(probe_position(h, k, 1 << 20));
        for (std::size_t a = 0; a < pos.size(); ++a)
            for (std::size_t b = a + 1; b < pos.size(); ++b) collisions += pos[a] == pos[b];
    }
    EXPECT_LE(collisions, 5u);
}

TEST(ItemHash, IncrementalProbesMatchTheClosedForms) {
    // add/contains walk probes with ClassicProbes/BlockProbes; stored bits
    // must stay where probe_position/block_probe put them. 40 probes cross
    // five remix rounds of the blocked layout.
    for (std::uint64_t i = 0; i < 5000; ++i) {
        const ItemHash h = hash_item(present_item(i));
        for (std::uint64_t bits : {64ull, 1000ull, 9600ull, 8'000'000'000ull, ~0ull}) {
            ClassicProbes classic(h, bits);
            for (std::uint32_t k = 0; k < 40; ++k) {
                ASSERT_EQ(classic.next(), probe_position(h, k, bits))
                    << i << " " << bits << " " << k;
            }
        }
        BlockProbes blocked(h);
        for (std::uint32_t k = 0; k < 40; ++k) ASSERT_EQ(blocked.next(), block_probe(h, k)) << k;
    }
}

TEST(BloomLayer, IsSizedFromParams) {
    const LayerPtr owned = testing::sized_layer(100000, 0.01);
    BloomLayer& layer = *owned;
    EXPECT_EQ(layer.bits(), optimal_bits(100000, 0.01));
    EXPECT_EQ(layer.hashes(), 7u);
    EXPECT_EQ(layer.capacity(), 100000u);
    EXPECT_EQ(layer.error_rate(), 0.01);
    EXPECT_EQ(layer.num_words() * 64, layer.bits());
    EXPECT_EQ(layer.byte_size() * 8, layer.bits());
    EXPECT_EQ(layer.set_bits(), 0u);
    EXPECT_EQ(layer.items(), 0u);
    EXPECT_EQ(popcount_words(layer), 0u);
}

TEST(BloomLayer, AddReportsNewOnlyWhenABitWasSet) {
    const LayerPtr owned = testing::sized_layer(1000, 0.01);
    BloomLayer& layer = *owned;
    const ItemHash h = hash_item("x");
    EXPECT_FALSE(layer.contains(h));
    EXPECT_TRUE(layer.add(h));
    EXPECT_TRUE(layer.contains(h));
    EXPECT_FALSE(layer.add(h));
    EXPECT_LE(layer.set_bits(), 7u);
    EXPECT_GE(layer.set_bits(), 1u);
}

TEST(BloomLayer, SetBitsEqualsPopcountOfWords) {
    const LayerPtr owned = testing::sized_layer(5000, 0.01);
    BloomLayer& layer = *owned;
    for (std::uint64_t i = 0; i < 5000; ++i) layer.add(hash_item(present_item(i)));
    EXPECT_EQ(layer.set_bits(), popcount_words(layer));
    // At capacity with optimal k about half the bits are set.
    const double fill = static_cast<double>(layer.set_bits()) / static_cast<double>(layer.bits());
    EXPECT_NEAR(fill, 0.5, 0.03);
}

// A layer takes exactly capacity() items: reservations past it fail, a
// cancelled one gives its room back, and items() counts commits.
void expect_exact_room(BloomLayer& layer) {
    const std::uint64_t capacity = layer.capacity();
    for (std::uint64_t i = 0; i < capacity; ++i) {
        ASSERT_TRUE(layer.reserve_item()) << "reservation " << i;
        layer.commit_item();
    }
    EXPECT_EQ(layer.items(), capacity);
    EXPECT_FALSE(layer.reserve_item());
}

TEST(BloomLayer, InlineLayerTakesExactlyItsCapacity) {
    const LayerPtr owned = testing::sized_layer(1000, 0.01);
    ASSERT_FALSE(owned->mapped());
    expect_exact_room(*owned);
}

TEST(BloomLayer, MappedLayerTakesExactlyItsCapacity) {
    // 100k items at 1 % is 117 KiB of bits: mapped, with per-thread budgets.
    const LayerPtr owned = testing::sized_layer(100000, 0.01);
    ASSERT_TRUE(owned->mapped());
    expect_exact_room(*owned);
}

TEST(BloomLayer, CancelledReservationGivesRoomBack) {
    for (std::uint64_t capacity : {std::uint64_t{10}, std::uint64_t{100000}}) {
        const LayerPtr owned = testing::sized_layer(capacity, 0.01);
        BloomLayer& layer = *owned;
        for (std::uint64_t i = 0; i < capacity; ++i) {
            ASSERT_TRUE(layer.reserve_item());
            layer.commit_item();
        }
        layer.set_items(capacity - 1);  // room for exactly one more
        ASSERT_TRUE(layer.reserve_item());
        EXPECT_FALSE(layer.reserve_item());
        layer.cancel_item();
        EXPECT_EQ(layer.items(), capacity - 1);
        ASSERT_TRUE(layer.reserve_item());
        layer.commit_item();
        EXPECT_EQ(layer.items(), capacity);
        EXPECT_FALSE(layer.reserve_item());
    }
}

TEST(BloomLayer, SetItemsLeavesRoomForTheRest) {
    const LayerPtr owned = testing::sized_layer(100000, 0.01);
    BloomLayer& layer = *owned;
    layer.set_items(99990);
    EXPECT_EQ(layer.items(), 99990u);
    for (int i = 0; i < 10; ++i) {
        ASSERT_TRUE(layer.reserve_item());
        layer.commit_item();
    }
    EXPECT_FALSE(layer.reserve_item());
    layer.set_items(200000);  // a loaded layer past its capacity takes nothing more
    EXPECT_EQ(layer.items(), 200000u);
    EXPECT_FALSE(layer.reserve_item());
}

// Room claimed in chunks by one thread is not stranded: threads that find
// nothing unclaimed take it from the others' budgets, so together they commit
// exactly capacity() items, never more or fewer.
TEST(BloomLayer, ConcurrentReservationsCommitExactlyCapacity) {
    const LayerPtr owned = testing::sized_layer(200000, 0.01);
    BloomLayer& layer = *owned;
    ASSERT_TRUE(layer.mapped());
    constexpr int kThreads = 4;
    std::vector<std::uint64_t> committed(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&layer, &committed, t] {
            // Thread 0 stops early, leaving whatever budget it claimed.
            const std::uint64_t limit = t == 0 ? 5000 : UINT64_MAX;
            for (std::uint64_t i = 0; i < limit && layer.reserve_item(); ++i) {
                if (i % 7 == 3) {
                    layer.cancel_item();  // a duplicate: room goes back
                } else {
                    layer.commit_item();
                    ++committed[t];
                }
            }
        });
    }
    for (auto& thread : threads) thread.join();
    std::uint64_t total = 0;
    for (std::uint64_t n : committed) total += n;
    EXPECT_EQ(total, layer.capacity());
    EXPECT_EQ(layer.items(), layer.capacity());
    EXPECT_FALSE(layer.reserve_item());
}

// A layer sized by the filter's own rules (bounds.hpp first_layer) for
// `items` at p in `layout`.
LayerPtr layer_for(std::uint64_t items, double p, Layout layout) {
    FilterOptions options;
    options.capacity = items;
    options.error_rate = p;
    options.nonscaling = true;
    options.layout = layout;
    return make_layer(first_layer(options));
}

void expect_false_positive_rate_within_target(double p, Layout layout = Layout::classic,
                                              std::uint64_t kItems = 100000) {
    constexpr std::uint64_t kProbes = 1000000;
    const LayerPtr owned = layer_for(kItems, p, layout);
    BloomLayer& layer = *owned;
    ASSERT_EQ(layer.layout(), layout);
    for (std::uint64_t i = 0; i < kItems; ++i) layer.add(hash_item(present_item(i)));
    for (std::uint64_t i = 0; i < kItems; ++i) {
        ASSERT_TRUE(layer.contains(hash_item(present_item(i)))) << "false negative " << i;
    }
    std::uint64_t false_positives = 0;
    for (std::uint64_t i = 0; i < kProbes; ++i) {
        false_positives += layer.contains(hash_item(absent_item(i))) ? 1 : 0;
    }
    const double measured = static_cast<double>(false_positives) / kProbes;
    // 4 standard deviations of a binomial proportion: a correct filter fails
    // this about once in 30,000 runs (and the probes are deterministic).
    const double tolerance = 4 * std::sqrt(p * (1 - p) / kProbes);
    EXPECT_LE(measured, p + tolerance) << "p=" << p << " measured=" << measured;
    // Also not suspiciously low: the filter is really at its designed load.
    EXPECT_GE(measured, p * 0.8) << "p=" << p << " measured=" << measured;
    ::testing::Test::RecordProperty("measured_fpr_" + std::to_string(p), std::to_string(measured));
    std::printf(
        "[ measured ] %s p=%g items=%llu bits/item=%.3f k=%u fpr=%.6f (%llu / %llu)\n",
        std::string(layout_name(layout)).c_str(), p, static_cast<unsigned long long>(kItems),
        static_cast<double>(layer.bits()) / static_cast<double>(kItems), layer.hashes(), measured,
        static_cast<unsigned long long>(false_positives), static_cast<unsigned long long>(kProbes));
}

TEST(BloomLayer, FalsePositiveRateAtCapacityIsWithinOnePercentTarget) {
    expect_false_positive_rate_within_target(0.01);
}

TEST(BloomLayer, FalsePositiveRateAtCapacityIsWithinOnePerMilleTarget) {
    expect_false_positive_rate_within_target(0.001);
}

// Blocked layers (whole 512-bit blocks on cache lines), at the smallest
// size that is blocked (32 KiB) and a larger one, within target.
TEST(BloomLayer, BlockedFalsePositiveRateAtCapacityIsWithinOnePercentTarget) {
    expect_false_positive_rate_within_target(0.01, Layout::blocked);
    expect_false_positive_rate_within_target(0.01, Layout::blocked, 30000);
}

TEST(BloomLayer, BlockedFalsePositiveRateAtCapacityIsWithinOnePerMilleTarget) {
    expect_false_positive_rate_within_target(0.001, Layout::blocked);
    expect_false_positive_rate_within_target(0.001, Layout::blocked, 30000);
}

TEST(BloomLayer, BlockedLayersCostAtMostFifteenPercentMoreBitsAtOnePercent) {
    const LayerPtr classic = layer_for(1000000, 0.01, Layout::classic);
    const LayerPtr blocked = layer_for(1000000, 0.01, Layout::blocked);
    ASSERT_EQ(blocked->layout(), Layout::blocked);
    EXPECT_EQ(blocked->bits() % kBlockBits, 0u);  // mapped: whole, aligned blocks
    const double ratio =
        static_cast<double>(blocked->bits()) / static_cast<double>(classic->bits());
    EXPECT_LE(ratio, 1.15);
    EXPECT_GT(ratio, 1.0);  // the formula says blocking costs something
    std::printf("[ measured ] blocked/classic bits at 1 %%: %.4f (k %u vs %u)\n", ratio,
                blocked->hashes(), classic->hashes());
}

// The sizing formula agrees with the classic one where blocking cannot
// matter (one item per block) and is monotone in k's optimum.
TEST(BloomParams, BlockedSizingMatchesThePaperAtOnePercent) {
    const BlockedSizing sizing = blocked_sizing(0.01);
    EXPECT_NEAR(sizing.bits_per_item, 9.93, 0.05);
    EXPECT_GE(sizing.hashes, 5u);
    EXPECT_LE(sizing.hashes, 7u);
    EXPECT_LE(blocked_false_positive_rate(sizing.bits_per_item, sizing.hashes), 0.01);
    EXPECT_GT(blocked_false_positive_rate(sizing.bits_per_item * 0.99, sizing.hashes), 0.0099);
}

// Where blocking would cost more than kMaxBlockedOverhead extra bits (very
// low error rates), a blocked filter's layer is classic.
TEST(BloomParams, BlockedLayoutFallsBackToClassicAtVeryLowErrorRates) {
    FilterOptions options;
    options.layout = Layout::blocked;
    options.error_rate = 0.01;
    options.capacity = 1000000;
    EXPECT_EQ(first_layer(options).layout, Layout::blocked);
    options.error_rate = 1e-9;
    EXPECT_EQ(first_layer(options).layout, Layout::classic);
}

TEST(BloomLayer, StoreWordsOverwritesAndKeepsSetBitsExact) {
    const LayerPtr owned = testing::sized_layer(1000, 0.01);
    BloomLayer& layer = *owned;
    for (std::uint64_t i = 0; i < 500; ++i) layer.add(hash_item(present_item(i)));
    const std::vector<std::uint64_t> words = {0xffffffffffffffffull, 0, 0x8000000000000001ull,
                                              0x00ff00ff00ff00ffull};
    layer.store_words(3, words.size(), words.data());
    EXPECT_EQ(layer.set_bits(), popcount_words(layer));
    for (std::size_t i = 0; i < words.size(); ++i) EXPECT_EQ(layer.load_word(3 + i), words[i]);

    // Clearing everything brings the count back to zero.
    const std::vector<std::uint64_t> zeros(layer.num_words(), 0);
    layer.store_words(0, zeros.size(), zeros.data());
    EXPECT_EQ(layer.set_bits(), 0u);
    EXPECT_EQ(layer_words(layer), zeros);
}

TEST(BloomLayer, ExplicitGeometryIsHonoured) {
    const LayerPtr owned = testing::explicit_layer(77, 0.02, 640, 3);
    BloomLayer& layer = *owned;
    EXPECT_EQ(layer.bits(), 640u);
    EXPECT_EQ(layer.hashes(), 3u);
    EXPECT_EQ(layer.capacity(), 77u);
    EXPECT_EQ(layer.error_rate(), 0.02);
    const ItemHash h = hash_item("y");
    EXPECT_TRUE(layer.add(h));
    EXPECT_TRUE(layer.contains(h));
    EXPECT_LE(popcount_words(layer), 3u);
}

TEST(BloomLayer, LargeLayerIsCreatedWithoutTouchingItsPages) {
    // 10^8 items at 1 % = 120 MB of zero pages from its own mapping:
    // creating it must be cheap and reads of untouched words are zero.
    const LayerPtr owned = testing::sized_layer(100000000, 0.01);
    BloomLayer& layer = *owned;
    EXPECT_EQ(layer.byte_size(), optimal_bits(100000000, 0.01) / 8);
    EXPECT_EQ(layer.load_word(layer.num_words() - 1), 0u);
    const ItemHash h = hash_item("big");
    EXPECT_TRUE(layer.add(h));
    EXPECT_TRUE(layer.contains(h));
    EXPECT_TRUE(layer.mapped());
    EXPECT_GE(layer.mapped_bytes(), layer.byte_size());
}

TEST(BloomLayer, SmallLayersAreInlineAndLargeOnesMapped) {
    const LayerPtr small = testing::sized_layer(1000, 0.01);
    EXPECT_FALSE(small->mapped());
    EXPECT_EQ(small->mapped_bytes(), 0u);
    EXPECT_EQ(layer_allocation_bytes(small->geometry()), sizeof(BloomLayer) + small->byte_size());
    // Just under and at the threshold.
    const LayerPtr below = testing::explicit_layer(1000, 0.01, kMappedLayerBytes * 8 - 64, 7);
    EXPECT_FALSE(below->mapped());
    const LayerPtr at = testing::explicit_layer(1000, 0.01, kMappedLayerBytes * 8, 7);
    EXPECT_TRUE(at->mapped());
    EXPECT_EQ(layer_allocation_bytes(at->geometry()), sizeof(BloomLayer) + at->mapped_bytes());
}

TEST(BloomLayer, MappedLayerCountsSetBitsExactlyUnderConcurrentAdds) {
    // Per-thread counters (one cache line per slot) must still sum to the
    // exact popcount when several threads flip bits at once, and loads that
    // overwrite words keep the sum exact.
    const LayerPtr owned = testing::sized_layer(2000000, 0.01);
    BloomLayer& layer = *owned;
    ASSERT_TRUE(layer.mapped());
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (std::uint64_t i = 0; i < 20000; ++i) {
                // Overlapping ranges: some items are added by two threads.
                layer.add(hash_item(present_item(static_cast<std::uint64_t>(t) * 10000 + i)));
            }
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(layer.set_bits(), popcount_words(layer));
    const std::vector<std::uint64_t> words = {~std::uint64_t{0}, 0, 5};
    layer.store_words(10, words.size(), words.data());
    EXPECT_EQ(layer.set_bits(), popcount_words(layer));
}

}  // namespace
}  // namespace bloomery::bloom
