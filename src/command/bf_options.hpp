#pragma once
// How BF.RESERVE and BF.INSERT read their options: as RedisBloom 2.4 reads
// them, its quirks kept (each parser says which), plus bloomery's LAYOUT,
// SCHEME, valkey-bloom's VALIDATESCALETO and TIGHTENING and bloomery's
// bounds (bloom/bounds.hpp). Parsing only: nothing here touches the keyspace
// or writes a reply; a refusal carries the error text the command answers.

#include <optional>

#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/command/arg_cursor.hpp"
#include "bloomery/command/context.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::command {

// The options of a filter whose command names none (BF.ADD, BF.MADD): the
// configured defaults (--bf-error-rate, --bf-initial-size,
// --bf-expansion-factor, --bf-default-layout, --bf-scheme).
bloom::FilterOptions default_filter_options(const core::Config& config);

// BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [LAYOUT l]
// [SCHEME s] [VALIDATESCALETO n] [TIGHTENING r]: the new filter's options, or
// the error to reply. The key is not looked at. SCHEME REDISBLOOM (or
// --bf-scheme redisbloom without SCHEME) gives the filter RedisBloom 2.4
// would create, and refuses LAYOUT and a TIGHTENING other than 0.5.
// VALIDATESCALETO refuses a filter that could not grow to n items (bounds.hpp:
// max_scaled_capacity, at the filter's ratio) and a NONSCALING one.
// TIGHTENING (valkey-bloom's, in (0, 1)) is taken beside NONSCALING and kept.
core::Result<bloom::FilterOptions> parse_reserve(const core::Config& config, Args argv);

// BF.RESERVE's error rate and capacity, `args` at the rate: read and
// checked as RedisBloom reads them (its texts), the bounds not yet.
struct RateAndCapacity {
    double error_rate;
    std::int64_t capacity;
};
core::Result<RateAndCapacity> take_rate_and_capacity(ArgCursor& args);

// What an add does with a key that is missing: creates it (BF.ADD, BF.MADD,
// BF.INSERT) or, with BF.INSERT's NOCREATE, refuses.
enum class IfMissing { create, refuse };

// What BF.INSERT asks for.
struct InsertRequest {
    bloom::FilterOptions options;  // the filter's, if it is created
    IfMissing if_missing = IfMissing::create;
    Args items;  // the arguments after ITEMS (at least one), in argv
    // WINDOW (bf_window.hpp): an expiring filter's, if it is created.
    std::optional<bloom::AgeGeometry> age;
};

// BF.INSERT key [CAPACITY n] [ERROR rate] [EXPANSION n] [NOCREATE]
// [NONSCALING] [LAYOUT l] [SCHEME s] [VALIDATESCALETO n] [TIGHTENING r]
// [WINDOW w [SLICES k l]] ITEMS item...: the request, or the error to reply
// (SCHEME, VALIDATESCALETO and TIGHTENING as BF.RESERVE's; WINDOW takes
// only CAPACITY, ERROR, NOCREATE and SLICES beside it;
// VALIDATESCALETO is checked whether or not the key exists).
core::Result<InsertRequest> parse_insert(const core::Config& config, Args argv);

}  // namespace bloomery::command
