// Age-partitioned filters: the window's guarantee (no item of the last l·g
// adds ever answers 0), the false-positive rate over many windows, the
// counts (a generation shifts exactly or late, never early), and redoing
// recorded adds and shifts, in any order between threads, to the same bits.

#include "bloomery/bloom/age_filter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/store/epoch.hpp"

namespace bloomery::bloom {
namespace {

ItemHash item(std::uint64_t i, const char* prefix = "i") {
    return hash_item(std::string(prefix) + std::to_string(i));
}

AgeGeometry geometry(double rate, std::uint64_t capacity) {
    const std::optional<AgeGeometry> g = age_geometry(rate, capacity, 0);
    EXPECT_TRUE(g);
    return *g;
}

// Adds items 0, 1, ... one at a time, shifting whenever a generation is
// full, and calls check(added) before each shift with the items added so
// far, in order, with the generation each add read (every add counts: one
// answering "exists" makes its item last a window from then too).
struct Added {
    std::uint64_t item;
    std::uint64_t generation;  // the stamp
};
template <class Check>
void fill(AgeFilter& filter, std::uint64_t adds, std::vector<Added>& added, Check&& check) {
    for (std::uint64_t i = 0; i < adds; ++i) {
        bool full = false;
        const std::uint64_t g = filter.generation();
        filter.add(item(i), nullptr, &full);
        added.push_back({i, g});
        // A single adder is told of the shift as its add takes the last
        // room, never later.
        if (full != filter.shift_wanted()) ADD_FAILURE() << "full and shift_wanted disagree";
        if (full) {
            check(added);
            filter.shift(0);
        }
    }
}

TEST(AgeFilter, EveryItemOfTheLastWindowIsFoundAfterEachShift) {
    const AgeGeometry shape = geometry(0.01, 10'000);
    const auto filter = AgeFilter::create(shape);
    const std::uint64_t window = shape.window_items();
    ASSERT_GE(window, 10'000u);
    std::vector<Added> added;
    std::uint64_t checks = 0;
    // Ten windows and a tenth: adds whose bits were all set already take no
    // room.
    fill(*filter, 11 * window, added, [&](const std::vector<Added>& so_far) {
        const std::size_t from = so_far.size() > window ? so_far.size() - window : 0;
        for (std::size_t j = from; j < so_far.size(); ++j) {
            ASSERT_TRUE(filter->contains(item(so_far[j].item))) << "item " << so_far[j].item;
        }
        ++checks;
    });
    EXPECT_GE(checks, 10 * shape.shape.l);
    EXPECT_GE(filter->generation(), 10 * shape.shape.l);
}

// The rate measured at the end of each generation (the worst moment), over
// ten windows of adds; and how items fade past the window: an item stamped
// G − l − j (j = 1 .. k − 1) keeps k − j of its bits in a row at the old
// end of the ring, so it answers 1 while j more bits beside them happen to
// be set (about a half each, in full slices); from j = k on, at the rate.
void expect_rate_within_request(double rate, std::uint64_t capacity) {
    const AgeGeometry shape = geometry(rate, capacity);
    const auto filter = AgeFilter::create(shape);
    const std::uint32_t k = shape.shape.k;
    const std::uint64_t l = shape.shape.l;
    std::uint64_t probes = 0;
    std::uint64_t positives = 0;
    std::vector<std::uint64_t> faded(k + 1, 0);  // by j, capped at k
    std::vector<std::uint64_t> faded_probes(k + 1, 0);
    std::uint64_t next_probe = 0;
    std::vector<Added> added;
    fill(*filter, 10 * shape.window_items(), added, [&](const std::vector<Added>& so_far) {
        const std::uint64_t g = filter->generation();
        if (g < shape.slices() + k) return;  // the ring is not full yet
        for (int j = 0; j < 2000; ++j) {
            positives += filter->contains(item(next_probe++, "never")) ? 1 : 0;
            ++probes;
        }
        // Every 50th item, newest first, down to those k generations past the window.
        for (std::size_t j = so_far.size(); j >= 50; j -= 50) {
            const Added& a = so_far[j - 50];
            if (a.generation + l >= g) continue;
            const std::uint64_t past = std::min<std::uint64_t>(g - l - a.generation, k);
            faded[past] += filter->contains(item(a.item)) ? 1 : 0;
            ++faded_probes[past];
            if (a.generation + l + 2 * k < g) break;
        }
    });
    ASSERT_GT(probes, 100'000u);
    const double measured = static_cast<double>(positives) / static_cast<double>(probes);
    const double sigma = std::sqrt(rate / static_cast<double>(probes));
    EXPECT_LE(measured, rate + 4 * sigma) << probes << " probes";
    EXPECT_GE(measured, rate / 3) << "the slices are sized for the rate, not far below it";
    const auto share = [&](std::uint32_t j) {
        return static_cast<double>(faded[j]) / static_cast<double>(faded_probes[j]);
    };
    ASSERT_GT(faded_probes[k], 1000u);
    EXPECT_LE(share(k), rate + 4 * std::sqrt(rate / static_cast<double>(faded_probes[k])));
    EXPECT_LT(share(1), 0.6);
    for (std::uint32_t j = 2; j < k; ++j) {
        EXPECT_LE(share(j), share(j - 1) * 0.75 + 0.02) << j << " generations past the window";
    }
    // The model at the slices' size as rounded up to whole blocks.
    const double scale = static_cast<double>(shape.slice_bits) * std::numbers::ln2 /
                         static_cast<double>(shape.shape.k * shape.generation_items);
    EXPECT_NEAR(filter->estimated_false_positive_rate(),
                age_false_positive_rate(shape.shape, 1.0, scale), rate / 4);
}

TEST(AgeFilter, FalsePositiveRateOverTenWindowsIsTheRequestedOnePercent) {
    expect_rate_within_request(0.01, 20'000);
}

TEST(AgeFilter, FalsePositiveRateOverTenWindowsIsTheRequestedTenthOfAPercent) {
    expect_rate_within_request(0.001, 20'000);
}

TEST(AgeFilter, ItemsAndCardinalityCountTheWindow) {
    const AgeGeometry shape = geometry(0.01, 50'000);
    const auto filter = AgeFilter::create(shape);
    std::vector<Added> added;
    fill(*filter, 3 * shape.window_items() + shape.generation_items / 2, added,
         [](const std::vector<Added>&) {});
    // Generations G − l .. G: l full ones and half of the current one.
    const std::uint64_t g = shape.generation_items;
    EXPECT_NEAR(static_cast<double>(filter->items()),
                static_cast<double>(shape.shape.l * g + g / 2), 0.01 * shape.shape.l * g);
    EXPECT_NEAR(static_cast<double>(filter->estimate_cardinality()),
                static_cast<double>(filter->items()), 0.03 * filter->items());
    for (std::uint64_t L = filter->generation() - shape.shape.l; L < filter->generation(); ++L) {
        EXPECT_GE(filter->generation_count(L), g) << "generation " << L << " shifted early";
    }
    EXPECT_EQ(filter->generation_count(filter->generation() + 1), 0u);
}

TEST(AgeFilter, AnAddThatFindsItsNewestBitsSetChangesNothing) {
    const auto filter = AgeFilter::create(geometry(0.01, 1'000));
    EXPECT_EQ(filter->add(item(1)), AgeFilter::Added::added);
    EXPECT_EQ(filter->add(item(1)), AgeFilter::Added::exists);
    EXPECT_EQ(filter->items(), 1u);
}

// Added again while the window still holds it, an item answers "exists"
// and lasts a window from the second add; items added once fade.
TEST(AgeFilter, AnItemAddedAgainLastsAWindowFromItsLastAdd) {
    const AgeGeometry shape = geometry(0.01, 1'000);
    const auto filter = AgeFilter::create(shape);
    constexpr int kItems = 200;
    for (int i = 0; i < kItems; ++i) EXPECT_EQ(filter->add(item(i)), AgeFilter::Added::added);
    for (std::uint32_t s = 0; s < shape.shape.l; ++s) filter->shift(0);
    for (int i = 0; i < kItems; i += 2) {
        ASSERT_TRUE(filter->contains(item(i)));
        EXPECT_EQ(filter->add(item(i)), AgeFilter::Added::exists);
    }
    EXPECT_EQ(filter->generation_count(filter->generation()), kItems / 2u);
    for (std::uint32_t s = 0; s < shape.shape.l; ++s) filter->shift(0);
    int once_found = 0;
    for (int i = 0; i < kItems; i += 2) {
        ASSERT_TRUE(filter->contains(item(i))) << "item " << i << " added again";
        once_found += filter->contains(item(i + 1)) ? 1 : 0;
    }
    EXPECT_LE(once_found, 8) << "of 100 items added once, a window and more ago";
}

TEST(AgeFilter, AdvancingAWindowOrMoreClearsEverySlice) {
    const AgeGeometry shape = geometry(0.01, 1'000);
    const auto filter = AgeFilter::create(shape);
    for (std::uint64_t i = 0; i < 100; ++i) filter->add(item(i));
    filter->advance_to(3, 30);
    EXPECT_EQ(filter->generation(), 3u);
    EXPECT_TRUE(filter->contains(item(5)));
    filter->advance_to(3 + shape.slices(), 60);
    EXPECT_EQ(filter->generation(), 3u + shape.slices());
    EXPECT_EQ(filter->shifted_ms(), 60u);
    for (std::uint64_t w = 0; w < filter->num_words(); ++w) ASSERT_EQ(filter->load_word(w), 0u);
    EXPECT_EQ(filter->items(), 0u);
    EXPECT_FALSE(filter->contains(item(5)));
}

// What a primary's adds and shifts record, per thread.
struct Event {
    bool shift;
    std::uint64_t generation;
    ItemHash hash;
};
class Recorder : public AgeRecorder {
public:
    bool record(std::uint64_t generation, const ItemHash& hash) noexcept override {
        events.push_back({false, generation, hash});
        return true;
    }
    std::vector<Event> events;
};

void redo(AgeFilter& filter, const std::vector<Event>& events) {
    for (const Event& e : events) {
        if (e.shift) {
            filter.advance_to(e.generation, 0);
        } else {
            filter.redo_add(e.generation, e.hash);
        }
    }
}

void expect_same(const AgeFilter& a, const AgeFilter& b) {
    ASSERT_EQ(a.generation(), b.generation());
    std::uint64_t differ = 0;
    for (std::uint64_t w = 0; w < a.num_words(); ++w) differ += a.load_word(w) != b.load_word(w);
    EXPECT_EQ(differ, 0u) << "words differ";
    for (std::uint64_t L = a.generation() + 1 - a.slices(); L <= a.generation(); ++L) {
        EXPECT_EQ(a.generation_count(L), b.generation_count(L)) << "generation " << L;
    }
}

// Threads add at once while one thread shifts, waiting out the epoch as the
// keyspace does. Then: every add stamped in the window is found, no
// generation shifted early, and the threads' records redone one thread
// after another, in either order, give back the same words and counts.
TEST(AgeFilter, ConcurrentAddsAndShiftsRedoToTheSameBits) {
    const AgeGeometry shape = geometry(0.01, 4'000);
    const auto filter = AgeFilter::create(shape);
    constexpr int kThreads = 3;
    constexpr std::uint64_t kPerThread = 1'000'000;
    std::vector<Recorder> recorders(kThreads);
    std::vector<Event> shifts;
    std::atomic<int> running{kThreads};
    std::thread shifter([&] {
        while (running.load() > 0) {
            if (!filter->shift_wanted()) {
                std::this_thread::yield();
                continue;
            }
            const std::uint64_t stamp = store::epoch_retire_stamp();
            while (!store::epoch_passed(stamp)) std::this_thread::yield();
            filter->shift(0);
            shifts.push_back({true, filter->generation(), {}});
        }
    });
    std::vector<std::thread> adders;
    for (int t = 0; t < kThreads; ++t) {
        adders.emplace_back([&, t] {
            // Until the ring has gone round twice (bounded), however the
            // shifter is scheduled.
            for (std::uint64_t i = 0; i < kPerThread && filter->generation() <= 2 * shape.slices();
                 ++i) {
                bool full = false;
                const std::uint64_t g = filter->generation();
                {
                    const store::EpochGuard guard;
                    filter->add(item(i * kThreads + t), &recorders[t], &full);
                }
                // Gives the shifter a chance (a server's shifts come within
                // a grace period; two cores here).
                for (int spin = 0; full && spin < 1000 && filter->generation() == g; ++spin) {
                    std::this_thread::yield();
                }
            }
            running.fetch_sub(1);
        });
    }
    for (std::thread& a : adders) a.join();
    shifter.join();
    const std::uint64_t g = filter->generation();
    ASSERT_GT(g, 2 * shape.slices()) << "too few shifts to test";
    std::uint64_t checked = 0;
    for (const Recorder& r : recorders) {
        for (const Event& e : r.events) {
            if (e.generation + shape.shape.l < g) continue;
            ASSERT_TRUE(filter->contains(e.hash)) << "stamped " << e.generation << " at " << g;
            ++checked;
        }
    }
    EXPECT_GE(checked, shape.window_items());
    for (std::uint64_t L = g - shape.shape.l; L < g; ++L) {
        EXPECT_GE(filter->generation_count(L), shape.generation_items) << "generation " << L;
    }
    for (bool shifts_first : {true, false}) {
        const auto copy = AgeFilter::create(shape);
        if (shifts_first) redo(*copy, shifts);
        for (int t = kThreads - 1; t >= 0; --t) redo(*copy, recorders[t].events);
        if (!shifts_first) redo(*copy, shifts);
        expect_same(*filter, *copy);
    }
}

TEST(AgeFilter, ARecordStampedAheadAdvancesTheCopy) {
    const AgeGeometry shape = geometry(0.01, 1'000);
    const auto copy = AgeFilter::create(shape);
    copy->redo_add(5, item(1));
    EXPECT_EQ(copy->generation(), 5u);
    EXPECT_TRUE(copy->contains(item(1)));
    EXPECT_EQ(copy->generation_count(5), 1u);
}

// BF.LOADCHUNK's words ORed in at generation G0, then shifts: a copy that
// redoes the words before the shifts, or after them (records of different
// threads reach a replica in any order), holds the same words.
TEST(AgeFilter, WordsLoadedBeforeShiftsRedoTheSameInEitherOrder) {
    const AgeGeometry shape = geometry(0.01, 1'000);
    // Adds first..end-1, twenty a generation.
    const auto history = [&](AgeFilter& filter, std::uint64_t begin = 0, std::uint64_t end = 400) {
        for (std::uint64_t i = begin; i < end; ++i) filter.redo_add(i / 20, item(i));
    };
    std::mt19937_64 random(7);
    std::string data;
    for (int i = 0; i < 200; ++i) {
        const std::uint64_t word = random() & random();
        data.append(reinterpret_cast<const char*>(&word), 8);
    }
    const std::uint64_t first = 8;
    const auto primary = AgeFilter::create(shape);
    history(*primary);
    const std::uint64_t g0 = primary->generation();
    primary->or_words(first, data);
    const std::uint64_t last = g0 + shape.slices() / 2;
    primary->advance_to(last, 0);
    for (std::uint64_t ahead : {g0, g0 + 1, last}) {
        const auto copy = AgeFilter::create(shape);
        history(*copy);
        // The shifts up to `ahead` came first, then the words, then the rest.
        copy->advance_to(ahead, 0);
        copy->redo_words(g0, first, data);
        copy->advance_to(last, 0);
        expect_same(*primary, *copy);
    }
    // Words stamped ahead of the copy bring it to their generation first;
    // the adds recorded before them by other threads still land after.
    const auto behind = AgeFilter::create(shape);
    history(*behind, 0, 300);
    ASSERT_LT(behind->generation(), g0);
    behind->redo_words(g0, first, data);
    EXPECT_EQ(behind->generation(), g0);
    history(*behind, 300, 400);
    behind->advance_to(last, 0);
    expect_same(*primary, *behind);
}

TEST(AgeFilter, GeometryChecks) {
    EXPECT_FALSE(age_geometry(0.0, 1000, 0));
    EXPECT_FALSE(age_geometry(0.01, 0, 0));
    const std::optional<AgeGeometry> chosen = age_geometry(0.01, 1000, 0, AgeShape{4, 6});
    ASSERT_TRUE(chosen);
    EXPECT_EQ(chosen->generation_items, 167u);
    // Four slices in a row at 1 % need them far from half full.
    const double scale = age_slice_scale({4, 6}, 0.01);
    EXPECT_GT(scale, 2.0);
    EXPECT_EQ(chosen->slice_bits, age_slice_bits({4, 6}, 167, scale));
    EXPECT_LE(age_false_positive_rate({4, 6}, 1.0, scale), 0.01);
    EXPECT_FALSE(age_geometry(0.01, 1000, 3, AgeShape{4, 6})) << "window shorter than l ms";
    EXPECT_TRUE(age_geometry(0.01, 1000, 7 * 86'400'000ull));
    AgeGeometry bad = *chosen;
    bad.slice_bits = 100;
    EXPECT_FALSE(check_age_geometry(bad).empty());
}

}  // namespace
}  // namespace bloomery::bloom
