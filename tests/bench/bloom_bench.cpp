// Micro-benchmarks of the Bloom core (Google Benchmark; `make bench`, or
// cmake --preset bench && build/bench/tests/bench/bloom_bench).
//
// What is measured:
//   BM_HashItem/<bytes>            hash_item on 8, 40 and 256-byte items.
//   BM_CreateFilter/<size>/<layout> creating and dropping a filter (size 0: a
//                                  default one, as BF.ADD on a new key makes).
//   BM_Add/<size>/<layout>/<fills> ScalableFilter::add of new items into an empty
//                                  filter, up to its capacity, <fills> times.
//   BM_AddMany/<size>/<layout>/<fills> add_many, batches of 100 new items.
//   BM_Contains/<size>/<layout>    contains on a filter filled to capacity; probes
//                                  alternate between present and absent items.
//   BM_ContainsMany/<size>/<layout> contains_many, batches of 100 of the same probes.
//   BM_MExists/<size>/<layout>     contains_many with its items in cache, as a
//                                  server's read buffer holds a command's items:
//                                  each batch of 100 is first copied into a
//                                  receive buffer with the timer paused (in a
//                                  server the kernel's recv() does that copy).
//                                  The pool's 60 MB of keys are not in cache:
//                                  BM_ContainsMany reads each from memory
//                                  (4-5 ns more per item in 1 GiB, 2-core VM),
//                                  BM_MExists does not.
// <size> is the bit array in bytes (64 KiB, 16 MiB, 1 GiB), <layout> is 0 =
// classic, 1 = blocked. Every filter case runs with 1 and 2 threads (or
// BLOOMERY_BENCH_THREADS, below) sharing one
// filter. Counters:
//   ns_per_item  wall-clock time per item over all threads together (items /
//                real time, inverted), so 2 threads at twice the rate show half
//                the figure of 1 thread.
//   fpr          the false-positive rate measured on the filter of that size and
//                layout filled to capacity: the share of absent items it reports
//                as present (2^19 probes).
//
// BLOOMERY_BENCH_THREADS (environment, e.g. "1,2,8"; default "1,2") sets the
// thread counts every filter case runs with, for a many-core machine.
// Sizes above BLOOMERY_BENCH_MAX_BYTES (environment, bytes) are skipped, e.g. on
// a machine with little memory or to keep a run short: filling the 1 GiB
// filter to capacity (896 M items, untimed) takes about a minute per layout
// on the 2-core development VM.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/hash.hpp"
#include "bloomery/bloom/scalable_filter.hpp"

