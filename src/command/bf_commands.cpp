// BF.* commands, with RedisBloom's semantics and reply shapes. Parsing and
// replying live here; the filter math lives in bloom/, the map in store/.

#include <functional>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/memory.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

using bloom::AddResult;
using bloom::FilterOptions;
using bloom::FilterRef;
using bloom::ScalableFilter;

FilterOptions default_options(const Context& ctx) {
    FilterOptions options;
    options.error_rate = ctx.config.default_error_rate;
    options.capacity = ctx.config.default_capacity;
    options.expansion = ctx.config.default_expansion;
    options.layout =
        ctx.config.default_layout == "classic" ? bloom::Layout::classic : bloom::Layout::blocked;
    return options;
}

bloom::GrowthLimits growth_limits(const Context& ctx) {
    return bloom::GrowthLimits{ctx.config.max_filter_bytes, ctx.config.maxmemory};
}

// Checks a new filter of these layers against --max-filter-bytes (all layers)
// and --maxmemory before anything is allocated; on refusal sets `error`.
bool within_limits(const Context& ctx, std::span<const bloom::LayerGeometry> layers,
                   std::string_view& error) {
    const std::uint64_t max_bytes = ctx.config.max_filter_bytes;
    if (max_bytes != 0 && bloom::filter_bytes(layers) > max_bytes) {
        error = errors::kFilterTooLarge;
        return false;
    }
    if (core::memory_would_exceed(ctx.config.maxmemory, ScalableFilter::allocation_bytes(layers))) {
        error = errors::kOom;
        return false;
    }
    return true;
}

// Allocates a filter within the bounds and the configured limits; on refusal
// sets `error`. `options` passed check_options() (the parsers check each
// field; the defaults are checked at start). The bytes are reserved against
// --maxmemory before they are allocated, so concurrent creators never
// together pass it.
FilterRef make_filter(const Context& ctx, const FilterOptions& options, std::string_view& error) {
    const bloom::LayerGeometry first = bloom::first_layer(options);
    if (bloom::check_layer(first, 0) != bloom::BoundsError::none) {
        error = errors::kFilterTooLarge;  // more bits than any layer may have
        return {};
    }
    if (!within_limits(ctx, std::span(&first, 1), error)) return {};
    try {
        FilterRef filter = ScalableFilter::create(options, ctx.config.maxmemory);
        if (!filter) error = errors::kOom;
        return filter;
    } catch (const std::bad_alloc&) {
        error = errors::kOutOfMemory;
        return {};
    }
}

std::string_view add_error(AddResult result) {
    switch (result) {
        case AddResult::full:
            return errors::kNonScalingFull;
        case AddResult::too_many_layers:
            return errors::kMaxLayers;
        case AddResult::too_large:
            return errors::kFilterTooLarge;
        case AddResult::out_of_memory:
            return errors::kOom;
        default:
            return {};
    }
}

void note_change(Context& ctx, std::uint64_t n = 1) {
    if (n) WorkerStats::bump(ctx.stats.changes, n);
}

// Adds `items` to the filter at `key`, creating it with `options` unless
// `create` is false. Replies one integer (single) or an array that stops at
// the first failing item, as RedisBloom does.
// `options` is null for BF.ADD / BF.MADD: the configured defaults, worked
// out only when the key has to be created, not on every add.
void add_items(Context& ctx, std::string_view key, Args items, const FilterOptions* options,
               bool create, bool multi) {
    std::string_view create_error;
    // Results are gathered first because the array length is only known once
    // a full NONSCALING filter stops the loop.
    thread_local std::vector<AddResult> results;
    // One pointer captured, so the std::function keeps it inline (no
    // allocation per BF.ADD).
    struct Creation {
        const Context& ctx;
        const FilterOptions* options;
        std::string_view& error;
    } creation{ctx, options, create_error};
    const std::function<FilterRef()> make = [c = &creation] {
        return make_filter(c->ctx, c->options ? *c->options : default_options(c->ctx), c->error);
    };
    const bool found =
        ctx.keyspace.add_items(key, items, growth_limits(ctx), create ? &make : nullptr, results);
    if (!found && create_error.empty()) create_error = errors::kNotFound;
    if (!found) {
        ctx.out.error(create_error);
        return;
    }
    std::uint64_t added = 0;
    for (AddResult result : results) added += result == AddResult::added ? 1 : 0;
    note_change(ctx, added);
    if (multi) ctx.out.array(results.size());
    for (AddResult result : results) {
        if (result == AddResult::added || result == AddResult::exists) {
            ctx.out.integer(result == AddResult::added ? 1 : 0);
        } else {
            ctx.out.error(add_error(result));
        }
    }
}

