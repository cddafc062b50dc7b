#pragma once
// What the keyspace's unit tests share: a filter to store and growth with no
// limits.

#include <cstdint>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::store::keyspace_testing {

inline FilterRef make_filter(std::uint64_t capacity = 1000) {
    bloom::FilterOptions options;
    options.capacity = capacity;
    return bloom::ScalableFilter::create(options);
}

inline constexpr bloom::GrowthLimits kNoLimits{};

}  // namespace bloomery::store::keyspace_testing
