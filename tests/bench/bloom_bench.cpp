// Micro-benchmarks of the Bloom core: hashing, and add / contains on a layer
// and a scalable filter sized for 1M items at 1 %.
//   build: g++ -std=c++20 -O2 -Iinclude src/bloom/*.cpp tests/bench/bloom_bench.cpp
//          -lbenchmark -lbenchmark_main -lmurmurhash -lxxhash -pthread
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bloomery/bloom/filter.hpp"
#include "bloomery/bloom/hash.hpp"
#include "bloomery/bloom/scalable_filter.hpp"

namespace {

using bloomery::bloom::AddResult;
using bloomery::bloom::BloomLayer;
using bloomery::bloom::FilterOptions;
using bloomery::bloom::hash_item;
using bloomery::bloom::ItemHash;
using bloomery::bloom::ScalableFilter;

constexpr std::uint64_t kCapacity = 1000000;

// Pre-built keys shaped like URLs (~40 bytes), so the loop measures the
// filter, not std::to_string.
const std::vector<std::string>& keys() {
    static const std::vector<std::string> k = [] {
        std::vector<std::string> v;
        v.reserve(kCapacity);
        for (std::uint64_t i = 0; i < kCapacity; ++i) {
            v.push_back("https://example.com/page/" + std::to_string(i * 2654435761u));
        }
        return v;
    }();
    return k;
}

void BM_HashItem(benchmark::State& state) {
    const std::string item(static_cast<std::size_t>(state.range(0)), 'x');
    for (auto _ : state) {
        benchmark::DoNotOptimize(hash_item(item));
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_HashItem)->Arg(8)->Arg(40)->Arg(256);

void BM_LayerAdd(benchmark::State& state) {
    const auto& k = keys();
    BloomLayer layer(kCapacity, 0.01);
    std::size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(layer.add(hash_item(k[i])));
        if (++i == k.size()) i = 0;
    }
}
BENCHMARK(BM_LayerAdd);

void BM_LayerContains(benchmark::State& state) {
    const auto& k = keys();
    BloomLayer layer(kCapacity, 0.01);
    // Half the keys present: a mix of hits (all k probes) and early misses.
    for (std::size_t i = 0; i < k.size(); i += 2) layer.add(hash_item(k[i]));
    std::size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(layer.contains(hash_item(k[i])));
        if (++i == k.size()) i = 0;
    }
}
BENCHMARK(BM_LayerContains);

void BM_LayerContainsPrehashed(benchmark::State& state) {
    const auto& k = keys();
    BloomLayer layer(kCapacity, 0.01);
    std::vector<ItemHash> hashes;
    hashes.reserve(k.size());
    for (const auto& key : k) hashes.push_back(hash_item(key));
    for (std::size_t i = 0; i < hashes.size(); i += 2) layer.add(hashes[i]);
    std::size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(layer.contains(hashes[i]));
        if (++i == hashes.size()) i = 0;
    }
}
BENCHMARK(BM_LayerContainsPrehashed);

void BM_ScalableAdd(benchmark::State& state) {
    const auto& k = keys();
    FilterOptions options;
    options.capacity = kCapacity;
    options.error_rate = 0.01;
    ScalableFilter filter(options);
    std::size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(filter.add(k[i]));
        if (++i == k.size()) i = 0;
    }
}
BENCHMARK(BM_ScalableAdd);

void BM_ScalableAddConcurrent(benchmark::State& state) {
    const auto& k = keys();
    static ScalableFilter* filter = nullptr;
    if (state.thread_index() == 0) {
        FilterOptions options;
        options.capacity = kCapacity;
        options.error_rate = 0.01;
        filter = new ScalableFilter(options);
    }
    std::size_t i = static_cast<std::size_t>(state.thread_index()) * 7919;
    for (auto _ : state) {
        benchmark::DoNotOptimize(filter->add(k[i % k.size()]));
        i += static_cast<std::size_t>(state.threads());
    }
    if (state.thread_index() == 0) {
        delete filter;
        filter = nullptr;
    }
}
BENCHMARK(BM_ScalableAddConcurrent)->Threads(1)->Threads(2)->UseRealTime();

void BM_ScalableContains(benchmark::State& state) {
    const auto& k = keys();
    FilterOptions options;
    options.capacity = kCapacity;
    options.error_rate = 0.01;
    ScalableFilter filter(options);
    for (std::size_t i = 0; i < k.size(); i += 2) filter.add(k[i]);
    std::size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(filter.contains(k[i]));
        if (++i == k.size()) i = 0;
    }
}
BENCHMARK(BM_ScalableContains);

}  // namespace