void cmd_add(Context& ctx, Args argv) {
    add_items(ctx, argv[1], argv.subspan(2), nullptr, true, false);
}

void cmd_madd(Context& ctx, Args argv) {
    add_items(ctx, argv[1], argv.subspan(2), nullptr, true, true);
}

// Validation shared by RESERVE and INSERT, RedisBloom's texts.
bool parse_error_rate(Context& ctx, std::string_view text, double& out) {
    if (!parse_double(text, out)) {
        ctx.out.error(errors::kErrorRateNotNumber);
        return false;
    }
    switch (bloom::check_error_rate(out)) {
        case bloom::BoundsError::none:
            return true;
        case bloom::BoundsError::error_rate_too_small:
            ctx.out.error(errors::kErrorRateTooSmall);
            return false;
        default:
            ctx.out.error(errors::kBadErrorRate);
            return false;
    }
}

bool parse_capacity(Context& ctx, std::string_view text, std::uint64_t& out) {
    std::int64_t value;
    if (!parse_int64(text, value)) {
        ctx.out.error(errors::kCapacityNotNumber);
        return false;
    }
    if (value <= 0) {
        ctx.out.error(errors::kBadCapacity);
        return false;
    }
    if (static_cast<std::uint64_t>(value) > bloom::kMaxLayerCapacity) {
        ctx.out.error(errors::kCapacityTooLarge);
        return false;
    }
    out = static_cast<std::uint64_t>(value);
    return true;
}

bool parse_expansion(Context& ctx, std::string_view text, std::uint32_t& out) {
    std::int64_t value;
    if (!parse_int64(text, value)) {
        ctx.out.error(errors::kExpansionNotNumber);
        return false;
    }
    if (value < bloom::kMinExpansion) {
        ctx.out.error(errors::kBadExpansion);
        return false;
    }
    if (value > bloom::kMaxExpansion) {  // RedisBloom's bf-expansion-factor bound
        ctx.out.error(errors::kExpansionTooLarge);
        return false;
    }
    out = static_cast<std::uint32_t>(value);
    return true;
}

bool parse_layout(Context& ctx, std::string_view text, bloom::Layout& out) {
    if (iequals(text, "BLOCKED")) {
        out = bloom::Layout::blocked;
    } else if (iequals(text, "CLASSIC")) {
        out = bloom::Layout::classic;
    } else {
        ctx.out.error(errors::kBadLayout);
        return false;
    }
    return true;
}

void cmd_reserve(Context& ctx, Args argv) {
    if (argv.size() > 9) {
        reply_wrong_arity(ctx, "bf.reserve");
        return;
    }
    FilterOptions options = default_options(ctx);
    if (!parse_error_rate(ctx, argv[2], options.error_rate)) return;
    if (!parse_capacity(ctx, argv[3], options.capacity)) return;
    bool expansion_given = false;
    for (std::size_t i = 4; i < argv.size(); ++i) {
        if (iequals(argv[i], "NONSCALING")) {
            options.nonscaling = true;
        } else if (iequals(argv[i], "EXPANSION")) {
            if (i + 1 == argv.size()) {
                ctx.out.error("ERR no expansion");
                return;
            }
            if (!parse_expansion(ctx, argv[++i], options.expansion)) return;
            expansion_given = true;
        } else if (iequals(argv[i], "LAYOUT")) {
            if (i + 1 == argv.size()) {
                ctx.out.error(errors::kBadLayout);
                return;
            }
            if (!parse_layout(ctx, argv[++i], options.layout)) return;
        } else {
            ctx.out.error(errors::kSyntax);
            return;
        }
    }
    if (options.nonscaling && expansion_given) {
        ctx.out.error(errors::kNonScalingExpansion);
        return;
    }
    // Checked first so an existing key costs no allocation; insert_new below
    // still settles a race with another creator.
    if (ctx.keyspace.contains(argv[1])) {
        ctx.out.error(errors::kItemExists);
        return;
    }
    std::string_view error;
    FilterRef filter = make_filter(ctx, options, error);
    if (!filter) {
        ctx.out.error(error);
        return;
    }
    if (!ctx.keyspace.insert_new(argv[1], std::move(filter))) {
        ctx.out.error(errors::kItemExists);  // another client created it meanwhile
        return;
    }
    note_change(ctx);
    ctx.out.ok();
}

