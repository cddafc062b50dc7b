#include "bf_window.hpp"

#include <charconv>
#include <string_view>

#include "bf_options.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/core/ascii.hpp"
#include "common.hpp"

namespace bloomery::command {
namespace {

// Milliseconds per unit of a window's duration; 0 for an unknown unit.
std::uint64_t unit_ms(std::string_view unit) {
    constexpr struct {
        std::string_view name;
        std::uint64_t ms;
    } kUnits[] = {{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};
    for (const auto& known : kUnits) {
        if (core::iequals(unit, known.name)) return known.ms;
    }
    return 0;
}

}  // namespace

core::Result<std::uint64_t> take_window(ArgCursor& args) {
    if (!args.has_next()) return refuse(errors::kBadWindow);
    const std::string_view text = args.next();
    if (core::iequals(text, "ITEMS")) return std::uint64_t{0};
    std::uint64_t count = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
    if (error != std::errc() || end == text.data()) return refuse(errors::kBadWindow);
    const std::uint64_t per_unit =
        unit_ms(text.substr(static_cast<std::size_t>(end - text.data())));
    if (per_unit == 0 || count == 0 || count > kMaxWindowMs / per_unit) {
        return refuse(errors::kBadWindow);
    }
    return count * per_unit;
}

core::Result<bloom::AgeShape> take_slices(ArgCursor& args) {
    const std::optional<std::int64_t> k = args.next_int();
    const std::optional<std::int64_t> l = k ? args.next_int() : std::nullopt;
    if (!k || !l || *k < 1 || *k > bloom::kMaxAgeK || *l < 1 || *l > kMaxSlicesL) {
        return refuse(errors::kBadSlices);
    }
    return bloom::AgeShape{static_cast<std::uint32_t>(*k), static_cast<std::uint32_t>(*l)};
}

core::Result<bloom::AgeGeometry> window_geometry(double error_rate, std::uint64_t capacity,
                                                 const WindowRequest& window) {
    if (window.window_ms != 0) {
        const std::uint32_t l =
            window.shape ? window.shape->l
                         : bloom::choose_age_shape(error_rate).value_or(bloom::AgeShape{}).l;
        if (l != 0 && window.window_ms < l) return refuse(errors::kWindowTooShort);
    }
    const std::optional<bloom::AgeGeometry> geometry =
        bloom::age_geometry(error_rate, capacity, window.window_ms, window.shape);
    if (geometry) return *geometry;
    // What age_geometry refused: a rate no shape reaches, or a filter
    // beyond the bounds (check_age_geometry).
    const std::optional<bloom::AgeShape> shape =
        window.shape ? window.shape : bloom::choose_age_shape(error_rate);
    if (!shape || bloom::age_slice_scale(*shape, error_rate) == 0.0) {
        return refuse(errors::kWindowUnreachable);
    }
    return refuse(errors::kFilterTooLarge);
}

core::Result<std::optional<bloom::AgeGeometry>> parse_reserve_window(Args argv) {
    const ArgCursor after_capacity(argv, 4);
    if (!after_capacity.find("WINDOW")) return std::optional<bloom::AgeGeometry>{};
    ArgCursor args(argv, 2);
    const core::Result<RateAndCapacity> numbers = take_rate_and_capacity(args);
    if (!numbers) return numbers.failure();
    WindowRequest window;
    bool window_given = false;
    while (args.has_next()) {
        if (args.eat("WINDOW")) {
            if (window_given) return refuse(errors::kWindowOptions);
            const core::Result<std::uint64_t> ms = take_window(args);
            if (!ms) return ms.failure();
            window.window_ms = *ms;
            window_given = true;
        } else if (args.eat("SLICES")) {
            if (window.shape) return refuse(errors::kWindowOptions);
            const core::Result<bloom::AgeShape> shape = take_slices(args);
            if (!shape) return shape.failure();
            window.shape = *shape;
        } else {
            return refuse(errors::kWindowOptions);
        }
    }
    const core::Result<bloom::AgeGeometry> geometry =
        window_geometry(numbers->error_rate, static_cast<std::uint64_t>(numbers->capacity), window);
    if (!geometry) return geometry.failure();
    return std::optional<bloom::AgeGeometry>(*geometry);
}

}  // namespace bloomery::command
