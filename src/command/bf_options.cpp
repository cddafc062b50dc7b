#include "bf_options.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "bf_window.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/command/arg_cursor.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/core/ascii.hpp"
#include "common.hpp"

namespace bloomery::command {
namespace {

// bloomery's bounds beyond RedisBloom's (bloom/bounds.hpp), for values that
// passed RedisBloom's own checks.
core::Status rate_and_capacity_bounds(double error_rate, std::int64_t capacity) {
    if (bloom::check_error_rate(error_rate) == bloom::BoundsError::error_rate_too_small) {
        return refuse(errors::kErrorRateTooSmall);
    }
    if (static_cast<std::uint64_t>(capacity) > bloom::kMaxLayerCapacity) {
        return refuse(errors::kCapacityTooLarge);
    }
    return {};
}

core::Status expansion_bound(std::int64_t expansion) {
    if (expansion > bloom::kMaxExpansion) return refuse(errors::kExpansionTooLarge);
    return {};
}

// LAYOUT's value: AUTO, BLOCKED or CLASSIC (any case). AUTO is the rule
// with multi-line blocks (bounds.hpp: automatic_blocks).
core::Result<bloom::Layout> take_layout(ArgCursor& args) {
    constexpr bloom::Layout kLayouts[] = {bloom::Layout::automatic_blocks, bloom::Layout::blocked,
                                          bloom::Layout::classic};
    if (const auto chosen = args.eat_one_of({"AUTO", "BLOCKED", "CLASSIC"})) {
        return kLayouts[*chosen];
    }
    return refuse(errors::kBadLayout);
}

// SCHEME's value: BLOOMERY or REDISBLOOM (any case).
core::Result<bloom::HashScheme> take_scheme(ArgCursor& args) {
    constexpr bloom::HashScheme kSchemes[] = {bloom::HashScheme::bloomery,
                                              bloom::HashScheme::redisbloom};
    if (const auto chosen = args.eat_one_of({"BLOOMERY", "REDISBLOOM"})) {
        return kSchemes[*chosen];
    }
    return refuse(errors::kBadScheme);
}

// VALIDATESCALETO's value: a positive whole number of items.
core::Result<std::uint64_t> take_scale_to(ArgCursor& args) {
    const core::Result<std::int64_t> items = args.take_int(errors::kCapacityNotNumber);
    if (!items) return items.failure();
    if (*items < 1) return refuse(errors::kCapacityNotNumber);
    return static_cast<std::uint64_t>(*items);
}

// TIGHTENING's value: a ratio in (0, 1), valkey-bloom's range.
core::Result<double> take_tightening(ArgCursor& args) {
    const core::Result<double> ratio = args.take_double(errors::kBadTightening);
    if (!ratio) return ratio.failure();
    if (!(*ratio > 0 && *ratio < 1)) return refuse(errors::kTighteningRange);
    return *ratio;
}

// Whether the filter `options` describe could grow to hold `items` within
// the bounds and --max-filter-bytes (bounds.hpp: max_scaled_capacity, as
// BF.INFO MAXSCALEDCAPACITY counts); valkey-bloom's VALIDATESCALETO. A first
// layer that does not fit at all is left to the creation, which refuses it.
core::Status check_scale_to(const core::Config& config, const bloom::FilterOptions& options,
                            std::uint64_t items) {
    if (options.nonscaling) return refuse(errors::kValidateScaleToNonScaling);
    const bloom::LayerGeometry first = bloom::first_layer(options);
    if (bloom::check_layer(first, 0) != bloom::BoundsError::none) return {};
    const std::uint64_t max_bytes = config.max_filter_bytes;
    if (max_bytes != 0 && bloom::filter_bytes(std::span(&first, 1)) > max_bytes) return {};
    const bloom::ScaleReach reach =
        bloom::max_scaled_capacity(options, std::span(&first, 1), max_bytes);
    if (reach.capacity >= items) return {};
    return refuse(reach.stop == bloom::GrowthStop::filter_bytes
                      ? errors::kValidateScaleToTooLarge
                      : errors::kValidateScaleToUnreachable);
}

// BF.RESERVE's EXPANSION value, `args` just past the word.
core::Result<std::uint32_t> take_reserve_expansion(ArgCursor& args,
                                                   const bloom::FilterOptions& options) {
    if (!args.has_next()) return refuse(errors::kNoExpansion);
    if (options.nonscaling) return refuse(errors::kNonScalingExpansion);
    const core::Result<std::int64_t> expansion = args.take_int(errors::kExpansionNotNumber);
    if (!expansion) return expansion.failure();
    if (*expansion < bloom::kMinExpansion) return refuse(errors::kBadExpansion);
    if (core::Status bound = expansion_bound(*expansion); !bound) return bound.failure();
    return static_cast<std::uint32_t>(*expansion);
}

// BF.INSERT's numbers as given, checked together once ITEMS is found.
struct InsertNumbers {
    double error_rate;
    std::int64_t capacity;
    std::int64_t expansion;
};

// One BF.INSERT option other than LAYOUT and ITEMS, `word` just taken from
// `args`: known by its first letter (c: CAPACITY; e: ERROR if its second
// letter is r, else EXPANSION; n: NOCREATE if its third letter is c, else
// NONSCALING), as RedisBloom 2.4 knows it. A value a word lacks is a wrong
// number of arguments.
core::Status read_insert_option(std::string_view word, ArgCursor& args, InsertRequest& request,
                                InsertNumbers& numbers) {
    auto letter = [&](std::size_t i) {
        return i < word.size() ? core::ascii_lower(word[i]) : '\0';
    };
    switch (letter(0)) {
        case 'e': {
            if (!args.has_next()) return wrong_arity("bf.insert");
            if (letter(1) == 'r') {
                const core::Result<double> rate = args.take_double(errors::kInsertBadErrorRate);
                if (!rate) return rate.failure();
                numbers.error_rate = *rate;
                return {};
            }
            const core::Result<std::int64_t> expansion = args.take_int(errors::kInsertBadExpansion);
            if (!expansion) return expansion.failure();
            numbers.expansion = *expansion;
            return {};
        }
        case 'c': {
            if (!args.has_next()) return wrong_arity("bf.insert");
            const core::Result<std::int64_t> capacity = args.take_int(errors::kInsertBadCapacity);
            if (!capacity) return capacity.failure();
            numbers.capacity = *capacity;
            return {};
        }
        case 'n':
            if (letter(2) == 'c') {
                request.if_missing = IfMissing::refuse;
            } else {
                request.options.nonscaling = true;
            }
            return {};
        default:
            return refuse(errors::kInsertUnknownOption);
    }
}

// What a creating command asked for beyond RedisBloom's options.
struct CreationExtras {
    std::optional<bloom::HashScheme> scheme;  // SCHEME; none: --bf-scheme
    bool layout_given = false;                // LAYOUT
    bool counting = false;                    // COUNTING
    std::uint64_t scale_to = 0;               // VALIDATESCALETO; 0: none
    WindowRequest window;                     // BF.INSERT's WINDOW and SLICES
    bool window_given = false;
    bool slices_given = false;
};

// The configured defaults of every field but the scheme's.
bloom::FilterOptions configured_options(const core::Config& config) {
    bloom::FilterOptions options;
    options.error_rate = config.default_error_rate;
    options.capacity = config.default_capacity;
    options.expansion = config.default_expansion;
    switch (config.default_layout) {
        case core::DefaultLayout::automatic:
            options.layout = bloom::Layout::automatic_blocks;
            break;
        case core::DefaultLayout::blocked:
            options.layout = bloom::Layout::blocked;
            break;
        case core::DefaultLayout::classic:
            options.layout = bloom::Layout::classic;
            break;
    }
    return options;
}

// The options' scheme fields, once every other option is read: the scheme
// asked for, else --bf-scheme. A RedisBloom-scheme filter is what RedisBloom
// 2.4 creates for the same arguments: classic layers sized by its rule
// (bounds.hpp: first_layer, next_layer) and the option word it gives a new
// chain; it takes no LAYOUT.
core::Status settle_scheme(const core::Config& config, const CreationExtras& extras,
                           bloom::FilterOptions& options) {
    // A counting filter has no RedisBloom form: --bf-scheme does not apply.
    const bool configured =
        config.default_scheme == core::DefaultScheme::redisbloom && !extras.counting;
    options.scheme = extras.scheme.value_or(configured ? bloom::HashScheme::redisbloom
                                                       : bloom::HashScheme::bloomery);
    options.redisbloom_options = 0;
    if (extras.counting) {
        if (extras.layout_given) return refuse(errors::kCountingLayout);
        if (options.scheme == bloom::HashScheme::redisbloom) return refuse(errors::kCountingScheme);
        if (options.error_rate < bloom::kMinCountingErrorRate) {
            return refuse(errors::kCountingErrorRate);
        }
        options.layout = bloom::Layout::counting;
    }
    if (options.scheme != bloom::HashScheme::redisbloom) return {};
    if (extras.layout_given) return refuse(errors::kSchemeLayout);
    if (options.tightening != bloom::kDefaultTightening) return refuse(errors::kSchemeTightening);
    options.layout = bloom::Layout::classic;
    options.redisbloom_options =
        bloom::kRedisBloomDefaultOptions | (options.nonscaling ? bloom::kRedisBloomNoScaling : 0);
    return {};
}

// settle_scheme, then VALIDATESCALETO when given; `options` passed the
// bounds (check_options).
core::Status settle(const core::Config& config, const CreationExtras& extras,
                    bloom::FilterOptions& options) {
    if (core::Status scheme = settle_scheme(config, extras, options); !scheme) return scheme;
    if (extras.scale_to == 0) return {};
    return check_scale_to(config, options, extras.scale_to);
}

// bloomery's options of BF.RESERVE, found after the capacity as RedisBloom
// finds its own there.
constexpr std::string_view kReserveExtras[] = {"LAYOUT", "SCHEME", "VALIDATESCALETO", "TIGHTENING"};

// The arguments bloomery's options take (word and value, or COUNTING's
// word), which do not count toward RedisBloom's 7.
std::size_t reserve_extra_args(const ArgCursor& after_capacity) {
    std::size_t taken = after_capacity.find("COUNTING") ? 1 : 0;
    for (const std::string_view word : kReserveExtras) {
        const std::optional<ArgCursor> at = after_capacity.find(word);
        if (at && at->has_next()) taken += 2;
    }
    return taken;
}

// Reads LAYOUT, SCHEME, VALIDATESCALETO, TIGHTENING and COUNTING where BF.RESERVE has
// them.
core::Status read_reserve_extras(const ArgCursor& after_capacity, bloom::FilterOptions& options,
                                 CreationExtras& extras) {
    extras.counting = after_capacity.find("COUNTING").has_value();
    if (std::optional<ArgCursor> at = after_capacity.find(kReserveExtras[0])) {
        const core::Result<bloom::Layout> chosen = take_layout(*at);
        if (!chosen) return chosen.failure();
        options.layout = *chosen;
        extras.layout_given = true;
    }
    if (std::optional<ArgCursor> at = after_capacity.find(kReserveExtras[1])) {
        const core::Result<bloom::HashScheme> chosen = take_scheme(*at);
        if (!chosen) return chosen.failure();
        extras.scheme = *chosen;
    }
    if (std::optional<ArgCursor> at = after_capacity.find(kReserveExtras[2])) {
        const core::Result<std::uint64_t> items = take_scale_to(*at);
        if (!items) return items.failure();
        extras.scale_to = *items;
    }
    if (std::optional<ArgCursor> at = after_capacity.find(kReserveExtras[3])) {
        const core::Result<double> ratio = take_tightening(*at);
        if (!ratio) return ratio.failure();
        options.tightening = *ratio;
    }
    return {};
}

// One of bloomery's BF.INSERT options (LAYOUT, SCHEME, VALIDATESCALETO,
// TIGHTENING, COUNTING: the whole word) if `args` is at one: read into `request` and
// `extras`, true.
core::Result<bool> read_insert_extra(ArgCursor& args, InsertRequest& request,
                                     CreationExtras& extras) {
    if (args.eat("WINDOW")) {
        const core::Result<std::uint64_t> ms = take_window(args);
        if (!ms) return ms.failure();
        extras.window.window_ms = *ms;
        extras.window_given = true;
        return true;
    }
    if (args.eat("SLICES")) {
        const core::Result<bloom::AgeShape> shape = take_slices(args);
        if (!shape) return shape.failure();
        extras.window.shape = *shape;
        extras.slices_given = true;
        return true;
    }
    if (args.eat("COUNTING")) {
        extras.counting = true;
        return true;
    }
    const bool layout = args.eat("LAYOUT");
    const bool scheme = !layout && args.eat("SCHEME");
    const bool scale_to = !layout && !scheme && args.eat("VALIDATESCALETO");
    const bool tightening = !layout && !scheme && !scale_to && args.eat("TIGHTENING");
    if (!layout && !scheme && !scale_to && !tightening) return false;
    if (!args.has_next()) return wrong_arity("bf.insert");
    if (tightening) {
        const core::Result<double> ratio = take_tightening(args);
        if (!ratio) return ratio.failure();
        request.options.tightening = *ratio;
    } else if (layout) {
        const core::Result<bloom::Layout> chosen = take_layout(args);
        if (!chosen) return chosen.failure();
        request.options.layout = *chosen;
        extras.layout_given = true;
    } else if (scheme) {
        const core::Result<bloom::HashScheme> chosen = take_scheme(args);
        if (!chosen) return chosen.failure();
        extras.scheme = *chosen;
    } else {
        const core::Result<std::uint64_t> items = take_scale_to(args);
        if (!items) return items.failure();
        extras.scale_to = *items;
    }
    return true;
}

// BF.INSERT's WINDOW: the expiring filter's geometry in `request`, once
// the numbers passed their checks; refused beside options only plain
// filters have, and SLICES without WINDOW.
core::Status settle_window(const core::Config& config, const CreationExtras& extras,
                           const InsertNumbers& numbers, InsertRequest& request) {
    if (!extras.window_given) return refuse(errors::kSlicesWithoutWindow);
    const bloom::FilterOptions& options = request.options;
    if (extras.scheme || extras.layout_given || extras.counting || extras.scale_to != 0 ||
        options.nonscaling || options.tightening != bloom::kDefaultTightening ||
        numbers.expansion != static_cast<std::int64_t>(config.default_expansion)) {
        return refuse(errors::kWindowOptions);
    }
    const core::Result<bloom::AgeGeometry> geometry = window_geometry(
        numbers.error_rate, static_cast<std::uint64_t>(numbers.capacity), extras.window);
    if (!geometry) return geometry.failure();
    request.age = *geometry;
    return {};
}

}  // namespace

core::Result<RateAndCapacity> take_rate_and_capacity(ArgCursor& args) {
    const core::Result<double> error_rate = args.take_double(errors::kErrorRateNotNumber);
    if (!error_rate) return error_rate.failure();
    if (!(*error_rate > 0 && *error_rate < 1)) return refuse(errors::kBadErrorRate);
    const core::Result<std::int64_t> capacity = args.take_int(errors::kCapacityNotNumber);
    if (!capacity) return capacity.failure();
    if (*capacity <= 0) return refuse(errors::kBadCapacity);
    return RateAndCapacity{*error_rate, *capacity};
}

bloom::FilterOptions default_filter_options(const core::Config& config) {
    bloom::FilterOptions options = configured_options(config);
    // Without LAYOUT or VALIDATESCALETO there is nothing to refuse.
    (void)settle_scheme(config, CreationExtras{}, options);
    return options;
}

// Read as RedisBloom 2.4 reads BF.RESERVE: at most 7 arguments, the rate and
// capacity checked first, NONSCALING and EXPANSION found wherever they are
// after the capacity (other words are ignored), and the key looked at last
// (by the command). bloomery adds LAYOUT AUTO|CLASSIC|BLOCKED, SCHEME
// BLOOMERY|REDISBLOOM, VALIDATESCALETO n, TIGHTENING r and COUNTING, whose words do not
// count toward the 7. Unlike RedisBloom, options are looked for after the capacity only
// (it also finds them in the key and the numbers) and an expansion must be 1
// to 32768.
core::Result<bloom::FilterOptions> parse_reserve(const core::Config& config, Args argv) {
    const ArgCursor after_capacity(argv, 4);
    if (argv.size() - reserve_extra_args(after_capacity) > 7) return wrong_arity("bf.reserve");
    ArgCursor args(argv, 2);
    const core::Result<RateAndCapacity> numbers = take_rate_and_capacity(args);
    if (!numbers) return numbers.failure();

    bloom::FilterOptions options = configured_options(config);
    options.nonscaling = after_capacity.find("NONSCALING").has_value();
    if (std::optional<ArgCursor> expansion = after_capacity.find("EXPANSION")) {
        const core::Result<std::uint32_t> value = take_reserve_expansion(*expansion, options);
        if (!value) return value.failure();
        options.expansion = *value;
    }
    CreationExtras extras;
    if (core::Status read = read_reserve_extras(after_capacity, options, extras); !read) {
        return read.failure();
    }
    if (core::Status bounds = rate_and_capacity_bounds(numbers->error_rate, numbers->capacity);
        !bounds) {
        return bounds.failure();
    }
    options.error_rate = numbers->error_rate;
    options.capacity = static_cast<std::uint64_t>(numbers->capacity);
    if (core::Status settled = settle(config, extras, options); !settled) {
        return settled.failure();
    }
    return options;
}

// Read as RedisBloom 2.4 reads BF.INSERT: options known by their first
// letter (read_insert_option), the values checked together once ITEMS is
// found, and an EXPANSION beside NONSCALING taken. bloomery adds LAYOUT
// AUTO|CLASSIC|BLOCKED, SCHEME BLOOMERY|REDISBLOOM, VALIDATESCALETO n and
// TIGHTENING r and COUNTING (whole words).
core::Result<InsertRequest> parse_insert(const core::Config& config, Args argv) {
    InsertRequest request{configured_options(config), IfMissing::create, {}, std::nullopt};
    InsertNumbers numbers{request.options.error_rate,
                          static_cast<std::int64_t>(request.options.capacity),
                          request.options.expansion};
    CreationExtras extras;
    ArgCursor args(argv, 2);
    bool items_found = false;
    while (args.has_next() && !items_found) {
        const core::Result<bool> extra = read_insert_extra(args, request, extras);
        if (!extra) return extra.failure();
        if (*extra) continue;
        const std::string_view word = args.next();
        if (!word.empty() && core::ascii_lower(word[0]) == 'i') {
            items_found = true;
        } else if (core::Status read = read_insert_option(word, args, request, numbers); !read) {
            return read.failure();
        }
    }
    if (!items_found || !args.has_next()) return wrong_arity("bf.insert");
    if (!(numbers.error_rate > 0 && numbers.error_rate < 1) || numbers.capacity < 1 ||
        numbers.expansion < 1) {
        return refuse(errors::kInsertBadArgument);
    }
    if (core::Status bounds = rate_and_capacity_bounds(numbers.error_rate, numbers.capacity);
        !bounds) {
        return bounds.failure();
    }
    if (core::Status bound = expansion_bound(numbers.expansion); !bound) return bound.failure();
    if (extras.window_given || extras.slices_given) {
        if (core::Status window = settle_window(config, extras, numbers, request); !window) {
            return window.failure();
        }
        request.items = args.rest();
        return request;
    }
    request.options.error_rate = numbers.error_rate;
    request.options.capacity = static_cast<std::uint64_t>(numbers.capacity);
    request.options.expansion = static_cast<std::uint32_t>(numbers.expansion);
    if (core::Status settled = settle(config, extras, request.options); !settled) {
        return settled.failure();
    }
    request.items = args.rest();
    return request;
}

}  // namespace bloomery::command
