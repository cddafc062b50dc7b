#pragma once
// Helpers shared by the Bloom core tests: item names that never collide
// between the "added" and "never added" sets, and filter options.

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "bloomery/bloom/params.hpp"
#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::bloom::testing {

inline std::string present_item(std::uint64_t i) {
    return "present:" + std::to_string(i);
}
inline std::string absent_item(std::uint64_t i) {
    return "absent:" + std::to_string(i);
}

inline FilterOptions make_options(std::uint64_t capacity, double error_rate,
                                  std::uint32_t expansion = 2, bool nonscaling = false) {
    FilterOptions options;
    options.capacity = capacity;
    options.error_rate = error_rate;
    options.expansion = expansion;
    options.nonscaling = nonscaling;
    return options;
}

// A standalone layer sized from the math in params.hpp, or with explicit geometry.
inline LayerPtr sized_layer(std::uint64_t capacity, double error_rate) {
    return make_layer(LayerGeometry{capacity, error_rate, optimal_bits(capacity, error_rate),
                                    optimal_hashes(error_rate)});
}
inline LayerPtr explicit_layer(std::uint64_t capacity, double error_rate, std::uint64_t bits,
                               std::uint32_t hashes) {
    return make_layer(LayerGeometry{capacity, error_rate, bits, hashes});
}

// Adds with no growth limits (the tests that need limits pass their own).
inline AddResult add(ScalableFilter& filter, std::string_view item) {
    return filter.add(item, GrowthLimits{});
}

// A copy of a layer's words, and the number of bits set in them.
inline std::vector<std::uint64_t> layer_words(const BloomLayer& layer) {
    std::vector<std::uint64_t> words(layer.num_words());
    layer.copy_words(0, words.size(), words.data());
    return words;
}
inline std::uint64_t popcount_words(const BloomLayer& layer) {
    std::uint64_t total = 0;
    for (std::uint64_t w : layer_words(layer))
        total += static_cast<std::uint64_t>(std::popcount(w));
    return total;
}

}  // namespace bloomery::bloom::testing