namespace {

using bloomery::bloom::AddResult;
using bloomery::bloom::FilterOptions;
using bloomery::bloom::FilterRef;
using bloomery::bloom::first_layer;
using bloomery::bloom::GrowthLimits;
using bloomery::bloom::hash_item;
using bloomery::bloom::ItemHash;
using bloomery::bloom::Layout;
using bloomery::bloom::ScalableFilter;

constexpr double kErrorRate = 0.01;
constexpr std::size_t kBatch = 100;
// Distinct pre-built keys. Half are "present" (added to filled filters), half
// "absent" (never added; they measure the false-positive rate).
constexpr std::size_t kPoolKeys = std::size_t{1} << 20;
constexpr std::uint64_t kSizes[] = {64 * 1024, 16 * 1024 * 1024, 1024 * 1024 * 1024};

// URL-like keys of 30 to 90 bytes with random hosts, paths and ids, stored in
// one arena so the benchmark loops read keys as a server reads its input
// buffer, and build no strings while timed.
class KeyPool {
public:
    KeyPool() {
        std::mt19937_64 rng(20261123);
        static constexpr std::string_view kHosts[] = {"example.com", "cdn.example.net",
                                                      "img.shop.example.org", "api.example.io",
                                                      "news.example.co.uk"};
        static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_";
        std::vector<std::pair<std::size_t, std::size_t>> spans;
        spans.reserve(kPoolKeys);
        arena_.reserve(kPoolKeys * 64);
        for (std::size_t i = 0; i < kPoolKeys; ++i) {
            const std::size_t start = arena_.size();
            arena_ += "https://";
            arena_ += kHosts[rng() % std::size(kHosts)];
            const std::size_t segments = 1 + rng() % 3;
            for (std::size_t s = 0; s < segments; ++s) {
                arena_ += '/';
                const std::size_t len = 3 + rng() % 12;
                for (std::size_t c = 0; c < len; ++c) arena_ += kAlphabet[rng() % kAlphabet.size()];
            }
            arena_ += "?id=";
            const std::uint64_t id = rng();
            for (int shift = 60; shift >= 0; shift -= 4) {
                arena_ += "0123456789abcdef"[(id >> shift) & 15];
            }
            spans.emplace_back(start, arena_.size() - start);
        }
        keys_.reserve(kPoolKeys);
        for (const auto& [start, len] : spans) keys_.emplace_back(arena_.data() + start, len);
    }
    std::string_view operator[](std::size_t i) const { return keys_[i]; }
    std::size_t size() const { return keys_.size(); }
    std::span<const std::string_view> slice(std::size_t first, std::size_t count) const {
        return {keys_.data() + first, count};
    }
    std::string_view absent(std::size_t i) const {
        return keys_[kPoolKeys / 2 + i % (kPoolKeys / 2)];
    }

private:
    std::string arena_;
    std::vector<std::string_view> keys_;
};

const KeyPool& pool() {
    static const KeyPool keys;
    return keys;
}

// The layouts: 0 = classic, 1 = blocked (bounds.hpp Layout).
bool layout_in_build(int layout) {
    return layout == 0 || layout == 1;
}

FilterOptions bench_options(std::uint64_t capacity, int layout) {
    FilterOptions options;
    options.error_rate = kErrorRate;
    options.capacity = capacity;
    options.nonscaling = true;
    options.layout = layout == 1 ? Layout::blocked : Layout::classic;
    return options;
}

// The largest capacity whose first layer fits in `bit_bytes` at 1 % (binary
// search over bounds.hpp's first_layer, so a layout with its own sizing gets
// its own capacity for the same bytes).
std::uint64_t capacity_for(std::uint64_t bit_bytes, int layout) {
    std::uint64_t low = 1, high = bit_bytes * 8;
    while (low < high) {
        const std::uint64_t mid = low + (high - low + 1) / 2;
        if (first_layer(bench_options(mid, layout)).bits / 8 <= bit_bytes) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    return low;
}

// Every benchmark filter is made here: NONSCALING, 1 %, the largest capacity
// whose bit array fits in `bit_bytes`, in the given layout.
FilterRef make_bench_filter(std::uint64_t bit_bytes, int layout) {
    if (!layout_in_build(layout)) return {};
    return ScalableFilter::create(bench_options(capacity_for(bit_bytes, layout), layout));
}

std::uint64_t max_bytes_from_env() {
    const char* text = std::getenv("BLOOMERY_BENCH_MAX_BYTES");
    return text == nullptr ? ~std::uint64_t{0} : std::strtoull(text, nullptr, 10);
}

// Thread counts from BLOOMERY_BENCH_THREADS ("1,2,8"), default {1, 2}.
std::vector<int> thread_counts_from_env() {
    const char* text = std::getenv("BLOOMERY_BENCH_THREADS");
    std::vector<int> counts;
    for (const char* p = text == nullptr ? "" : text; *p != '\0';) {
        char* end = nullptr;
        const long value = std::strtol(p, &end, 10);
        if (end == p) {
            ++p;
            continue;
        }
        if (value >= 1 && value <= 256) counts.push_back(static_cast<int>(value));
        p = end;
    }
    if (counts.empty()) counts = {1, 2};
    return counts;
}

// splitmix64: cheap, well-mixed stand-in hashes for filling large filters
// (hashing 896 M distinct strings would only make the set-up slower).
std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Adds random items from every core until the NONSCALING filter reports full.
void fill_to_capacity(ScalableFilter& filter) {
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t) {
        workers.emplace_back([&filter, t] {
            std::uint64_t state = 0x5eed0000ull + t;
            const GrowthLimits limits;
            // Each item's words are prefetched 16 items before it is added,
            // so the misses of a large filter overlap (one add at a time
            // waited for each in turn: 9 minutes for 1 GiB on the 2-core VM).
            constexpr std::size_t kAhead = 16;
            ItemHash ring[kAhead];
            const auto& layer = filter.layer(0);
            for (auto& hash : ring) {
                hash = {splitmix64(state), splitmix64(state)};
                layer.prefetch(hash);
            }
            for (std::size_t i = 0;; i = (i + 1) % kAhead) {
                if (filter.add(ring[i], limits) == AddResult::full) break;
                ring[i] = {splitmix64(state), splitmix64(state)};
                layer.prefetch(ring[i]);
            }
        });
    }
    for (auto& worker : workers) worker.join();
}

// Touches every page of a new filter's bit array (storing zeros, which sets
// nothing), so the add benchmarks on large filters measure adds, not the
// kernel's first-touch page faults (1 GiB = 262 144 faults, a one-off cost
// of any new filter, paid outside the timed loop).
void prefault(ScalableFilter& filter) {
    auto& layer = filter.layer(0);
    const std::vector<std::uint64_t> zeros(8192, 0);
    for (std::uint64_t first = 0; first < layer.num_words(); first += zeros.size()) {
        const std::uint64_t count =
            std::min<std::uint64_t>(zeros.size(), layer.num_words() - first);
        layer.store_words(first, count, zeros.data());
    }
}

// A filter filled to capacity, with the present keys added first, and its
// measured false-positive rate. One is kept at a time (the 1 GiB ones are
// large and slow to fill), rebuilt when another size or layout is asked for.
struct FilledFilter {
    std::uint64_t bit_bytes = 0;
    int layout = -1;
    FilterRef filter;
    double fpr = 0;
    // kPoolKeys probes alternating between an added and an absent key.
    std::vector<std::string_view> probes;
};

FilledFilter& filled_cache() {
    static FilledFilter cached;
    return cached;
}

const FilledFilter& filled_filter(std::uint64_t bit_bytes, int layout) {
    FilledFilter& cached = filled_cache();
    if (cached.filter && cached.bit_bytes == bit_bytes && cached.layout == layout) return cached;
    cached = {};
    FilterRef filter = make_bench_filter(bit_bytes, layout);
    if (!filter) return cached;
    const GrowthLimits limits;
    std::size_t present = 0;
    while (present < kPoolKeys / 2 && filter->add(pool()[present], limits) != AddResult::full) {
        ++present;
    }
    fill_to_capacity(*filter);
    std::size_t positives = 0;
    for (std::size_t i = 0; i < kPoolKeys / 2; ++i) positives += filter->contains(pool().absent(i));
    std::vector<std::string_view> probes;
    probes.reserve(kPoolKeys);
    for (std::size_t i = 0; i < kPoolKeys / 2; ++i) {
        probes.push_back(pool()[i % std::max<std::size_t>(present, 1)]);
        probes.push_back(pool().absent(i));
    }
    cached = {bit_bytes, layout, std::move(filter),
              static_cast<double>(positives) / static_cast<double>(kPoolKeys / 2),
              std::move(probes)};
    return cached;
}

// The filter all threads of one run share. Thread 0 sets it up before the
// timed loop; the other threads read it only inside the loop, after Google
// Benchmark's start barrier (the loop begins when every thread reaches it,
// and the timer starts then), and thread 0 drops it after the loop, behind
// the stop barrier.
// Replaces the shared filter with a fresh one between the fills of an add
// benchmark; runs in one thread while the others wait at the barrier.
struct Refill {
    void operator()() noexcept;
};

struct Shared {
    ScalableFilter* filter = nullptr;
    FilterRef owner;
    double fpr = 0;
    const std::vector<std::string_view>* probes = nullptr;  // FilledFilter::probes
    std::uint64_t bit_bytes = 0;
    int layout = 0;
    std::unique_ptr<std::barrier<Refill>> refill;  // add benchmarks
};
Shared shared;

void Refill::operator()() noexcept {
    shared.owner = make_bench_filter(shared.bit_bytes, shared.layout);
    prefault(*shared.owner);
    shared.filter = shared.owner.get();
}

// Why this size and layout cannot run, or nullptr. Every thread asks and
// skips alike: a thread that entered the timed loop alone would wait at its
// start barrier for the others.
const char* skip_reason(std::uint64_t bit_bytes, int layout) {
    if (bit_bytes > max_bytes_from_env()) return "size above BLOOMERY_BENCH_MAX_BYTES";
    if (!layout_in_build(layout)) return "no such layout";
    return nullptr;
}

// Sets up `shared` for a run: thread 0 builds, the others only check. Returns
// false after SkipWithError when the benchmark cannot run.
bool shared_setup(benchmark::State& state, bool filled) {
    const auto bit_bytes = static_cast<std::uint64_t>(state.range(0));
    const int layout = static_cast<int>(state.range(1));
    if (const char* reason = skip_reason(bit_bytes, layout)) {
        state.SkipWithError(reason);
        return false;
    }
    if (state.thread_index() != 0) return true;
    shared = {};
    shared.bit_bytes = bit_bytes;
    shared.layout = layout;
    shared.refill = std::make_unique<std::barrier<Refill>>(state.threads());
    // Add benchmarks report the false-positive rate of their size and layout
    // too; the filled filter is built once and then kept for the lookups.
    const FilledFilter& full = filled_filter(bit_bytes, layout);
    shared.fpr = full.fpr;
    shared.probes = &full.probes;
    if (filled) {
        shared.owner = full.filter;
    } else {
        shared.owner = make_bench_filter(bit_bytes, layout);
        prefault(*shared.owner);
    }
    shared.filter = shared.owner.get();
    return true;
}

void report(benchmark::State& state, std::int64_t items) {
    state.counters["ns_per_item"] = benchmark::Counter(
        static_cast<double>(items), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    if (state.thread_index() == 0) {
        // Counters are summed over threads: only thread 0 reports the fpr.
        state.counters["fpr"] = shared.fpr;
        shared = {};
    }
}

// Items each thread adds in one run of an add benchmark: the whole run fills
// the fresh filter from empty to at most its capacity (never past, where a
// NONSCALING filter answers "full" without adding) and uses each key once.
std::int64_t add_items_per_thread(std::uint64_t bit_bytes, int layout, int threads) {
    const std::uint64_t total = std::min<std::uint64_t>(capacity_for(bit_bytes, layout),
                                                        static_cast<std::uint64_t>(kPoolKeys));
    return static_cast<std::int64_t>(total / static_cast<std::uint64_t>(threads) / kBatch * kBatch);
}

void BM_HashItem(benchmark::State& state) {
    const auto length = static_cast<std::size_t>(state.range(0));
    // 1024 random items of this length, so no result can be folded.
    std::mt19937_64 rng(length);
    std::string bytes(1024 * length, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    std::size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(hash_item(std::string_view(bytes).substr(i * length, length)));
        i = (i + 1) & 1023;
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
    state.counters["ns_per_item"] =
        benchmark::Counter(static_cast<double>(state.iterations()),
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The add benchmarks fill a fresh filter `fills` times (state.range(2)): a
// 64 KiB filter holds 54 600 items, a few ms of adds, too short to time
// alone on a shared machine. Between fills the timers pause and every
// thread waits at a barrier whose completion replaces the filter (creating
// filters is BM_CreateFilter's). Each thread adds its own slice of the key
// pool to each filter.
void BM_Add(benchmark::State& state) {
    if (!shared_setup(state, false)) return;
    const auto fills = static_cast<std::size_t>(state.range(2));
    const std::size_t per_fill = static_cast<std::size_t>(state.max_iterations) / fills;
    const std::size_t first = static_cast<std::size_t>(state.thread_index()) * per_fill;
    const GrowthLimits limits;
    const KeyPool& keys = pool();
    std::size_t in_fill = 0, fill = 0;
    std::int64_t items = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(shared.filter->add(keys[first + in_fill], limits));
        ++items;
        if (++in_fill == per_fill && ++fill < fills) {
            in_fill = 0;
            state.PauseTiming();
            shared.refill->arrive_and_wait();
            state.ResumeTiming();
        }
    }
    report(state, items);
}

void BM_AddMany(benchmark::State& state) {
    if (!shared_setup(state, false)) return;
    const auto fills = static_cast<std::size_t>(state.range(2));
    const std::size_t per_fill = static_cast<std::size_t>(state.max_iterations) / fills * kBatch;
    const std::size_t first = static_cast<std::size_t>(state.thread_index()) * per_fill;
    std::vector<AddResult> results(kBatch);
    const GrowthLimits limits;
    const KeyPool& keys = pool();
    std::size_t in_fill = 0, fill = 0;
    std::int64_t items = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(
            shared.filter->add_many(keys.slice(first + in_fill, kBatch), limits, results));
        items += kBatch;
        in_fill += kBatch;
        if (in_fill == per_fill && ++fill < fills) {
            in_fill = 0;
            state.PauseTiming();
            shared.refill->arrive_and_wait();
            state.ResumeTiming();
        }
    }
    report(state, items);
}

// Creating and dropping a filter: BM_CreateFilter/0 a default one (BF.ADD on
// a new key: capacity 100, 1 %, scaling), /<bytes>/<layout> a bench filter
// of that size, its pages untouched.
void BM_CreateFilter(benchmark::State& state) {
    const auto bit_bytes = static_cast<std::uint64_t>(state.range(0));
    const int layout = static_cast<int>(state.range(1));
    if (const char* reason = skip_reason(bit_bytes, layout)) {
        state.SkipWithError(reason);
        return;
    }
    for (auto _ : state) {
        FilterRef filter = bit_bytes == 0 ? ScalableFilter::create(FilterOptions{})
                                          : make_bench_filter(bit_bytes, layout);
        benchmark::DoNotOptimize(filter.get());
    }
}

void BM_Contains(benchmark::State& state) {
    if (!shared_setup(state, true)) return;
    // Threads start evenly spread over the probe sequence (alternately a
    // present and an absent item).
    std::size_t i = static_cast<std::size_t>(state.thread_index()) * kPoolKeys /
                    static_cast<std::size_t>(state.threads());
    std::int64_t items = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(shared.filter->contains((*shared.probes)[i & (kPoolKeys - 1)]));
        ++i;
        ++items;
    }
    report(state, items);
}

// BM_ContainsMany (items read from the pool) and BM_MExists (each batch
// first copied, untimed, into a receive buffer).
void run_contains_many(benchmark::State& state, bool received_first) {
    if (!shared_setup(state, true)) return;
    std::vector<std::uint8_t> found(kBatch);
    std::vector<char> received;
    received.reserve(kBatch * 256);
    std::vector<std::string_view> copies(kBatch);
    // Batches start at multiples of kBatch, each thread's evenly spread (a
    // start past the last batch read past the probes with 8 threads); the
    // last batch that fits in kPoolKeys wraps to the start.
    constexpr std::size_t kBatches = kPoolKeys / kBatch;
    std::size_t batch = static_cast<std::size_t>(state.thread_index()) * kBatches /
                        static_cast<std::size_t>(state.threads());
    std::int64_t probed = 0;
    for (auto _ : state) {
        const std::span<const std::string_view> probes(shared.probes->data() + batch * kBatch,
                                                       kBatch);
        std::span<const std::string_view> items = probes;
        if (received_first) {
            state.PauseTiming();
            received.clear();
            for (const std::string_view probe : probes) {
                received.insert(received.end(), probe.begin(), probe.end());
            }
            std::size_t at = 0;
            for (std::size_t i = 0; i < kBatch; ++i) {
                copies[i] = std::string_view(received.data() + at, probes[i].size());
                at += probes[i].size();
            }
            items = copies;
            state.ResumeTiming();
        }
        shared.filter->contains_many(items, found);
        benchmark::DoNotOptimize(found.data());
        if (++batch == kBatches) batch = 0;
        probed += kBatch;
    }
    report(state, probed);
}

void BM_ContainsMany(benchmark::State& state) {
    run_contains_many(state, false);
}

void BM_MExists(benchmark::State& state) {
    run_contains_many(state, true);
}

// Registration: every size × layout × thread count (default 1 and 2). Add benchmarks run a
// fixed number of items (from empty to capacity or the key pool, whichever
// is less), repeated (median, mean and spread reported); lookups run for
// --benchmark_min_time.
void register_all() {
    benchmark::RegisterBenchmark("BM_HashItem", BM_HashItem)->Arg(8)->Arg(40)->Arg(256);
    benchmark::RegisterBenchmark("BM_CreateFilter", BM_CreateFilter)
        ->Args({0, 0})
        ->Args({64 * 1024, 0})
        ->Args({64 * 1024, 1})
        ->Args({16 * 1024 * 1024, 0})
        ->Args({16 * 1024 * 1024, 1});
    const std::vector<int> thread_counts = thread_counts_from_env();
    for (const std::uint64_t bytes : kSizes) {
        for (int layout = 0; layout <= 1; ++layout) {
            for (const int threads : thread_counts) {
                const auto size = static_cast<std::int64_t>(bytes);
                const std::int64_t per_thread = add_items_per_thread(bytes, layout, threads);
                // Small filters are filled many times per run (about 2 M items
                // in all, see BM_Add); large ones once, to at most the key pool.
                const bool small = capacity_for(bytes, layout) <= kPoolKeys;
                const std::int64_t fills =
                    small ? std::clamp<std::int64_t>(
                                (std::int64_t{2} << 20) / (per_thread * threads), 1, 64)
                          : 1;
                const int repetitions = small ? 5 : 3;
                benchmark::RegisterBenchmark("BM_Add", BM_Add)
                    ->Args({size, layout, fills})
                    ->Threads(threads)
                    ->Iterations(per_thread * fills)
                    ->Repetitions(repetitions)
                    ->ReportAggregatesOnly(true)
                    ->UseRealTime();
                benchmark::RegisterBenchmark("BM_AddMany", BM_AddMany)
                    ->Args({size, layout, fills})
                    ->Threads(threads)
                    ->Iterations(per_thread / static_cast<std::int64_t>(kBatch) * fills)
                    ->Repetitions(repetitions)
                    ->ReportAggregatesOnly(true)
                    ->UseRealTime();
            }
            // Lookups after the adds: they share the filled filter of this
            // size and layout, built once.
            for (const int threads : thread_counts) {
                benchmark::RegisterBenchmark("BM_Contains", BM_Contains)
                    ->Args({static_cast<std::int64_t>(bytes), layout})
                    ->Threads(threads)
                    ->UseRealTime();
                benchmark::RegisterBenchmark("BM_ContainsMany", BM_ContainsMany)
                    ->Args({static_cast<std::int64_t>(bytes), layout})
                    ->Threads(threads)
                    ->UseRealTime();
                benchmark::RegisterBenchmark("BM_MExists", BM_MExists)
                    ->Args({static_cast<std::int64_t>(bytes), layout})
                    ->Threads(threads)
                    ->UseRealTime();
            }
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    register_all();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    pool();  // build the keys before any timing
    benchmark::RunSpecifiedBenchmarks();
    filled_cache() = {};
    benchmark::Shutdown();
    return 0;
}
