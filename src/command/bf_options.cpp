#include "bf_options.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

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

// LAYOUT's value: AUTO, BLOCKED or CLASSIC (any case).
core::Result<bloom::Layout> take_layout(ArgCursor& args) {
    constexpr bloom::Layout kLayouts[] = {bloom::Layout::automatic, bloom::Layout::blocked,
                                          bloom::Layout::classic};
    if (const auto chosen = args.eat_one_of({"AUTO", "BLOCKED", "CLASSIC"})) {
        return kLayouts[*chosen];
    }
    return refuse(errors::kBadLayout);
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

}  // namespace

bloom::FilterOptions default_filter_options(const core::Config& config) {
    bloom::FilterOptions options;
    options.error_rate = config.default_error_rate;
    options.capacity = config.default_capacity;
    options.expansion = config.default_expansion;
    switch (config.default_layout) {
        case core::DefaultLayout::automatic:
            options.layout = bloom::Layout::automatic;
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

// Read as RedisBloom 2.4 reads BF.RESERVE: at most 7 arguments, the rate and
// capacity checked first, NONSCALING and EXPANSION found wherever they are
// after the capacity (other words are ignored), and the key looked at last
// (by the command). bloomery adds LAYOUT AUTO|CLASSIC|BLOCKED, whose two words
// do not count toward the 7. Unlike RedisBloom, options are looked for after
// the capacity only (it also finds them in the key and the numbers) and an
// expansion must be 1 to 32768.
core::Result<bloom::FilterOptions> parse_reserve(const core::Config& config, Args argv) {
    const ArgCursor after_capacity(argv, 4);
    std::optional<ArgCursor> layout = after_capacity.find("LAYOUT");
    const std::size_t counted = argv.size() - (layout && layout->has_next() ? 2 : 0);
    if (counted > 7) return wrong_arity("bf.reserve");
    ArgCursor args(argv, 2);
    const core::Result<double> error_rate = args.take_double(errors::kErrorRateNotNumber);
    if (!error_rate) return error_rate.failure();
    if (!(*error_rate > 0 && *error_rate < 1)) return refuse(errors::kBadErrorRate);
    const core::Result<std::int64_t> capacity = args.take_int(errors::kCapacityNotNumber);
    if (!capacity) return capacity.failure();
    if (*capacity <= 0) return refuse(errors::kBadCapacity);

    bloom::FilterOptions options = default_filter_options(config);
    options.nonscaling = after_capacity.find("NONSCALING").has_value();
    if (std::optional<ArgCursor> expansion = after_capacity.find("EXPANSION")) {
        const core::Result<std::uint32_t> value = take_reserve_expansion(*expansion, options);
        if (!value) return value.failure();
        options.expansion = *value;
    }
    if (layout) {
        const core::Result<bloom::Layout> chosen = take_layout(*layout);
        if (!chosen) return chosen.failure();
        options.layout = *chosen;
    }
    if (core::Status bounds = rate_and_capacity_bounds(*error_rate, *capacity); !bounds) {
        return bounds.failure();
    }
    options.error_rate = *error_rate;
    options.capacity = static_cast<std::uint64_t>(*capacity);
    return options;
}

// Read as RedisBloom 2.4 reads BF.INSERT: options known by their first
// letter (read_insert_option), the values checked together once ITEMS is
// found, and an EXPANSION beside NONSCALING taken. bloomery adds LAYOUT
// AUTO|CLASSIC|BLOCKED (the whole word).
core::Result<InsertRequest> parse_insert(const core::Config& config, Args argv) {
    InsertRequest request{default_filter_options(config), IfMissing::create, {}};
    InsertNumbers numbers{request.options.error_rate,
                          static_cast<std::int64_t>(request.options.capacity),
                          request.options.expansion};
    ArgCursor args(argv, 2);
    bool items_found = false;
    while (args.has_next() && !items_found) {
        if (args.eat("LAYOUT")) {
            if (!args.has_next()) return wrong_arity("bf.insert");
            const core::Result<bloom::Layout> chosen = take_layout(args);
            if (!chosen) return chosen.failure();
            request.options.layout = *chosen;
            continue;
        }
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
    request.options.error_rate = numbers.error_rate;
    request.options.capacity = static_cast<std::uint64_t>(numbers.capacity);
    request.options.expansion = static_cast<std::uint32_t>(numbers.expansion);
    request.items = args.rest();
    return request;
}

}  // namespace bloomery::command
