// BF.* commands, with RedisBloom's semantics and reply shapes. Parsing and
// replying live here; the filter math lives in bloom/, the map in store/.

#include <cstdio>
#include <functional>
#include <new>
#include <optional>
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
#include "common.hpp"
#include "families.hpp"
#include "new_filter.hpp"

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
    switch (ctx.config.default_layout) {
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

bloom::GrowthLimits growth_limits(const Context& ctx) {
    return bloom::GrowthLimits{ctx.config.max_filter_bytes, ctx.config.maxmemory};
}

// A new filter with `options`, which passed check_options() (the parsers
// check each field; the defaults are checked at start), within the bounds
// and the configured limits (new_filter.hpp).
core::Result<FilterRef> make_filter(const Context& ctx, const FilterOptions& options) {
    const bloom::LayerGeometry first = bloom::first_layer(options);
    if (bloom::check_layer(first, 0) != bloom::BoundsError::none) {
        return refuse(errors::kFilterTooLarge);  // more bits than any layer may have
    }
    return build_new_filter(ctx, std::span(&first, 1),
                            [&] { return ScalableFilter::create(options, ctx.config.maxmemory); });
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

// One add's or lookup's answer: an integer under RESP2 (RedisBloom 2.4), a
// boolean under RESP3 (RedisBloom 2.8, Redis 8).
void reply_flag(Context& ctx, bool value) {
    if (ctx.out.protocol() >= 3) {
        ctx.out.boolean(value);
    } else {
        ctx.out.integer(value ? 1 : 0);
    }
}

// Adds `items` to the filter at `key`, creating it with `options` unless
// `create` is false. Replies one integer (single) or an array that stops at
// the first failing item, as RedisBloom does.
// `options` is null for BF.ADD / BF.MADD: the configured defaults, worked
// out only when the key has to be created, not on every add.
void add_items(Context& ctx, std::string_view key, Args items, const FilterOptions* options,
               bool create, bool multi) {
    std::optional<core::Error> refused;  // why make() did not create the key
    // Results are gathered first because the array length is only known once
    // a full NONSCALING filter stops the loop.
    thread_local std::vector<AddResult> results;
    // One pointer captured, so the std::function keeps it inline (no
    // allocation per BF.ADD).
    struct Creation {
        const Context& ctx;
        const FilterOptions* options;
        std::optional<core::Error>& refused;
    } creation{ctx, options, refused};
    const std::function<FilterRef()> make = [c = &creation]() -> FilterRef {
        core::Result<FilterRef> filter =
            make_filter(c->ctx, c->options ? *c->options : default_options(c->ctx));
        if (filter) return std::move(*filter);
        c->refused = std::move(filter).failure();
        return {};
    };
    const bool found =
        ctx.keyspace.add_items(key, items, growth_limits(ctx), create ? &make : nullptr, results);
    if (!found) {
        ctx.out.error(refused ? refused->text : errors::kNotFound);
        return;
    }
    std::uint64_t added = 0;
    for (AddResult result : results) added += result == AddResult::added ? 1 : 0;
    note_changes(ctx, added);
    if (multi) ctx.out.array(results.size());
    for (AddResult result : results) {
        if (result == AddResult::added || result == AddResult::exists) {
            reply_flag(ctx, result == AddResult::added);
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

// bloomery's bounds beyond RedisBloom's (bloom/bounds.hpp), for a value that
// passed RedisBloom's own checks; their error, or empty.
std::string_view error_rate_bound(double error_rate) {
    return bloom::check_error_rate(error_rate) == bloom::BoundsError::error_rate_too_small
               ? errors::kErrorRateTooSmall
               : std::string_view{};
}

std::string_view capacity_bound(std::int64_t capacity) {
    return static_cast<std::uint64_t>(capacity) > bloom::kMaxLayerCapacity
               ? errors::kCapacityTooLarge
               : std::string_view{};
}

std::string_view expansion_bound(std::int64_t expansion) {
    return expansion > bloom::kMaxExpansion ? errors::kExpansionTooLarge : std::string_view{};
}

// BF.INFO LAYOUT: the layout the filter asked for; under auto, followed by
// the layouts its sub-filters have, "auto (classic)", "auto (blocked)" or
// "auto (blocked, classic)".
std::string layout_reply(const ScalableFilter& filter) {
    const bloom::Layout policy = filter.options().layout;
    std::string reply(bloom::layout_name(policy));
    if (policy != bloom::Layout::automatic) return reply;
    bool blocked = false;
    bool classic = false;
    for (std::size_t i = 0; i < filter.num_layers(); ++i) {
        (filter.layer(i).layout() == bloom::Layout::blocked ? blocked : classic) = true;
    }
    reply += blocked && classic ? " (blocked, classic)" : blocked ? " (blocked)" : " (classic)";
    return reply;
}

bool parse_layout(Context& ctx, std::string_view text, bloom::Layout& out) {
    if (iequals(text, "AUTO")) {
        out = bloom::Layout::automatic;
    } else if (iequals(text, "BLOCKED")) {
        out = bloom::Layout::blocked;
    } else if (iequals(text, "CLASSIC")) {
        out = bloom::Layout::classic;
    } else {
        ctx.out.error(errors::kBadLayout);
        return false;
    }
    return true;
}

// The first argument from `from` on that is `token` (any case), as
// RedisBloom's RMUtil_ArgIndex finds its options; npos if none.
std::size_t find_token(Args argv, std::size_t from, std::string_view token) {
    for (std::size_t i = from; i < argv.size(); ++i) {
        if (iequals(argv[i], token)) return i;
    }
    return std::string_view::npos;
}

// BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING], read as
// RedisBloom 2.4 reads it: at most 7 arguments, the rate and capacity
// checked first, NONSCALING and EXPANSION found wherever they are after the
// capacity (other words are ignored), and the key looked at last. bloomery
// adds LAYOUT AUTO|CLASSIC|BLOCKED, whose two words do not count toward the 7.
// Unlike RedisBloom, options are looked for after the capacity only (it also
// finds them in the key and the numbers) and an expansion must be 1 to 32768.
void cmd_reserve(Context& ctx, Args argv) {
    const std::size_t layout_at = find_token(argv, 4, "LAYOUT");
    const std::size_t counted =
        argv.size() - (layout_at != std::string_view::npos && layout_at + 1 < argv.size() ? 2 : 0);
    if (counted > 7) {
        reply_wrong_arity(ctx, "bf.reserve");
        return;
    }
    FilterOptions options = default_options(ctx);
    if (!parse_double(argv[2], options.error_rate)) {
        ctx.out.error(errors::kErrorRateNotNumber);
        return;
    }
    if (!(options.error_rate > 0 && options.error_rate < 1)) {
        ctx.out.error(errors::kBadErrorRate);
        return;
    }
    std::int64_t capacity = 0;
    if (!parse_int64(argv[3], capacity)) {
        ctx.out.error(errors::kCapacityNotNumber);
        return;
    }
    if (capacity <= 0) {
        ctx.out.error(errors::kBadCapacity);
        return;
    }
    options.nonscaling = find_token(argv, 4, "NONSCALING") != std::string_view::npos;
    const std::size_t expansion_at = find_token(argv, 4, "EXPANSION");
    if (expansion_at != std::string_view::npos) {
        if (expansion_at + 1 == argv.size()) {
            ctx.out.error(errors::kNoExpansion);
            return;
        }
        if (options.nonscaling) {
            ctx.out.error(errors::kNonScalingExpansion);
            return;
        }
        std::int64_t expansion = 0;
        if (!parse_int64(argv[expansion_at + 1], expansion)) {
            ctx.out.error(errors::kExpansionNotNumber);
            return;
        }
        if (expansion < bloom::kMinExpansion) {
            ctx.out.error(errors::kBadExpansion);
            return;
        }
        if (const std::string_view bound = expansion_bound(expansion); !bound.empty()) {
            ctx.out.error(bound);
            return;
        }
        options.expansion = static_cast<std::uint32_t>(expansion);
    }
    if (layout_at != std::string_view::npos) {
        if (layout_at + 1 == argv.size()) {
            ctx.out.error(errors::kBadLayout);
            return;
        }
        if (!parse_layout(ctx, argv[layout_at + 1], options.layout)) return;
    }
    for (const std::string_view bound :
         {error_rate_bound(options.error_rate), capacity_bound(capacity)}) {
        if (!bound.empty()) {
            ctx.out.error(bound);
            return;
        }
    }
    options.capacity = static_cast<std::uint64_t>(capacity);
    // Checked first so an existing key costs no allocation; insert_new below
    // still settles a race with another creator.
    if (ctx.keyspace.contains(argv[1])) {
        ctx.out.error(errors::kItemExists);
        return;
    }
    core::Result<FilterRef> filter = make_filter(ctx, options);
    if (!filter) {
        ctx.out.error(filter.error());
        return;
    }
    if (!ctx.keyspace.insert_new(argv[1], std::move(*filter))) {
        ctx.out.error(errors::kItemExists);  // another client created it meanwhile
        return;
    }
    note_changes(ctx);
    ctx.out.ok();
}

// BF.INSERT key [CAPACITY n] [ERROR rate] [EXPANSION n] [NOCREATE]
// [NONSCALING] ITEMS item..., read as RedisBloom 2.4 reads it: a word is
// known by its first letter (i: ITEMS; c: CAPACITY; e: ERROR if its second
// letter is r, else EXPANSION; n: NOCREATE if its third letter is c, else
// NONSCALING), a value a word lacks is a wrong number of arguments, the
// values are checked together once ITEMS is found, and an EXPANSION beside
// NONSCALING is taken. bloomery adds LAYOUT AUTO|CLASSIC|BLOCKED (the whole word).
void cmd_insert(Context& ctx, Args argv) {
    FilterOptions options = default_options(ctx);
    bool create = true;
    double error_rate = options.error_rate;
    std::int64_t capacity = static_cast<std::int64_t>(options.capacity);
    std::int64_t expansion = options.expansion;
    std::size_t items_at = 0;
    auto letter = [](std::string_view word, std::size_t i) {
        return i < word.size() ? core::ascii_lower(word[i]) : '\0';
    };
    for (std::size_t i = 2; i < argv.size() && items_at == 0;) {
        const std::string_view word = argv[i];
        if (iequals(word, "LAYOUT")) {
            if (++i == argv.size()) {
                reply_wrong_arity(ctx, "bf.insert");
                return;
            }
            if (!parse_layout(ctx, argv[i++], options.layout)) return;
            continue;
        }
        switch (letter(word, 0)) {
            case 'i':
                items_at = ++i;
                break;
            case 'e':
                if (++i == argv.size()) {
                    reply_wrong_arity(ctx, "bf.insert");
                    return;
                }
                if (letter(word, 1) == 'r') {
                    if (!parse_double(argv[i++], error_rate)) {
                        ctx.out.error(errors::kInsertBadErrorRate);
                        return;
                    }
                } else if (!parse_int64(argv[i++], expansion)) {
                    ctx.out.error(errors::kInsertBadExpansion);
                    return;
                }
                break;
            case 'c':
                if (++i == argv.size()) {
                    reply_wrong_arity(ctx, "bf.insert");
                    return;
                }
                if (!parse_int64(argv[i++], capacity)) {
                    ctx.out.error(errors::kInsertBadCapacity);
                    return;
                }
                break;
            case 'n':
                if (letter(word, 2) == 'c') {
                    create = false;
                } else {
                    options.nonscaling = true;
                }
                ++i;
                break;
            default:
                ctx.out.error(errors::kInsertUnknownOption);
                return;
        }
    }
    if (items_at == 0 || items_at >= argv.size()) {
        reply_wrong_arity(ctx, "bf.insert");
        return;
    }
    if (!(error_rate > 0 && error_rate < 1) || capacity < 1 || expansion < 1) {
        ctx.out.error(errors::kInsertBadArgument);
        return;
    }
    for (const std::string_view bound :
         {error_rate_bound(error_rate), capacity_bound(capacity), expansion_bound(expansion)}) {
        if (!bound.empty()) {
            ctx.out.error(bound);
            return;
        }
    }
    options.error_rate = error_rate;
    options.capacity = static_cast<std::uint64_t>(capacity);
    options.expansion = static_cast<std::uint32_t>(expansion);
    add_items(ctx, argv[1], argv.subspan(items_at), &options, create, true);
}

void cmd_exists(Context& ctx, Args argv) {
    bool present = false;
    const bool found = ctx.keyspace.with_filter(
        argv[1], [&](const ScalableFilter& filter) { present = filter.contains(argv[2]); });
    WorkerStats::bump(found ? ctx.stats.keyspace_hits : ctx.stats.keyspace_misses);
    reply_flag(ctx, present);
}

void cmd_mexists(Context& ctx, Args argv) {
    const Args items = argv.subspan(2);
    ctx.out.array(items.size());
    thread_local std::vector<std::uint8_t> present;
    present.assign(items.size(), 0);
    const bool found = ctx.keyspace.with_filter(
        argv[1], [&](const ScalableFilter& filter) { filter.contains_many(items, present); });
    for (std::size_t i = 0; i < items.size(); ++i) reply_flag(ctx, present[i] != 0);
    WorkerStats::bump(found ? ctx.stats.keyspace_hits : ctx.stats.keyspace_misses);
}

// BF.INFO key [field]: RedisBloom's fields, as a flat array under RESP2 and
// a map under RESP3 (RedisBloom 2.8: one field alone is a map of one).
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
        // One field: an array of its value (RESP2), or a map of its name
        // and value (RESP3).
        auto one = [&](std::string_view name) {
            if (ctx.out.protocol() >= 3) {
                ctx.out.map(1);
                ctx.out.simple(name);
            } else {
                ctx.out.array(1);
            }
        };
        if (argv.size() == 3) {
            const std::string_view field = argv[2];
            if (iequals(field, "CAPACITY")) {
                one("Capacity");
                ctx.out.integer(static_cast<std::int64_t>(filter.capacity()));
            } else if (iequals(field, "SIZE")) {
                one("Size");
                ctx.out.integer(static_cast<std::int64_t>(filter.info_size()));
            } else if (iequals(field, "FILTERS")) {
                one("Number of filters");
                ctx.out.integer(static_cast<std::int64_t>(filter.num_layers()));
            } else if (iequals(field, "ITEMS")) {
                one("Number of items inserted");
                ctx.out.integer(static_cast<std::int64_t>(filter.items()));
            } else if (iequals(field, "EXPANSION")) {
                one("Expansion rate");
                expansion();
            } else if (iequals(field, "LAYOUT")) {
                // bloomery's: the layout new layers use (a layer whose error
                // rate is too low to block stays classic; see bounds.hpp);
                // for auto, also what its layers are.
                one("Layout");
                ctx.out.bulk(layout_reply(filter));
            } else if (iequals(field, "SCHEME")) {
                // bloomery's: how items are hashed and placed (bounds.hpp:
                // HashScheme), "redisbloom" for filters migrated from it.
                one("Scheme");
                ctx.out.bulk(bloom::scheme_name(filter.scheme()));
            } else if (iequals(field, "BITSPERITEM")) {
                // bloomery's: bits of all layers per item of capacity.
                one("Bits per item");
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

// BF.DEBUG key: RedisBloom's report, "size:<items>" and one line per layer.
// The numbers are this filter's own: its bit arrays' bytes and bits, its
// hash functions, 64-bit hashing (the two 64-bit halves of MurmurHash3 x64
// 128), each layer's capacity, items and error rate.
void cmd_debug(Context& ctx, Args argv) {
    const bool found = ctx.keyspace.with_filter(argv[1], [&](const ScalableFilter& filter) {
        const std::size_t layers = filter.num_layers();
        ctx.out.array(1 + layers);
        ctx.out.bulk("size:" + std::to_string(filter.items()));
        char text[256];
        for (std::size_t i = 0; i < layers; ++i) {
            const bloom::BloomLayer& layer = filter.layer(i);
            std::snprintf(text, sizeof text,
                          "bytes:%llu bits:%llu hashes:%u hashwidth:64 capacity:%llu size:%llu "
                          "ratio:%g",
                          static_cast<unsigned long long>(layer.byte_size()),
                          static_cast<unsigned long long>(layer.bits()), layer.hashes(),
                          static_cast<unsigned long long>(layer.capacity()),
                          static_cast<unsigned long long>(layer.items()), layer.error_rate());
            ctx.out.bulk(text);
        }
    });
    if (!found) ctx.out.error(errors::kNotFound);
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

// BF.SCANDUMP key iter: the key first, then the iterator (RedisBloom's
// order and text); an iterator past the end, or below 0, gives (0, "").
void cmd_scandump(Context& ctx, Args argv) {
    const bool found = ctx.keyspace.with_filter(argv[1], [&](const ScalableFilter& filter) {
        std::int64_t iter;
        if (!parse_int64(argv[2], iter)) {
            ctx.out.error(errors::kScandumpIterator);
            return;
        }
        ctx.out.array(2);
        if (iter < 0) {
            ctx.out.integer(0);
            ctx.out.bulk("");
            return;
        }
        bloom::DumpChunk chunk = bloom::dump_chunk(filter, iter);
        ctx.out.integer(chunk.next_iter);
        ctx.out.bulk(chunk.data);
    });
    if (!found) ctx.out.error(errors::kNotFound);
}

void cmd_loadchunk(Context& ctx, Args argv) {
    std::int64_t iter;
    if (!parse_int64(argv[2], iter)) {
        ctx.out.error(errors::kLoadchunkIterator);
        return;
    }
    if (iter < 1) {
        // RedisBloom looks for the filter first.
        ctx.out.error(ctx.keyspace.contains(argv[1]) ? errors::kInvalidIterator
                                                     : errors::kNotFound);
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
            note_changes(ctx);
            ctx.out.ok();
        }
        return;
    }
    // Iterator 1 is always a header, which creates the key; RedisBloom reads
    // it as data for a filter that exists, and refuses it so.
    if (ctx.keyspace.contains(argv[1])) {
        ctx.out.error(errors::kBadChunkData);
        return;
    }
    const core::Result<bloom::DumpHeader> header = bloom::parse_header(data);
    if (!header) {
        ctx.out.error("ERR " + header.error());
        return;
    }
    // The whole filter, every layer, is checked before anything is allocated.
    core::Result<FilterRef> filter = build_new_filter(
        ctx, header->layers, [&] { return bloom::build_filter(*header, ctx.config.maxmemory); });
    if (!filter) {
        ctx.out.error(filter.error());
        return;
    }
    if (!ctx.keyspace.insert_new(argv[1], std::move(*filter))) {
        ctx.out.error(errors::kItemExists);
        return;
    }
    note_changes(ctx);
    ctx.out.ok();
}

}  // namespace

void register_bf_commands(Registry& registry) {
    registry.register_handler<cmd_reserve>("bf.reserve");
    registry.register_handler<cmd_add>("bf.add");
    registry.register_handler<cmd_madd>("bf.madd");
    registry.register_handler<cmd_insert>("bf.insert");
    registry.register_handler<cmd_exists>("bf.exists");
    registry.register_handler<cmd_mexists>("bf.mexists");
    registry.register_handler<cmd_info>("bf.info");
    registry.register_handler<cmd_card>("bf.card");
    registry.register_handler<cmd_debug>("bf.debug");
    registry.register_handler<cmd_scandump>("bf.scandump");
    registry.register_handler<cmd_loadchunk>("bf.loadchunk");
}

}  // namespace bloomery::command
