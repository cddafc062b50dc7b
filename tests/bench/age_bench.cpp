// Expiring (age-partitioned) filters against plain ones of the same error
// rate: bits per window item, CPU per add and per lookup, the measured
// false-positive rate, and adds from one and two threads at once.
//
//   age_bench [window] [rounds]     (defaults 10000000 and 3)
//
// For each rate (1 %, 0.1 %):
//   plain   one NONSCALING filter of `window` items, default layout (auto)
//           and classic, filled once: ns/add over the fill.
//   age     a count window of `window` items, filled with two windows of
//           items first (so every slice has taken its generations), then
//           one more window timed: ns/add, shifts included (this thread
//           shifts when a generation is full; no other thread adds).
//   lookup  contains over batches of 100 (BF.MEXISTS's path, hashing
//           included), half items of the last window, half never added.
//   threads T adders (T = 1, 2), distinct items, one window each, into a
//           fresh filter; the age filter's shifts by a thread of their own,
//           waiting out the epoch as the server does. ns of wall time per
//           add, all threads together.
// Each figure is the median of `rounds`. Output: tab-separated rows.
//
// Built by the bench preset (tests/bench/CMakeLists.txt).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/bloom/hash.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/store/epoch.hpp"

namespace {

using namespace bloomery::bloom;
using Clock = std::chrono::steady_clock;

// Items as a server sees them: URL-like, 30-50 bytes.
std::string item(const char* kind, std::uint64_t i) {
    return "https://example.com/" + std::string(kind) +
           "/page?id=" + std::to_string(i * 2654435761ULL % 1000000007ULL) +
           "&n=" + std::to_string(i);
}

double ns_since(Clock::time_point start, std::uint64_t n) {
    return std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
           static_cast<double>(n);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Adds items [first, first + n) of `kind`, shifting when full (one thread).
void age_adds(AgeFilter& filter, const char* kind, std::uint64_t first, std::uint64_t n) {
    for (std::uint64_t i = first; i < first + n; ++i) {
        filter.add(hash_item(item(kind, i)));
        if (filter.shift_wanted()) filter.shift(0);
    }
}

// ns per lookup over batches of 100, half from [present_from, +n/2) of
// "u", half never added; the false-positive share in `fpr`.
template <class Lookup>
double time_lookups(std::uint64_t present_from, std::uint64_t n, double& fpr, Lookup&& lookup) {
    std::vector<ItemHash> hashes;
    std::vector<std::string> items;
    items.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i) {
        items.push_back(i % 2 == 0 ? item("u", present_from + i / 2) : item("never", i));
    }
    std::vector<std::uint8_t> found(n);
    const auto start = Clock::now();
    lookup(items, found);
    const double ns = ns_since(start, n);
    std::uint64_t positives = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        if (i % 2 == 0 && found[i] == 0) {
            std::fprintf(stderr, "false negative\n");
            std::exit(1);
        }
        if (i % 2 == 1) positives += found[i];
    }
    fpr = static_cast<double>(positives) / static_cast<double>(n / 2);
    return ns;
}

void age_lookup(const AgeFilter& filter, const std::vector<std::string>& items,
                std::vector<std::uint8_t>& found) {
    constexpr std::size_t kBatch = 100;
    ItemHash hashes[kBatch];
    for (std::size_t at = 0; at < items.size(); at += kBatch) {
        const std::size_t n = std::min(kBatch, items.size() - at);
        for (std::size_t i = 0; i < n; ++i) hashes[i] = hash_item(items[at + i]);
        filter.contains_many(hashes, n, found.data() + at);
    }
}

void plain_lookup(const ScalableFilter& filter, const std::vector<std::string>& items,
                  std::vector<std::uint8_t>& found) {
    constexpr std::size_t kBatch = 100;
    std::vector<std::string_view> views(items.begin(), items.end());
    for (std::size_t at = 0; at < items.size(); at += kBatch) {
        const std::size_t n = std::min(kBatch, items.size() - at);
        filter.contains_many(std::span(views).subspan(at, n), std::span(found).subspan(at, n));
    }
}

// Wall ns per add, `threads` adders of `per_thread` items each at once.
double threaded_adds(int threads, std::uint64_t per_thread,
                     const std::function<void(std::uint64_t)>& add,
                     const std::function<void(std::atomic<int>&)>& beside) {
    std::atomic<int> running{threads};
    std::thread helper([&] { beside(running); });
    const auto start = Clock::now();
    std::vector<std::thread> adders;
    for (int t = 0; t < threads; ++t) {
        adders.emplace_back([&, t] {
            for (std::uint64_t i = 0; i < per_thread; ++i) add(i * threads + t);
            running.fetch_sub(1);
        });
    }
    for (std::thread& a : adders) a.join();
    const double ns = ns_since(start, per_thread * threads);
    helper.join();
    return ns;
}

