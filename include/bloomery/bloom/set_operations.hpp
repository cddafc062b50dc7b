#pragma once
// Set operations on Bloom filters: the union of several filters (BF.MERGE),
// and estimates of the size of a union and of an intersection (BF.CARD of
// several keys, BF.INTERCARD).
//
// The math. Two layers of the same shape (bits, hash functions, layout,
// scheme: same_shape()) hold the union of their sets in the OR of their bit
// arrays, exactly: an item of either has all its bits set in the OR. The
// size of a set is estimated from a layer's zero bits (Swamidass and Baldi
// 2007, what BF.CARD uses: (m/k)·ln(m/m0)); the union's from the OR's zero
// bits; an intersection's by inclusion–exclusion over the unions,
// |A ∩ B| = |A| + |B| − |A ∪ B| (and for n sets the alternating sum over
// every non-empty subset). The AND of two filters is not the filter of the
// intersection (it may hold items of neither), so nothing here offers it.
//
// Estimates need filters of one layer each, all of one shape: an item of
// two scalable filters may sit in different layers of each, and would be
// counted twice.
//
// Thread safety: everything reads words with relaxed atomic loads, beside
// concurrent adds; an estimate or a merge sees every add that finished
// before it began. Merging does not change the sources.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::bloom {

// Same bit positions for every item: bits, hashes, layout, scheme and
// RedisBloom's modulus (n2). Capacity and error rate may differ.
bool same_shape(const LayerGeometry& a, const LayerGeometry& b);

// Why filters cannot be merged or counted together.
enum class SetRefusal {
    none,
    schemes_differ,    // hash schemes (or RedisBloom's 64-bit hashing) differ
    nonscaling_shape,  // a NONSCALING filter beside a layer of another shape
    too_many_layers,   // the merged chain would pass kMaxLayers
    shapes_differ,     // estimates: not one layer each of one shape
    too_many_filters,  // estimates: more than kMaxEstimateFilters
    kinds_differ,      // a counting filter beside one that is not
};

// ---- Merge ----
// The merged filter's layers: the base's first, in order; then each other
// source's layer i is ORed into merged layer i when that has its shape, and
// appended as a layer of its own otherwise. Every item of every source then
// answers 1 (its bits are all in one layer that was ORed or copied), and the
// compound false-positive rate stays within the sum of the layers'.
// Counting filters merge only with counting filters: their cells are added
// (saturating at 15) instead of ORed, and a merged layer counts the items
// of all its parts. Estimates count a counting layer's non-zero cells as a
// Bloom filter's set bits.
struct MergePlan {
    FilterOptions options;  // the base's
    std::vector<LayerGeometry> layers;
    // For each merged layer, the (source, layer) pairs ORed into it, the
    // first one the layer it was copied from.
    struct Part {
        std::size_t source;
        std::size_t layer;
    };
    std::vector<std::vector<Part>> parts;
};
// `sources` (at least one) with `base` the index of the filter whose
// options and layers come first. Reads each source's layer count once.
SetRefusal plan_merge(std::span<const ScalableFilter* const> sources, std::size_t base,
                      MergePlan& plan);
// Builds the merged filter of `plan` (reserved against `maxmemory` as
// ScalableFilter::create does: an empty reference if it would pass it).
// A layer that took several parts counts the larger of its sources' item
// counts and the estimate from its merged bits; a copied layer keeps its
// source's count. Throws std::bad_alloc.
FilterRef build_merge(const MergePlan& plan, std::span<const ScalableFilter* const> sources,
                      std::uint64_t maxmemory = 0);

// ---- Estimates ----
inline constexpr std::size_t kMaxEstimateFilters = 8;

// The estimated size of the union of `filters` (1 to kMaxEstimateFilters,
// one layer each, of one shape); `refusal` says why not otherwise (and the
// result is 0).
double union_estimate(std::span<const ScalableFilter* const> filters, SetRefusal& refusal);
// The estimated size of their intersection (2 to kMaxEstimateFilters), by
// inclusion–exclusion over the unions of every non-empty subset, at least 0.
// One pass over the words, 2^n − 1 ORs and popcounts per word.
double intersection_estimate(std::span<const ScalableFilter* const> filters, SetRefusal& refusal);

}  // namespace bloomery::bloom