void cmd_insert(Context& ctx, Args argv) {
    FilterOptions options = default_options(ctx);
    bool create = true;
    bool expansion_given = false;
    std::size_t items_at = 0;
    for (std::size_t i = 2; i < argv.size() && items_at == 0; ++i) {
        const std::string_view token = argv[i];
        const bool takes_value = iequals(token, "CAPACITY") || iequals(token, "ERROR") ||
                                 iequals(token, "EXPANSION") || iequals(token, "LAYOUT");
        if (takes_value && i + 1 == argv.size()) {
            reply_wrong_arity(ctx, "bf.insert");
            return;
        }
        if (iequals(token, "ITEMS")) {
            items_at = i + 1;
        } else if (iequals(token, "CAPACITY")) {
            if (!parse_capacity(ctx, argv[++i], options.capacity)) return;
        } else if (iequals(token, "ERROR")) {
            if (!parse_error_rate(ctx, argv[++i], options.error_rate)) return;
        } else if (iequals(token, "EXPANSION")) {
            if (!parse_expansion(ctx, argv[++i], options.expansion)) return;
            expansion_given = true;
        } else if (iequals(token, "LAYOUT")) {
            if (!parse_layout(ctx, argv[++i], options.layout)) return;
        } else if (iequals(token, "NOCREATE")) {
            create = false;
        } else if (iequals(token, "NONSCALING")) {
            options.nonscaling = true;
        } else {
            ctx.out.error(errors::kBadOption);
            return;
        }
    }
    if (items_at == 0 || items_at >= argv.size()) {
        reply_wrong_arity(ctx, "bf.insert");
        return;
    }
    // As BF.RESERVE (and RedisBloom's BF.INSERT): a filter cannot be both.
    if (options.nonscaling && expansion_given) {
        ctx.out.error(errors::kNonScalingExpansion);
        return;
    }
    add_items(ctx, argv[1], argv.subspan(items_at), &options, create, true);
}

void cmd_exists(Context& ctx, Args argv) {
    bool present = false;
    const bool found = ctx.keyspace.with_filter(
        argv[1], [&](const ScalableFilter& filter) { present = filter.contains(argv[2]); });
    WorkerStats::bump(found ? ctx.stats.keyspace_hits : ctx.stats.keyspace_misses);
    ctx.out.integer(present ? 1 : 0);
}

void cmd_mexists(Context& ctx, Args argv) {
    const Args items = argv.subspan(2);
    ctx.out.array(items.size());
    thread_local std::vector<std::uint8_t> present;
    present.assign(items.size(), 0);
    const bool found = ctx.keyspace.with_filter(
        argv[1], [&](const ScalableFilter& filter) { filter.contains_many(items, present); });
    for (std::size_t i = 0; i < items.size(); ++i) ctx.out.integer(present[i] ? 1 : 0);
    WorkerStats::bump(found ? ctx.stats.keyspace_hits : ctx.stats.keyspace_misses);
}

void cmd_info(Context& ctx, Args argv) {
    if (argv.size() > 3) {
        reply_wrong_arity(ctx, "bf.info");
        return;
    }
    std::string_view error;
    const bool found = ctx.keyspace.with_filter(argv[1], [&](const ScalableFilter& filter) {
        const bool nonscaling = filter.options().nonscaling;
        auto expansion = [&] {
            if (nonscaling) {
                ctx.out.null();
            } else {
                ctx.out.integer(filter.options().expansion);
            }
        };
        if (argv.size() == 3) {
            const std::string_view field = argv[2];
            if (iequals(field, "CAPACITY")) {
                ctx.out.array(1);
                ctx.out.integer(static_cast<std::int64_t>(filter.capacity()));
            } else if (iequals(field, "SIZE")) {
                ctx.out.array(1);
                ctx.out.integer(static_cast<std::int64_t>(filter.info_size()));
            } else if (iequals(field, "FILTERS")) {
                ctx.out.array(1);
                ctx.out.integer(static_cast<std::int64_t>(filter.num_layers()));
            } else if (iequals(field, "ITEMS")) {
                ctx.out.array(1);
                ctx.out.integer(static_cast<std::int64_t>(filter.items()));
            } else if (iequals(field, "EXPANSION")) {
                ctx.out.array(1);
                expansion();
            } else if (iequals(field, "LAYOUT")) {
                // bloomery's: the layout new layers use (a layer whose error
                // rate is too low to block stays classic; see bounds.hpp).
                ctx.out.array(1);
                ctx.out.bulk(bloom::layout_name(filter.options().layout));
            } else if (iequals(field, "SCHEME")) {
                // bloomery's: how items are hashed and placed (bounds.hpp:
                // HashScheme), "redisbloom" for filters migrated from it.
                ctx.out.array(1);
                ctx.out.bulk(bloom::scheme_name(filter.scheme()));
            } else if (iequals(field, "BITSPERITEM")) {
                // bloomery's: bits of all layers per item of capacity.
                ctx.out.array(1);
                ctx.out.real(static_cast<double>(filter.bits_size()) * 8.0 /
                             static_cast<double>(filter.capacity()));
            } else {
                error = errors::kInvalidInfoField;
            }
            return;
        }
        ctx.out.map(5);
        ctx.out.simple("Capacity");
        ctx.out.integer(static_cast<std::int64_t>(filter.capacity()));
        ctx.out.simple("Size");
        ctx.out.integer(static_cast<std::int64_t>(filter.info_size()));
        ctx.out.simple("Number of filters");
        ctx.out.integer(static_cast<std::int64_t>(filter.num_layers()));
        ctx.out.simple("Number of items inserted");
        ctx.out.integer(static_cast<std::int64_t>(filter.items()));
        ctx.out.simple("Expansion rate");
        expansion();
    });
    if (!found) error = errors::kNotFound;
    if (!error.empty()) ctx.out.error(error);
}

