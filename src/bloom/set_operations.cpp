#include "bloomery/bloom/set_operations.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "bloomery/bloom/params.hpp"
#include "bloomery/bloom/redisbloom.hpp"

namespace bloomery::bloom {
namespace {

// Words read from each layer at a time: 32 KiB, so eight filters' buffers
// stay in L2 and a merge never holds another copy of a big layer.
constexpr std::uint64_t kWordsAtOnce = 4096;

// The same item gives the same hash in both: scheme, and for RedisBloom's
// its 64-bit hashing flag.
bool same_hashing(const FilterOptions& a, const FilterOptions& b) {
    return a.scheme == b.scheme && (a.redisbloom_options & kRedisBloomForce64) ==
                                       (b.redisbloom_options & kRedisBloomForce64);
}

// The m of a layer's estimates: its bits, or a counting layer's cells.
std::uint64_t positions(const LayerGeometry& shape) {
    return shape.layout == Layout::counting ? shape.bits / kCellBits : shape.bits;
}

// Words as bits set: a counting layer's words become one bit per non-zero
// cell, so ORs and popcounts count the cells of a union.
void as_set_bits(const LayerGeometry& shape, std::span<std::uint64_t> words) {
    if (shape.layout != Layout::counting) return;
    for (std::uint64_t& word : words) word = cells::nonzero(word);
}

std::uint64_t merged_items(const BloomLayer& merged, std::uint64_t largest_source) {
    const std::uint64_t set = merged.set_bits();
    const std::uint64_t zero = set >= merged.cells() ? 0 : merged.cells() - set;
    const double estimate = estimate_items(merged.cells(), merged.hashes(), zero);
    const double capped = std::min(estimate, static_cast<double>(kMaxLayerItems));
    return std::max(largest_source, static_cast<std::uint64_t>(std::llround(capped)));
}

// Estimates read filters of one layer each, of one shape and one hashing.
SetRefusal check_estimable(std::span<const ScalableFilter* const> filters) {
    if (filters.size() > kMaxEstimateFilters) return SetRefusal::too_many_filters;
    const FilterOptions first = filters.front()->options();
    const LayerGeometry shape = filters.front()->layer(0).geometry();
    for (const ScalableFilter* filter : filters) {
        if (!same_hashing(first, filter->options())) return SetRefusal::schemes_differ;
        if (filter->num_layers() != 1 || !same_shape(shape, filter->layer(0).geometry())) {
            return SetRefusal::shapes_differ;
        }
    }
    return SetRefusal::none;
}

// set[S - 1] = bits set in the OR of the filters in subset S (bit i of S:
// filters[i]), for every non-empty S; one pass over the words.
std::vector<std::uint64_t> subset_set_bits(std::span<const ScalableFilter* const> filters) {
    const std::size_t n = filters.size();
    const std::size_t subsets = (std::size_t{1} << n) - 1;
    std::vector<std::uint64_t> set(subsets, 0);
    std::vector<std::vector<std::uint64_t>> words(n, std::vector<std::uint64_t>(kWordsAtOnce));
    std::array<std::uint64_t, std::size_t{1} << kMaxEstimateFilters> ors{};
    const std::uint64_t num_words = filters.front()->layer(0).num_words();
    for (std::uint64_t first = 0; first < num_words; first += kWordsAtOnce) {
        const std::uint64_t count = std::min(kWordsAtOnce, num_words - first);
        for (std::size_t f = 0; f < n; ++f) {
            filters[f]->layer(0).copy_words(first, count, words[f].data());
            as_set_bits(filters[f]->layer(0).geometry(), std::span(words[f]).first(count));
        }
        for (std::uint64_t w = 0; w < count; ++w) {
            for (std::size_t s = 1; s <= subsets; ++s) {
                // S's OR is that of S without its lowest filter, and that one.
                ors[s] = ors[s & (s - 1)] | words[static_cast<std::size_t>(std::countr_zero(s))][w];
                set[s - 1] += static_cast<std::uint64_t>(std::popcount(ors[s]));
            }
        }
    }
    return set;
}

double union_of(const LayerGeometry& shape, std::uint64_t set) {
    const std::uint64_t m = positions(shape);
    const std::uint64_t zero = set >= m ? 0 : m - set;
    return estimate_items(m, shape.hashes, zero);
}

}  // namespace

bool same_shape(const LayerGeometry& a, const LayerGeometry& b) {
    return a.bits == b.bits && a.hashes == b.hashes && a.layout == b.layout &&
           a.scheme == b.scheme && a.redisbloom_n2 == b.redisbloom_n2;
}

SetRefusal plan_merge(std::span<const ScalableFilter* const> sources, std::size_t base,
                      MergePlan& plan) {
    const ScalableFilter& first = *sources[base];
    plan = MergePlan{};
    plan.options = first.options();
    for (std::size_t i = 0, n = first.num_layers(); i < n; ++i) {
        plan.layers.push_back(first.layer(i).geometry());
        plan.parts.push_back({{base, i}});
    }
    for (std::size_t s = 0; s < sources.size(); ++s) {
        if (s == base) continue;
        if (!same_hashing(plan.options, sources[s]->options())) return SetRefusal::schemes_differ;
        if (sources[s]->counting() != first.counting()) return SetRefusal::kinds_differ;
        for (std::size_t i = 0, n = sources[s]->num_layers(); i < n; ++i) {
            const LayerGeometry geometry = sources[s]->layer(i).geometry();
            if (i < plan.layers.size() && same_shape(plan.layers[i], geometry)) {
                plan.parts[i].push_back({s, i});
                continue;
            }
            if (plan.layers.size() == kMaxLayers) return SetRefusal::too_many_layers;
            plan.layers.push_back(geometry);
            plan.parts.push_back({{s, i}});
        }
    }
    if (plan.options.nonscaling && plan.layers.size() > 1) return SetRefusal::nonscaling_shape;
    return SetRefusal::none;
}

FilterRef build_merge(const MergePlan& plan, std::span<const ScalableFilter* const> sources,
                      std::uint64_t maxmemory) {
    FilterRef merged = ScalableFilter::create(plan.options, plan.layers, maxmemory);
    if (!merged) return merged;
    std::vector<std::uint64_t> words(kWordsAtOnce);
    for (std::size_t i = 0; i < plan.layers.size(); ++i) {
        BloomLayer& to = merged->layer(i);
        std::uint64_t largest = 0;
        std::uint64_t sum = 0;  // a counting layer's: every add of every part
        for (const MergePlan::Part& part : plan.parts[i]) {
            const BloomLayer& from = sources[part.source]->layer(part.layer);
            largest = std::max(largest, from.items());
            sum = std::min(sum + from.items(), kMaxLayerItems);
            for (std::uint64_t first = 0; first < to.num_words(); first += kWordsAtOnce) {
                const std::uint64_t count = std::min(kWordsAtOnce, to.num_words() - first);
                from.copy_words(first, count, words.data());
                to.or_words(first, count, words.data());
            }
        }
        if (to.counting()) {
            to.set_items(sum);
        } else {
            to.set_items(plan.parts[i].size() == 1 ? largest : merged_items(to, largest));
        }
    }
    return merged;
}

double union_estimate(std::span<const ScalableFilter* const> filters, SetRefusal& refusal) {
    refusal = check_estimable(filters);
    if (refusal != SetRefusal::none) return 0;
    std::vector<std::uint64_t> all_words(kWordsAtOnce);
    std::vector<std::uint64_t> words(kWordsAtOnce);
    const LayerGeometry shape = filters.front()->layer(0).geometry();
    std::uint64_t union_set = 0;
    for (std::uint64_t first = 0; first < shape.bits / 64; first += kWordsAtOnce) {
        const std::uint64_t count = std::min(kWordsAtOnce, shape.bits / 64 - first);
        std::fill_n(all_words.begin(), count, 0);
        for (const ScalableFilter* filter : filters) {
            filter->layer(0).copy_words(first, count, words.data());
            as_set_bits(shape, std::span(words).first(count));
            for (std::uint64_t w = 0; w < count; ++w) all_words[w] |= words[w];
        }
        for (std::uint64_t w = 0; w < count; ++w) {
            union_set += static_cast<std::uint64_t>(std::popcount(all_words[w]));
        }
    }
    return union_of(shape, union_set);
}

double intersection_estimate(std::span<const ScalableFilter* const> filters, SetRefusal& refusal) {
    refusal = check_estimable(filters);
    if (refusal != SetRefusal::none) return 0;
    const LayerGeometry shape = filters.front()->layer(0).geometry();
    const std::vector<std::uint64_t> set = subset_set_bits(filters);
    double total = 0;
    for (std::size_t s = 1; s <= set.size(); ++s) {
        const double sign = std::popcount(s) % 2 == 1 ? 1.0 : -1.0;
        total += sign * union_of(shape, set[s - 1]);
    }
    return std::max(total, 0.0);
}

}  // namespace bloomery::bloom
