#include "bloomery/bloom/bounds.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>

#include "bloomery/bloom/counting.hpp"
#include "bloomery/bloom/filter.hpp"
#include "bloomery/bloom/params.hpp"
#include "bloomery/bloom/redisbloom.hpp"

namespace bloomery::bloom {

namespace {

// The lowest error rate a layer can be sized for: ceil(-log2 p) hashes, at
// most kMaxHashes.
constexpr double kMinLayerErrorRate = 0x1p-128;

}  // namespace

std::string describe(BoundsError error) {
    switch (error) {
        case BoundsError::none:
            return "ok";
        case BoundsError::error_rate_range:
            return "error rate not in (0, 1)";
        case BoundsError::error_rate_too_small:
            return "error rate below the minimum 1e-15";
        case BoundsError::capacity_zero:
            return "capacity 0";
        case BoundsError::capacity_too_large:
            return "capacity above 2^48";
        case BoundsError::expansion_range:
            return "expansion not in [1, 32768]";
        case BoundsError::layers_range:
            return "layer count not in [1, 64]";
        case BoundsError::nonscaling_layers:
            return "nonscaling filter with more than one layer";
        case BoundsError::bits_invalid:
            return "bit count not a positive multiple of 64 (of 512 if blocked) up to 2^49";
        case BoundsError::layout_invalid:
            return "unknown layout";
        case BoundsError::hashes_range:
            return "hash count not in [1, 128]";
        case BoundsError::items_too_large:
            return "item count above 2^56";
        case BoundsError::scheme_invalid:
            return "hash scheme fields invalid";
        case BoundsError::counting_error_rate:
            return "counting filter's error rate below the minimum 1e-7";
        case BoundsError::tightening_range:
            return "tightening ratio not in (0, 1)";
    }
    return "unknown";
}

std::string_view layout_name(Layout layout) {
    switch (layout) {
        case Layout::blocked:
            return "blocked";
        case Layout::automatic:
            return "auto";
        case Layout::counting:
            return "counting";
        case Layout::blocked_1024:
            return "blocked-1024";
        case Layout::blocked_2048:
            return "blocked-2048";
        case Layout::blocked_4096:
            return "blocked-4096";
        case Layout::automatic_blocks:
            return "auto";
        default:
            return "classic";
    }
}

std::string_view scheme_name(HashScheme scheme) {
    return scheme == HashScheme::redisbloom ? "redisbloom" : "bloomery";
}

namespace {
// A layer's layout: what its bits are.
bool known_layout(Layout layout) {
    return layout == Layout::classic || blocked_layout(layout) || layout == Layout::counting;
}
// A filter's: one a filter's flags can hold (scalable_filter.cpp), the
// multi-line blocks only through automatic_blocks.
bool known_policy(Layout layout) {
    return layout == Layout::classic || layout == Layout::blocked || layout == Layout::counting ||
           automatic_policy(layout);
}

// RedisBloom chains: the options it can honour (no ENTS_IS_BITS, nothing
// unknown), NONSCALING said alike in both places, classic layers, its own
// tightening ratio.
bool valid_redisbloom_options(const FilterOptions& options) {
    if (options.tightening != kDefaultTightening) return false;
    constexpr std::uint32_t known = kRedisBloomNoRound | kRedisBloomForce64 | kRedisBloomNoScaling;
    if ((options.redisbloom_options & ~known) != 0) return false;
    if (((options.redisbloom_options & kRedisBloomNoScaling) != 0) != options.nonscaling) {
        return false;
    }
    return options.layout == Layout::classic;
}
}  // namespace

BoundsError check_error_rate(double error_rate) {
    if (!(error_rate > 0.0 && error_rate < kMaxErrorRate)) return BoundsError::error_rate_range;
    if (error_rate < kMinErrorRate) return BoundsError::error_rate_too_small;
    return BoundsError::none;
}

BoundsError check_options(const FilterOptions& options) {
    if (BoundsError e = check_error_rate(options.error_rate); e != BoundsError::none) return e;
    if (options.layout == Layout::counting && options.error_rate < kMinCountingErrorRate) {
        return BoundsError::counting_error_rate;
    }
    return check_stored_options(options);
}

BoundsError check_stored_options(const FilterOptions& options) {
    if (!(options.error_rate > 0.0 && options.error_rate < kMaxErrorRate)) {
        return BoundsError::error_rate_range;
    }
    if (options.capacity == 0) return BoundsError::capacity_zero;
    if (options.capacity > kMaxLayerCapacity) return BoundsError::capacity_too_large;
    if (options.expansion < kMinExpansion || options.expansion > kMaxExpansion) {
        return BoundsError::expansion_range;
    }
    if (!known_policy(options.layout)) return BoundsError::layout_invalid;
    if (!(options.tightening > 0.0 && options.tightening < 1.0)) {
        return BoundsError::tightening_range;
    }
    switch (options.scheme) {
        case HashScheme::bloomery:
            if (options.redisbloom_options != 0) return BoundsError::scheme_invalid;
            break;
        case HashScheme::redisbloom:
            if (!valid_redisbloom_options(options)) return BoundsError::scheme_invalid;
            break;
        default:
            return BoundsError::scheme_invalid;
    }
    return BoundsError::none;
}

bool layer_layout_fits(Layout filter_layout, std::uint32_t layer_layout) {
    if (filter_layout == Layout::counting) {
        return layer_layout == static_cast<std::uint32_t>(Layout::counting);
    }
    if (layer_layout > static_cast<std::uint32_t>(Layout::automatic_blocks)) return false;
    const auto layout = static_cast<Layout>(layer_layout);
    return layout == Layout::classic || blocked_layout(layout);
}

BoundsError check_layer(const LayerGeometry& layer, std::uint64_t items) {
    // A layer's own error rate may be far below the filter's (p·2^-64 for the
    // last layer of a scaling filter at the minimum p), so only (0, 1) here;
    // the hash count is what bounds the work per item.
    if (!(layer.error_rate > 0.0 && layer.error_rate < kMaxErrorRate)) {
        return BoundsError::error_rate_range;
    }
    if (layer.capacity == 0) return BoundsError::capacity_zero;
    if (layer.capacity > kMaxLayerCapacity) return BoundsError::capacity_too_large;
    if (!known_layout(layer.layout)) return BoundsError::layout_invalid;
    if (layer.bits == 0 || layer.bits % 64 != 0 || layer.bits > kMaxLayerBits ||
        (layer.layout != Layout::classic && layer.bits % layout_block_bits(layer.layout) != 0)) {
        return BoundsError::bits_invalid;
    }
    if (layer.hashes == 0 || layer.hashes > kMaxHashes) return BoundsError::hashes_range;
    if (items > kMaxLayerItems) return BoundsError::items_too_large;
    switch (layer.scheme) {
        case HashScheme::bloomery:
            if (layer.redisbloom_bpe != 0 || layer.redisbloom_n2 != 0) {
                return BoundsError::scheme_invalid;
            }
            break;
        case HashScheme::redisbloom:
            // RedisBloom's own check of a loaded sub-filter: its hash count
            // follows from its bpe, and 2^n2 (when used) fits the array.
            if (layer.layout != Layout::classic || !(layer.redisbloom_bpe > 0) ||
                !std::isfinite(layer.redisbloom_bpe) ||
                redisbloom_hashes(layer.redisbloom_bpe) != layer.hashes ||
                layer.redisbloom_n2 > 63 ||
                (layer.redisbloom_n2 != 0 &&
                 layer.bits < (std::uint64_t{1} << layer.redisbloom_n2))) {
                return BoundsError::scheme_invalid;
            }
            break;
        default:
            return BoundsError::scheme_invalid;
    }
    return BoundsError::none;
}

namespace {

// At most kMaxAutoOverhead times the bits of RedisBloom's own sub-filter for
// this capacity and rate (bloom_init with the options BF.RESERVE gives it).
bool within_budget(const LayerGeometry& layer, std::uint64_t capacity, double error_rate) {
    const std::optional<LayerGeometry> reference =
        redisbloom_layer(capacity, error_rate, kRedisBloomDefaultOptions);
    return reference && static_cast<double>(layer.bits) <=
                            kMaxAutoOverhead * static_cast<double>(reference->bits);
}

// Counting layers: 128-cell blocks, sized for 10 % below the requested rate.
// The model is further from the measured rate with 128 cells to a block
// than with 512 bits (an item's k cells share a cell more often): sized with
// blocked's 3 % margin, a full filter measured 1.02× the rate at 0.1 %; with
// 10 %, 0.94× at 1 % and 0.97× at 0.1 %, for 2 % more cells. Below
// kMinCountingErrorRate the zero geometry, which check_layer() and
// next_layer() refuse.
LayerGeometry sized_counting(std::uint64_t capacity, double error_rate) {
    if (!(error_rate >= kMinCountingErrorRate)) return LayerGeometry{};
    constexpr double kCountingMargin = 0.9;
    const CountingSizing sizing = counting_sizing(error_rate * kCountingMargin);
    const std::uint64_t cells = counting_cells(capacity, sizing.cells_per_item);
    return LayerGeometry{capacity, error_rate, cells * kCellBits, sizing.hashes, Layout::counting};
}

// `requested`: classic, or a blocked layout (the block size it is tried
// with); counting goes to sized_counting.
LayerGeometry sized(std::uint64_t capacity, double error_rate, Layout requested) {
    if (requested == Layout::counting) return sized_counting(capacity, error_rate);
    // Below 1e-9 blocking would cost more than kMaxBlockedOverhead (1.84×
    // the classic bits at 1e-9, and growing), so such layers are classic
    // without asking; it also keeps the sizing away from rates that
    // underflow (a loaded layer at 5e-324 halves to 0 when the filter grows).
    constexpr double kMinBlockedErrorRate = 1e-9;
    const std::uint64_t textbook_bits = optimal_bits(capacity, error_rate);
    const LayerGeometry classic{capacity, error_rate, textbook_bits, optimal_hashes(error_rate),
                                Layout::classic};
    // Layers under kMappedLayerBytes stay classic too: they sit in a few
    // cache lines or in L1/L2, so blocking saves no miss and only costs bits
    // (a default filter would grow from 224 to 256 bytes a key).
    if (requested == Layout::classic || error_rate < kMinBlockedErrorRate ||
        textbook_bits / 8 < kMappedLayerBytes) {
        return classic;
    }
    // Sized for 3 % below the requested rate: the model assumes ideal
    // in-block positions, ours come from one 64-bit hash and land a little
    // above the model, so the margin keeps the measured rate within p for a
    // fraction of a percent more bits (tests/bench/README.md).
    constexpr double kBlockedMargin = 0.97;
    const std::uint64_t block = layout_block_bits(requested);
    const BlockedSizing sizing = blocked_sizing(error_rate * kBlockedMargin, block);
    if (!(sizing.bits_per_item <= kMaxBlockedOverhead * bits_per_item(error_rate))) return classic;
    const LayerGeometry blocked{capacity, error_rate,
                                blocked_bits(capacity, sizing.bits_per_item, block), sizing.hashes,
                                requested};
    return blocked;
}

// Layout::automatic: blocked as above where that is within kMaxAutoOverhead
// of RedisBloom's bits, else classic sized to the rate (params.hpp:
// classic_sizing, with the same kind of margin for the hashing's distance
// from the model) where that is, else RedisBloom's own sizing (only p in
// about (0.35, 0.46), where a whole k misses p by a few percent).
LayerGeometry sized_classic_within_budget(std::uint64_t capacity, double error_rate) {
    constexpr double kClassicMargin = 0.99;
    const ClassicSizing sizing = classic_sizing(error_rate * kClassicMargin);
    const LayerGeometry exact{capacity, error_rate, classic_bits(capacity, sizing.bits_per_item),
                              sizing.hashes, Layout::classic};
    if (exact.hashes <= kMaxHashes && within_budget(exact, capacity, error_rate)) return exact;
    return sized(capacity, error_rate, Layout::classic);
}

// Layout::automatic: one-line blocks, else classic.
LayerGeometry sized_automatically(std::uint64_t capacity, double error_rate) {
    const LayerGeometry blocked = sized(capacity, error_rate, Layout::blocked);
    if (blocked.layout == Layout::blocked && within_budget(blocked, capacity, error_rate)) {
        return blocked;
    }
    return sized_classic_within_budget(capacity, error_rate);
}

// Layout::automatic_blocks: the smallest block within the budget, else
// classic as under automatic. A block of more lines costs fewer extra bits
// (its load varies less), so where one line is over the budget a bigger
// block may not be.
LayerGeometry sized_automatically_in_blocks(std::uint64_t capacity, double error_rate) {
    for (const Layout layout :
         {Layout::blocked, Layout::blocked_1024, Layout::blocked_2048, Layout::blocked_4096}) {
        const LayerGeometry blocked = sized(capacity, error_rate, layout);
        if (blocked.layout != layout) break;  // small or low-rate layers: classic
        if (within_budget(blocked, capacity, error_rate)) return blocked;
    }
    return sized_classic_within_budget(capacity, error_rate);
}

// A sizing (a few microseconds: classic_sizing's bisection, RedisBloom's
// reference sizing) for each new filter would cost more than creating a
// small one: filters of one server use a handful of (capacity, rate,
// layout), kept here as blocked_sizing keeps its rates.
LayerGeometry cached_size(std::uint64_t capacity, double error_rate, Layout layout) {
    struct Entry {
        std::uint64_t capacity;
        double error_rate;
        Layout layout;
        LayerGeometry geometry;
    };
    const auto matches = [&](const Entry& e) {
        return e.capacity == capacity && e.error_rate == error_rate && e.layout == layout;
    };
    thread_local Entry last{0, 0.0, Layout::classic, {}};
    if (matches(last)) return last.geometry;
    static std::mutex mutex;
    static std::array<Entry, 64> cache{};
    static std::size_t next = 0;
    {
        std::lock_guard lock(mutex);
        for (const Entry& entry : cache) {
            if (matches(entry)) {
                last = entry;
                return entry.geometry;
            }
        }
    }
    last = Entry{capacity, error_rate, layout, size_layer(capacity, error_rate, layout)};
    std::lock_guard lock(mutex);
    cache[next] = last;
    next = (next + 1) % cache.size();
    return last.geometry;
}

}  // namespace

LayerGeometry size_layer(std::uint64_t capacity, double error_rate, Layout layout) {
    switch (layout) {
        case Layout::automatic:
            return sized_automatically(capacity, error_rate);
        case Layout::automatic_blocks:
            return sized_automatically_in_blocks(capacity, error_rate);
        default:
            return sized(capacity, error_rate, layout);
    }
}

LayerGeometry first_layer(const FilterOptions& options) {
    // p·(1 − r): at r = 0.5 exactly RedisBloom's p·0.5, bit for bit.
    const double error_rate =
        options.nonscaling ? options.error_rate : options.error_rate * (1.0 - options.tightening);
    if (options.scheme == HashScheme::redisbloom) {
        // Within check_options() bloom_init cannot fail; if it did, the
        // zero geometry fails check_layer() like any oversized layer.
        return redisbloom_layer(options.capacity, error_rate, options.redisbloom_options)
            .value_or(LayerGeometry{});
    }
    return cached_size(options.capacity, error_rate, options.layout);
}

std::optional<LayerGeometry> next_layer(const FilterOptions& options, const LayerGeometry& last) {
    const std::uint64_t expansion = options.expansion;
    if (last.capacity > kMaxLayerCapacity / expansion) return std::nullopt;
    if (options.scheme == HashScheme::redisbloom) {
        // RedisBloom's rule: the last sub-filter's entries (which a 1.x chain's
        // power-of-two rounding may have raised) times the expansion, its error
        // halved, sized by bloom_init with the chain's options.
        std::optional<LayerGeometry> next =
            redisbloom_layer(last.capacity * expansion, last.error_rate * options.tightening,
                             options.redisbloom_options);
        if (!next || check_layer(*next, 0) != BoundsError::none) return std::nullopt;
        return next;
    }
    const std::uint64_t capacity = last.capacity * expansion;
    const double error_rate = last.error_rate * options.tightening;
    if (!(error_rate >= kMinLayerErrorRate)) return std::nullopt;
    const LayerGeometry next = cached_size(capacity, error_rate, options.layout);
    if (next.bits == 0 || next.bits > kMaxLayerBits || next.hashes > kMaxHashes) {
        return std::nullopt;
    }
    return next;
}

std::uint64_t filter_bytes(std::span<const LayerGeometry> layers) {
    std::uint64_t total = 0;
    for (const LayerGeometry& layer : layers) {
        const std::uint64_t bytes = layer.bits / 8;
        if (bytes > std::numeric_limits<std::uint64_t>::max() - total) {
            return std::numeric_limits<std::uint64_t>::max();
        }
        total += bytes;
    }
    return total;
}

ScaleReach max_scaled_capacity(const FilterOptions& options, std::span<const LayerGeometry> layers,
                               std::uint64_t max_filter_bytes) {
    ScaleReach reach;
    // Below kMaxLayers · kMaxLayerCapacity < 2^63: no overflow.
    for (const LayerGeometry& layer : layers) reach.capacity += layer.capacity;
    if (layers.empty() || options.nonscaling) return reach;
    std::uint64_t bytes = filter_bytes(layers);
    LayerGeometry last = layers.back();
    for (std::size_t count = layers.size();; ++count) {
        if (count >= kMaxLayers) {
            reach.stop = GrowthStop::layers;
            return reach;
        }
        const std::optional<LayerGeometry> next = next_layer(options, last);
        if (!next) {
            reach.stop = GrowthStop::bounds;
            return reach;
        }
        if (max_filter_bytes != 0 && bytes + next->bits / 8 > max_filter_bytes) {
            reach.stop = GrowthStop::filter_bytes;
            return reach;
        }
        bytes += next->bits / 8;
        reach.capacity += next->capacity;
        last = *next;
    }
}

}  // namespace bloomery::bloom