void cmd_card(Context& ctx, Args argv) {
    std::uint64_t estimate = 0;
    ctx.keyspace.with_filter(argv[1], [&](const ScalableFilter& filter) {
        // A RedisBloom-scheme filter answers as RedisBloom does: the items
        // inserted. bloomery's own estimate from the bits set otherwise.
        estimate = filter.scheme() == bloom::HashScheme::redisbloom ? filter.items()
                                                                    : filter.estimate_cardinality();
    });
    ctx.out.integer(static_cast<std::int64_t>(estimate));
}

void cmd_scandump(Context& ctx, Args argv) {
    std::int64_t iter;
    if (!parse_int64(argv[2], iter) || iter < 0) {
        ctx.out.error(errors::kInvalidIterator);
        return;
    }
    const bool found = ctx.keyspace.with_filter(argv[1], [&](const ScalableFilter& filter) {
        bloom::DumpChunk chunk = bloom::dump_chunk(filter, iter);
        ctx.out.array(2);
        ctx.out.integer(chunk.next_iter);
        ctx.out.bulk(chunk.data);
    });
    if (!found) ctx.out.error(errors::kNotFound);
}

void cmd_loadchunk(Context& ctx, Args argv) {
    std::int64_t iter;
    if (!parse_int64(argv[2], iter) || iter < 1) {
        ctx.out.error(errors::kInvalidIterator);
        return;
    }
    const std::string_view data = argv[3];
    std::string error;
    if (iter != 1) {  // a data chunk, into the filter its header created
        store::Keyspace::ChunkStatus status;
        try {
            status = ctx.keyspace.load_chunk(argv[1], iter, data, error);
        } catch (const std::bad_alloc&) {
            ctx.out.error(errors::kNoMemory);  // nothing was recorded or applied
            return;
        } catch (const std::length_error&) {
            ctx.out.error(errors::kNoMemory);
            return;
        }
        if (status == store::Keyspace::ChunkStatus::missing) {
            ctx.out.error(errors::kNotFound);
        } else if (status == store::Keyspace::ChunkStatus::refused) {
            ctx.out.error("ERR " + error);
        } else {
            note_change(ctx);
            ctx.out.ok();
        }
        return;
    }
    // Iterator 1 is always a header, which creates the key.
    if (ctx.keyspace.contains(argv[1])) {
        ctx.out.error(errors::kItemExists);
        return;
    }
    bloom::DumpHeader header;
    if (!bloom::parse_header(data, header, error)) {
        ctx.out.error("ERR " + error);
        return;
    }
    // The whole filter, every layer, is checked before anything is allocated.
    std::string_view limit_error;
    if (!within_limits(ctx, header.layers, limit_error)) {
        ctx.out.error(limit_error);
        return;
    }
    FilterRef filter;
    try {
        filter = bloom::build_filter(header, ctx.config.maxmemory);
    } catch (const std::bad_alloc&) {
        ctx.out.error(errors::kOutOfMemory);
        return;
    }
    if (!filter) {
        ctx.out.error(errors::kOom);
        return;
    }
    if (!ctx.keyspace.insert_new(argv[1], std::move(filter))) {
        ctx.out.error(errors::kItemExists);
        return;
    }
    note_change(ctx);
    ctx.out.ok();
}

}  // namespace

void register_bf_commands(Registry& registry) {
    registry.register_handler("bf.reserve", cmd_reserve);
    registry.register_handler("bf.add", cmd_add);
    registry.register_handler("bf.madd", cmd_madd);
    registry.register_handler("bf.insert", cmd_insert);
    registry.register_handler("bf.exists", cmd_exists);
    registry.register_handler("bf.mexists", cmd_mexists);
    registry.register_handler("bf.info", cmd_info);
    registry.register_handler("bf.card", cmd_card);
    registry.register_handler("bf.scandump", cmd_scandump);
    registry.register_handler("bf.loadchunk", cmd_loadchunk);
}

}  // namespace bloomery::command
