// Set operations on filters (bloom/set_operations.hpp has the math):
// BF.MERGE, BF.CARD of one key or the union of several, BF.INTERCARD.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bf_family.hpp"
#include "bloomery/bloom/age_header.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/bloom/set_operations.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/ascii.hpp"
#include "bloomery/core/parse_int64.hpp"
#include "common.hpp"
#include "new_filter.hpp"

namespace bloomery::command {
namespace {

using bloom::FilterRef;
using bloom::ScalableFilter;
using bloom::SetRefusal;

std::string_view refusal_text(SetRefusal refusal) {
    switch (refusal) {
        case SetRefusal::schemes_differ:
            return errors::kSetSchemesDiffer;
        case SetRefusal::nonscaling_shape:
            return errors::kMergeNonscalingShape;
        case SetRefusal::too_many_layers:
            return errors::kMergeTooManyLayers;
        case SetRefusal::shapes_differ:
            return errors::kSetShapesDiffer;
        case SetRefusal::kinds_differ:
            return errors::kMergeKindsDiffer;
        case SetRefusal::too_many_filters:
        case SetRefusal::none:
            break;
    }
    return errors::kSetTooManyFilters;
}

// BF.MERGE destkey srckey [srckey ...] [FORCE]: FORCE is the last argument
// when there are at least two sources' room (a lone source may be named
// "force").
bool merge_forced(Args argv) {
    return argv.size() >= 4 && core::iequals(argv.back(), "force");
}

KeyRange merge_keys(Args argv) {
    return {1, static_cast<long>(argv.size()) - (merge_forced(argv) ? 2 : 1), 1};
}

// The live filters under `keys`, in order; nullopt if one is missing.
std::optional<std::vector<store::KeySnapshot>> live_filters(
    Context& ctx, std::span<const std::string_view> keys) {
    std::vector<store::KeySnapshot> found;
    found.reserve(keys.size());
    for (std::string_view key : keys) {
        std::optional<store::KeySnapshot> snapshot = ctx.keyspace.get(key);
        if (!snapshot) return std::nullopt;
        found.push_back(std::move(*snapshot));
    }
    return found;
}

bool holds_expiring(const std::vector<store::KeySnapshot>& snapshots) {
    return std::any_of(snapshots.begin(), snapshots.end(), [](const store::KeySnapshot& s) {
        return s.value.age_or_null() != nullptr;
    });
}

std::vector<const ScalableFilter*> filters_of(const std::vector<store::KeySnapshot>& snapshots) {
    std::vector<const ScalableFilter*> filters;
    filters.reserve(snapshots.size());
    for (const store::KeySnapshot& snapshot : snapshots)
        filters.push_back(&snapshot.value.filter());
    return filters;
}

std::string rate_exceeded(double rate, double target) {
    char text[160];
    std::snprintf(text, sizeof text, "%s%.6g exceeds its error rate %.6g; FORCE merges anyway",
                  std::string(errors::kMergeRateExceeded).c_str(), rate, target);
    return text;
}

// BF.MERGE of expiring filters: all aligned slice for slice (the same
// shape, window and generation), ORed into a new filter that replaces the
// destination with its bits journaled (AGE-CREATE, AGE-WORDS).
void merge_expiring(Context& ctx, std::string_view destination,
                    const std::vector<store::KeySnapshot>& found, std::int64_t deadline,
                    bool force) {
    std::vector<const bloom::AgeFilter*> filters;
    for (const store::KeySnapshot& snapshot : found) {
        const bloom::AgeFilter* filter = snapshot.value.age_or_null();
        if (filter == nullptr ||
            (!filters.empty() && !bloom::age_aligned(*filter, *filters.front()))) {
            return ctx.out.error(errors::kMergeExpiringUnaligned);
        }
        filters.push_back(filter);
    }
    core::Result<bloom::AgeFilterRef> merged = build_new_age_filter(
        ctx, filters.front()->geometry(), [&] { return bloom::merge_age(filters); });
    if (!merged) return ctx.out.error(merged.error());
    const double rate = (*merged)->estimated_false_positive_rate();
    const double target = filters.front()->geometry().error_rate;
    if (!force && rate > target) return ctx.out.error(rate_exceeded(rate, target));
    ctx.keyspace.restore(destination, std::move(*merged),
                         {.expire_at_ms = deadline, .if_live = store::IfLive::replace});
    note_changes(ctx);
    ctx.out.ok();
}

// Merges with the keys held (a transaction of this thread: EXEC's, or one
// of its own), so no add to the destination can fall between reading it
// and replacing it. The merged filter replaces the destination whole, its
// CREATE and CHUNK records journaled as RESTORE's are: replay and replicas
// rebuild it bit for bit, whatever the sources become after.
void merge_held(Context& ctx, Args argv, std::span<const std::string_view> sources, bool force) {
    std::optional<std::vector<store::KeySnapshot>> found = live_filters(ctx, sources);
    if (!found) return ctx.out.error(errors::kNotFound);
    std::size_t base = 0;
    std::optional<std::int64_t> deadline;
    for (std::size_t i = 0; i < sources.size() && !deadline; ++i) {
        if (sources[i] == argv[1]) base = i, deadline = (*found)[i].expire_at_ms;
    }
    if (holds_expiring(*found))
        return merge_expiring(ctx, argv[1], *found, deadline.value_or(0), force);
    const std::vector<const ScalableFilter*> filters = filters_of(*found);
    bloom::MergePlan plan;
    if (const SetRefusal refusal = bloom::plan_merge(filters, base, plan);
        refusal != SetRefusal::none) {
        return ctx.out.error(refusal_text(refusal));
    }
    core::Result<FilterRef> merged = build_new_filter(
        ctx, plan.layers, [&] { return bloom::build_merge(plan, filters, ctx.config.maxmemory); });
    if (!merged) return ctx.out.error(merged.error());
    const double rate = (*merged)->estimated_false_positive_rate();
    if (!force && rate > plan.options.error_rate) {
        return ctx.out.error(rate_exceeded(rate, plan.options.error_rate));
    }
    ctx.keyspace.restore(argv[1], std::move(*merged),
                         {.expire_at_ms = deadline.value_or(0), .if_live = store::IfLive::replace});
    note_changes(ctx);
    ctx.out.ok();
}

void cmd_merge(Context& ctx, Args argv) {
    const bool force = merge_forced(argv);
    const std::span<const std::string_view> keys(argv.data() + 1, argv.size() - (force ? 2 : 1));
    store::Keyspace::Transaction held;
    if (store::ShardGates::this_thread_token() == 0) {
        try {
            held = ctx.keyspace.begin_transaction(keys);
        } catch (const std::bad_alloc&) {
            return ctx.out.error(errors::kOutOfMemory);
        }
    }
    merge_held(ctx, argv, keys.subspan(1), force);
}

std::int64_t rounded(double estimate) {
    return estimate < 9.0e18 ? static_cast<std::int64_t>(std::llround(estimate))
                             : std::int64_t{9'000'000'000'000'000'000};
}

// BF.CARD key [key ...]: one key, its estimate (a RedisBloom-scheme filter:
// its items, as RedisBloom answers); several, the estimated size of their
// union. Missing keys are empty sets.
void cmd_card(Context& ctx, Args argv) {
    if (argv.size() == 2) {
        std::uint64_t estimate = 0;
        ctx.keyspace.with_value(argv[1], [&](const store::ValueRef& value) {
            if (const bloom::AgeFilter* age = value.age_or_null()) {
                estimate = age->estimate_cardinality();  // the window's
                return;
            }
            const ScalableFilter& filter = value.filter();
            estimate = filter.scheme() == bloom::HashScheme::redisbloom
                           ? filter.items()
                           : filter.estimate_cardinality();
        });
        return ctx.out.integer(static_cast<std::int64_t>(estimate));
    }
    std::vector<store::KeySnapshot> found;
    for (std::size_t i = 1; i < argv.size(); ++i) {
        if (std::optional<store::KeySnapshot> snapshot = ctx.keyspace.get(argv[i])) {
            found.push_back(std::move(*snapshot));
        }
    }
    if (found.empty()) return ctx.out.integer(0);
    if (holds_expiring(found)) return ctx.out.error(errors::kExpiringUnsupported);
    SetRefusal refusal = SetRefusal::none;
    const double estimate = bloom::union_estimate(filters_of(found), refusal);
    if (refusal != SetRefusal::none) return ctx.out.error(refusal_text(refusal));
    ctx.out.integer(rounded(estimate));
}

// BF.INTERCARD numkeys key [key ...]: 2 to 8 keys; a missing key makes the
// intersection empty.
std::optional<std::size_t> intercard_count(Args argv) {
    std::int64_t count = 0;
    if (!core::parse_int64(argv[1], count) || count < 2 ||
        count > static_cast<std::int64_t>(bloom::kMaxEstimateFilters)) {
        return std::nullopt;
    }
    return static_cast<std::size_t>(count);
}

KeyRange intercard_keys(Args argv) {
    const std::optional<std::size_t> count = intercard_count(argv);
    if (!count || argv.size() != *count + 2) return {};
    return {2, static_cast<long>(*count) + 1, 1};
}

void cmd_intercard(Context& ctx, Args argv) {
    const std::optional<std::size_t> count = intercard_count(argv);
    if (!count) return ctx.out.error(errors::kInterCardNumKeys);
    if (argv.size() != *count + 2) return ctx.out.error(errors::kInterCardKeyCount);
    std::optional<std::vector<store::KeySnapshot>> found =
        live_filters(ctx, std::span<const std::string_view>(argv.data() + 2, *count));
    if (!found) return ctx.out.integer(0);
    if (holds_expiring(*found)) return ctx.out.error(errors::kExpiringUnsupported);
    SetRefusal refusal = SetRefusal::none;
    const double estimate = bloom::intersection_estimate(filters_of(*found), refusal);
    if (refusal != SetRefusal::none) return ctx.out.error(refusal_text(refusal));
    ctx.out.integer(rounded(estimate));
}

}  // namespace

void register_bf_set_commands(Registry& registry) {
    registry.register_handler<cmd_merge>("bf.merge");
    registry.register_key_finder("bf.merge", merge_keys);
    registry.register_handler<cmd_card>("bf.card");
    registry.register_handler<cmd_intercard>("bf.intercard");
    registry.register_key_finder("bf.intercard", intercard_keys);
}

}  // namespace bloomery::command