void shifter(AgeFilter& filter, std::atomic<int>& running) {
    while (running.load() > 0) {
        if (!filter.shift_wanted()) {
            std::this_thread::yield();
            continue;
        }
        const std::uint64_t stamp = bloomery::store::epoch_retire_stamp();
        while (!bloomery::store::epoch_passed(stamp)) std::this_thread::yield();
        filter.shift(0);
    }
}

void print(double p, const char* kind, double bits, const std::vector<double>& add,
           const std::vector<double>& lookup, double fpr, double t1, double t2) {
    std::printf("%g\t%s\t%.2f\t%.1f\t%.1f\t%.4f\t%.1f\t%.1f\n", p, kind, bits, median(add),
                median(lookup), fpr, t1, t2);
    std::fflush(stdout);
}

void plain_rows(double p, std::uint64_t window, int rounds, Layout layout, const char* name) {
    std::vector<double> add;
    std::vector<double> lookup;
    std::vector<double> t1;
    std::vector<double> t2;
    double fpr = 0;
    std::uint64_t bits = 0;
    FilterOptions options;
    options.error_rate = p;
    options.capacity = window;
    options.nonscaling = true;
    options.layout = layout;
    for (int r = 0; r < rounds; ++r) {
        const FilterRef filter = ScalableFilter::create(options);
        bits = filter->bits_size() * 8;
        const GrowthLimits limits;
        auto start = Clock::now();
        for (std::uint64_t i = 0; i < window; ++i) filter->add(item("u", i), limits);
        add.push_back(ns_since(start, window));
        lookup.push_back(time_lookups(0, 2'000'000, fpr, [&](auto& items, auto& found) {
            plain_lookup(*filter, items, found);
        }));
        for (int threads : {1, 2}) {
            const FilterRef fresh = ScalableFilter::create(options);
            const double ns = threaded_adds(
                threads, window / threads,
                [&](std::uint64_t i) {
                    const bloomery::store::EpochGuard guard;
                    fresh->add(item("u", i), limits);
                },
                [](std::atomic<int>&) {});
            (threads == 1 ? t1 : t2).push_back(ns);
        }
    }
    print(p, name, static_cast<double>(bits) / static_cast<double>(window), add, lookup, fpr,
          median(t1), median(t2));
}

void age_rows(double p, std::uint64_t window, int rounds) {
    const std::optional<AgeGeometry> geometry = age_geometry(p, window, 0);
    if (!geometry) return;
    std::vector<double> add;
    std::vector<double> lookup;
    std::vector<double> t1;
    std::vector<double> t2;
    double fpr = 0;
    for (int r = 0; r < rounds; ++r) {
        const AgeFilterRef filter = AgeFilter::create(*geometry);
        age_adds(*filter, "u", 0, 2 * window);
        auto start = Clock::now();
        age_adds(*filter, "u", 2 * window, window);
        add.push_back(ns_since(start, window));
        lookup.push_back(
            time_lookups(2 * window, std::min<std::uint64_t>(2'000'000, 2 * window), fpr,
                         [&](auto& items, auto& found) { age_lookup(*filter, items, found); }));
        for (int threads : {1, 2}) {
            const AgeFilterRef fresh = AgeFilter::create(*geometry);
            const double ns = threaded_adds(
                threads, window / threads,
                [&](std::uint64_t i) {
                    const bloomery::store::EpochGuard guard;
                    fresh->add(hash_item(item("u", i)));
                },
                [&](std::atomic<int>& running) { shifter(*fresh, running); });
            (threads == 1 ? t1 : t2).push_back(ns);
        }
    }
    const double bits = static_cast<double>(geometry->slices()) *
                        static_cast<double>(geometry->slice_bits) / static_cast<double>(window);
    char name[64];
    std::snprintf(name, sizeof name, "age k=%u l=%u", geometry->shape.k, geometry->shape.l);
    print(p, name, bits, add, lookup, fpr, median(t1), median(t2));
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t window = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'000;
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
    std::printf(
        "rate\tfilter\tbits/item\tns/add\tns/lookup\tfpr\tns/add 1 thread\t"
        "ns/add 2 threads\n");
    for (double p : {0.01, 0.001}) {
        plain_rows(p, window, rounds, Layout::automatic_blocks, "plain auto");
        plain_rows(p, window, rounds, Layout::classic, "plain classic");
        age_rows(p, window, rounds);
    }
}
