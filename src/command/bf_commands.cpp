// BF.* commands that create filters, add and look up, with RedisBloom's
// semantics and reply shapes (the family's other files: bf_family.hpp).
// Parsing and replying live here; the filter math lives in bloom/, the map
// in store/.

#include <algorithm>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "bf_family.hpp"
#include "bf_options.hpp"
#include "bf_window.hpp"
#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/store/clock.hpp"
#include "common.hpp"
#include "families.hpp"
#include "new_filter.hpp"

namespace bloomery::command {
namespace {

using bloom::AddResult;
using bloom::FilterOptions;
using bloom::FilterRef;
using bloom::ScalableFilter;

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

// A new expiring filter of `geometry`, within --max-filter-bytes and
// --maxmemory; a time window's generation starts now.
core::Result<bloom::AgeFilterRef> make_age_filter(const Context& ctx,
                                                  const bloom::AgeGeometry& geometry) {
    return build_new_age_filter(ctx, geometry, [&] {
        return bloom::AgeFilter::create(geometry, 0, static_cast<std::uint64_t>(store::now_ms()));
    });
}

// Lookups of `items` in an expiring filter, hashed and looked up a batch at
// a time (AgeFilter::contains_many prefetches across a batch).
void age_contains_many(const bloom::AgeFilter& filter, Args items,
                       std::vector<std::uint8_t>& present) {
    constexpr std::size_t kBatch = 64;
    bloom::ItemHash hashes[kBatch];
    for (std::size_t first = 0; first < items.size(); first += kBatch) {
        const std::size_t n = std::min(kBatch, items.size() - first);
        for (std::size_t i = 0; i < n; ++i) hashes[i] = bloom::hash_item(items[first + i]);
        filter.contains_many(hashes, n, present.data() + first);
    }
}

// What an add does with a missing key: creates it with `options` (null: the
// configured defaults, worked out only when the key has to be created, not
// on every BF.ADD), unless `if_missing` says to refuse.
struct NewKey {
    const FilterOptions* options = nullptr;
    IfMissing if_missing = IfMissing::create;
};

// Adds `items` to the filter at `key`. What happened: each item's result,
// stopping after the first that failed, as RedisBloom does (a view of this
// thread's buffer, valid until its next add); or why nothing was added: the
// key is missing and `new_key` refused to create it (errors::kNotFound), or
// creating it was refused (make_filter's error).
core::Result<std::span<const AddResult>> add_items(Context& ctx, std::string_view key, Args items,
                                                   const NewKey& new_key) {
    // Gathered first because an array reply's length is only known once a
    // full NONSCALING filter stops the loop.
    thread_local std::vector<AddResult> results;
    std::optional<core::Error> refused;  // why make() did not create the key
    // One pointer captured, so the std::function keeps it inline (no
    // allocation per BF.ADD).
    struct Creation {
        const Context& ctx;
        const NewKey& new_key;
        std::optional<core::Error>& refused;
    } creation{ctx, new_key, refused};
    const std::function<FilterRef()> make = [c = &creation]() -> FilterRef {
        core::Result<FilterRef> filter = make_filter(
            c->ctx, c->new_key.options != nullptr ? *c->new_key.options
                                                  : default_filter_options(c->ctx.config));
        if (filter) return std::move(*filter);
        c->refused = std::move(filter).failure();
        return {};
    };
    const bool found =
        ctx.keyspace.add_items(key, items, growth_limits(ctx),
                               new_key.if_missing == IfMissing::create ? &make : nullptr, results);
    if (!found) return refused ? std::move(*refused) : refuse(errors::kNotFound);
    std::uint64_t added = 0;
    for (AddResult result : results) added += result == AddResult::added ? 1 : 0;
    note_changes(ctx, added);
    return std::span<const AddResult>(results);
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

// How many answers an add gives: one (BF.ADD) or an array of one per item
// it tried (BF.MADD, BF.INSERT).
enum class Answers { one, array };

// Replies what add_items did: its refusal, or each item's flag or error.
void reply_adds(Context& ctx, const core::Result<std::span<const AddResult>>& adds,
                Answers answers) {
    if (!adds) {
        ctx.out.error(adds.error());
        return;
    }
    if (answers == Answers::array) ctx.out.array(adds->size());
    for (const AddResult result : *adds) {
        if (result == AddResult::added || result == AddResult::exists) {
            reply_flag(ctx, result == AddResult::added);
        } else {
            ctx.out.error(add_error(result));
        }
    }
}

void cmd_add(Context& ctx, Args argv) {
    reply_adds(ctx, add_items(ctx, argv[1], argv.subspan(2), NewKey{}), Answers::one);
}

void cmd_madd(Context& ctx, Args argv) {
    reply_adds(ctx, add_items(ctx, argv[1], argv.subspan(2), NewKey{}), Answers::array);
}

// BF.INSERT WINDOW: creates the expiring filter if the key is missing (and
// NOCREATE does not refuse), then adds as to any filter the key holds.
core::Result<std::span<const AddResult>> insert_expiring(Context& ctx, std::string_view key,
                                                         const InsertRequest& request) {
    // Each round creates the key or finds it; only a client deleting it
    // between the two steps every time could make this give up.
    for (int round = 0; round < 8; ++round) {
        if (!ctx.keyspace.contains(key)) {
            if (request.if_missing == IfMissing::refuse) return refuse(errors::kNotFound);
            core::Result<bloom::AgeFilterRef> filter = make_age_filter(ctx, *request.age);
            if (!filter) return filter.failure();
            if (ctx.keyspace.insert_new(key, std::move(*filter))) note_changes(ctx);
        }
        core::Result<std::span<const AddResult>> adds =
            add_items(ctx, key, request.items, NewKey{nullptr, IfMissing::refuse});
        if (adds || adds.error() != errors::kNotFound) return adds;
    }
    return refuse(errors::kNotFound);
}

// BF.INSERT: options as bf_options.hpp reads them, then an add that answers
// an array.
void cmd_insert(Context& ctx, Args argv) {
    const core::Result<InsertRequest> request = parse_insert(ctx.config, argv);
    if (!request) {
        ctx.out.error(request.error());
        return;
    }
    if (request->age) {
        reply_adds(ctx, insert_expiring(ctx, argv[1], *request), Answers::array);
        return;
    }
    const NewKey new_key{&request->options, request->if_missing};
    reply_adds(ctx, add_items(ctx, argv[1], request->items, new_key), Answers::array);
}

// Creates what make() builds (a core::Result of a filter reference) under
// `key`, unless the key exists: checked first so an existing key costs no
// allocation; insert_new still settles a race with another creator.
template <class Make>
void reserve_new(Context& ctx, std::string_view key, store::ValueKind kind, Make&& make) {
    if (ctx.keyspace.contains(key)) {
        ctx.out.error(exists_error(ctx, key, kind));
        return;
    }
    auto filter = make();
    if (!filter) {
        ctx.out.error(filter.error());
        return;
    }
    if (!ctx.keyspace.insert_new(key, std::move(*filter))) {
        ctx.out.error(exists_error(ctx, key, kind));  // another client created it meanwhile
        return;
    }
    note_changes(ctx);
    ctx.out.ok();
}

// BF.RESERVE: options as bf_options.hpp reads them; the key is looked at
// last, as RedisBloom does.
void cmd_reserve(Context& ctx, Args argv) {
    const core::Result<std::optional<bloom::AgeGeometry>> window = parse_reserve_window(argv);
    if (!window) {
        ctx.out.error(window.error());
        return;
    }
    if (*window) {
        reserve_new(ctx, argv[1], store::ValueKind::age,
                    [&] { return make_age_filter(ctx, **window); });
        return;
    }
    const core::Result<FilterOptions> options = parse_reserve(ctx.config, argv);
    if (!options) {
        ctx.out.error(options.error());
        return;
    }
    reserve_new(ctx, argv[1], store::ValueKind::bloom, [&] { return make_filter(ctx, *options); });
}

// Lookups answer 0 for a key holding a Cuckoo filter, as RedisBloom's do.
void cmd_exists(Context& ctx, Args argv) {
    bool present = false;
    const bool found = ctx.keyspace.with_value(argv[1], [&](const store::ValueRef& value) {
        if (const ScalableFilter* filter = value.bloom_or_null()) {
            present = filter->contains(argv[2]);
        } else if (const bloom::AgeFilter* age = value.age_or_null()) {
            present = age->contains(bloom::hash_item(argv[2]));
        }
    });
    WorkerStats::bump(found ? ctx.stats.keyspace_hits : ctx.stats.keyspace_misses);
    reply_flag(ctx, present);
}

void cmd_mexists(Context& ctx, Args argv) {
    const Args items = argv.subspan(2);
    ctx.out.array(items.size());
    thread_local std::vector<std::uint8_t> present;
    present.assign(items.size(), 0);
    const bool found = ctx.keyspace.with_value(argv[1], [&](const store::ValueRef& value) {
        if (const ScalableFilter* filter = value.bloom_or_null()) {
            filter->contains_many(items, present);
        } else if (const bloom::AgeFilter* age = value.age_or_null()) {
            age_contains_many(*age, items, present);
        }
    });
    ctx.out.booleans(present);
    WorkerStats::bump(found ? ctx.stats.keyspace_hits : ctx.stats.keyspace_misses);
}

// BF.DEL key item: 1 if the item may have been present (its counters were
// decremented), 0 if it certainly was not (or the key is missing).
void cmd_del(Context& ctx, Args argv) {
    thread_local std::vector<bloom::RemoveResult> results;
    const std::optional<bool> counting =
        ctx.keyspace.remove_items(argv[1], argv.subspan(2), results);
    WorkerStats::bump(counting ? ctx.stats.keyspace_hits : ctx.stats.keyspace_misses);
    if (counting && !*counting) {
        ctx.out.error(errors::kNotCounting);
        return;
    }
    const bool removed = !results.empty() && results.front() == bloom::RemoveResult::removed;
    if (!results.empty() && results.front() == bloom::RemoveResult::out_of_memory) {
        ctx.out.error(errors::kOom);
        return;
    }
    if (removed) note_changes(ctx);
    reply_flag(ctx, removed);
}

}  // namespace

void register_bf_commands(Registry& registry) {
    registry.register_handler<cmd_reserve>("bf.reserve");
    registry.register_handler<cmd_add>("bf.add");
    registry.register_handler<cmd_madd>("bf.madd");
    registry.register_handler<cmd_insert>("bf.insert");
    registry.register_handler<cmd_exists>("bf.exists");
    registry.register_handler<cmd_mexists>("bf.mexists");
    registry.register_handler<cmd_del>("bf.del");
    register_bf_info_commands(registry);
    register_bf_chunk_commands(registry);
    register_bf_set_commands(registry);
}

}  // namespace bloomery::command
