#pragma once
// Helpers shared by the Bloom core tests: item names that never collide
// between the "added" and "never added" sets, and filter options.

#include <cstdint>
#include <string>

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

}  // namespace bloomery::bloom::testing
