#pragma once
// BF.INFO of an expiring filter (bf_age_info.cpp).

#include <optional>
#include <string_view>

#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/resp/writer.hpp"

namespace bloomery::command {

// BF.INFO key [field] for `filter`: every RedisBloom field (no `field`) or
// the one asked for; false, nothing written, for a field it does not have.
bool reply_age_info(resp::Writer& out, const bloom::AgeFilter& filter,
                    std::optional<std::string_view> field);

}  // namespace bloomery::command
