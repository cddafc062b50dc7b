#pragma once
// How BF.RESERVE and BF.INSERT read an expiring filter's options
// (bloom/age_filter.hpp): WINDOW ITEMS (a count window: the last `capacity`
// items) or WINDOW <n><unit> (a time window, unit ms, s, m, h or d, with
// `capacity` the items expected per window), and SLICES k l for those who
// choose the shape. Parsing only, as bf_options.hpp.

#include <cstdint>
#include <optional>

#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/command/arg_cursor.hpp"
#include "bloomery/command/context.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::command {

// The largest l SLICES takes: sizing a shape costs O(k·(k + l)) per step of
// its search, on the client's worker.
inline constexpr std::uint32_t kMaxSlicesL = 4096;
// The longest time window: about 34 years.
inline constexpr std::uint64_t kMaxWindowMs = std::uint64_t{1} << 40;

struct WindowRequest {
    std::uint64_t window_ms = 0;           // 0: a count window (WINDOW ITEMS)
    std::optional<bloom::AgeShape> shape;  // SLICES k l; none: the fewest bits
};

// WINDOW's value, `args` just past the word: 0 for ITEMS, else the
// duration in ms.
core::Result<std::uint64_t> take_window(ArgCursor& args);
// SLICES' two values, `args` just past the word.
core::Result<bloom::AgeShape> take_slices(ArgCursor& args);
// The filter a window of `capacity` items at `error_rate` takes, or the
// error to reply.
core::Result<bloom::AgeGeometry> window_geometry(double error_rate, std::uint64_t capacity,
                                                 const WindowRequest& window);

// BF.RESERVE key error_rate capacity WINDOW w [SLICES k l]: nullopt when
// no WINDOW follows the capacity (a plain filter: parse_reserve), else the
// expiring filter's geometry or the error to reply. Only SLICES may stand
// beside WINDOW. The rate and capacity are read as parse_reserve reads them.
core::Result<std::optional<bloom::AgeGeometry>> parse_reserve_window(Args argv);

}  // namespace bloomery::command
