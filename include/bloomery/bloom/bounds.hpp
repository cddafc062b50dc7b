#pragma once
// The one table of what a filter may be. Every path that creates a filter
// (BF.RESERVE, BF.INSERT, BF.ADD's auto-create, growth of a scaling filter,
// BF.LOADCHUNK) and every path that loads one (the snapshot reader) checks
// against these bounds, so whatever the server accepts it can save, load,
// dump and restore, and whatever the loader refuses the server never creates.
//
// Why these numbers:
// - Error rate >= 1e-15: the tightest layer of a scaling filter has error
//   p·2^-(layers) at the default tightening ratio, so its hash count is
//   ceil(-log2 p) + layers <= 50 + 64 = 114 <= kMaxHashes. (RedisBloom
//   accepts any p in (0, 1); 1e-300 asks for 998 hash functions per item,
//   which nobody means.) A smaller ratio reaches kMaxHashes sooner: growth
//   then stops (next_layer) before a layer would need more.
// - Tightening ratio in (0, 1), valkey-bloom's range; the RedisBloom scheme
//   has only RedisBloom's 0.5.
// - Hashes <= 128, layers <= 64: follow from the above.
// - Capacity <= 2^48 and items <= 2^56 per layer: a layer at p close to 1
//   needs almost no bits per item, so memory alone does not bound them; 64
//   layers sum below 2^63, so BF.INFO's signed integers never overflow.
// - Expansion 1..32768: RedisBloom's bf-expansion-factor range.
// - Bits per layer: a positive multiple of 64 (whole words), of the block
//   (512 to 4,096 bits) for a blocked layer. The bytes of a
//   whole filter are bounded by the server's --max-filter-bytes, a policy
//   value checked by the command layer against filter_bytes() below before
//   anything is allocated.
//
// All functions are pure and thread-safe.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "bloomery/bloom/params.hpp"

namespace bloomery::bloom {

inline constexpr double kMinErrorRate = 1e-15;  // inclusive
inline constexpr double kMaxErrorRate = 1.0;    // exclusive
inline constexpr std::uint32_t kMaxHashes = 128;
inline constexpr std::size_t kMaxLayers = 64;
inline constexpr std::uint64_t kMaxLayerCapacity = std::uint64_t{1} << 48;
inline constexpr std::uint64_t kMaxLayerItems = std::uint64_t{1} << 56;
inline constexpr std::uint32_t kMinExpansion = 1;
inline constexpr std::uint32_t kMaxExpansion = 32768;
// RedisBloom's ERROR_TIGHTENING_RATIO, the default ratio r (first_layer).
inline constexpr double kDefaultTightening = 0.5;
// The largest bit array one layer may have (2^46 bytes = 64 TiB): beyond any
// machine, and small enough that byte counts of 64 layers never overflow.
inline constexpr std::uint64_t kMaxLayerBits = std::uint64_t{1} << 49;

// How a layer places an item's k bits (params.hpp has the sizing of each).
//   classic: anywhere in the bit array, k cache misses per lookup in a big
//            filter; the bits RedisBloom's sizing gives.
//   blocked: all k in one 512-bit block (one cache line), one miss per
//            lookup, for more bits at the same error rate (Putze, Sanders,
//            Singler 2007: +4 % at 1 %, +17 % at 0.01 %). A blocked filter's
//            layers stay classic when they are small (under
//            kMappedLayerBytes: in cache anyway) or their error rate so low
//            that blocking would cost more than kMaxBlockedOverhead times
//            the classic bits.
//   automatic: a filter's policy, never a layer's. Each layer is blocked
//            where that costs at most kMaxAutoOverhead times the bits of
//            RedisBloom's sub-filter of the same capacity and error rate (and
//            `blocked` would block it); else classic sized to its rate
//            (params.hpp: classic_sizing) where that is within the same
//            bound; else classic with RedisBloom's sizing (only rates in about
//            (0.35, 0.46), where no whole k meets the rate within 2 %). So a
//            filter never takes more than 2 % more memory than RedisBloom's
//            for the same BF.RESERVE. The rule is part of the format: layers
//            added by growth (live, on replay, on a replica) follow it as
//            written here, so a different rule needs a new Layout value.
//   counting: cells of 4-bit counters instead of bits, blocked as `blocked`
//            is (128 cells to a 512-bit block), so items can be deleted
//            (counting.hpp). A filter's policy and the layout of every one
//            of its layers; its bits are 4 per cell.
//   blocked_1024, blocked_2048, blocked_4096: all k in one block of 2, 4
//            or 8 adjacent cache lines (1,024, 2,048 or 4,096 bits), sized
//            by the same model as `blocked` (params.hpp); the whole block is
//            prefetched, so a lookup still costs about one random access,
//            for fewer extra bits than one line: +1.7 % at 1 % with 1,024
//            bits. Only automatic_blocks picks them.
//   automatic_blocks: a filter's policy, never a layer's: automatic's rule
//            with those blocks too. Each layer takes the smallest block
//            among 512, 1,024, 2,048 and 4,096 bits whose bits are within
//            kMaxAutoOverhead of RedisBloom's (where `blocked` would block
//            it: big enough, rate not too low), else classic as under
//            automatic. What LAYOUT AUTO and the default create; filters
//            made under `automatic` keep its rule as they grow.
enum class Layout : std::uint8_t {
    classic = 0,
    blocked = 1,
    automatic = 2,
    counting = 3,
    blocked_1024 = 4,
    blocked_2048 = 5,
    blocked_4096 = 6,
    automatic_blocks = 7,
};
inline constexpr double kMaxBlockedOverhead = 1.5;
inline constexpr double kMaxAutoOverhead = 1.02;
// "classic" / "blocked" / "auto" / "counting" / "blocked-1024" /
// "blocked-2048" / "blocked-4096" ("auto" for automatic_blocks too)
std::string_view layout_name(Layout layout);
// Bits in one block of a layer's layout: 512 for blocked (and counting's
// 128 cells), 1,024 / 2,048 / 4,096 for the multi-line blocks, 0 for
// classic and the policies.
inline std::uint64_t layout_block_bits(Layout layout) {
    switch (layout) {
        case Layout::blocked:
        case Layout::counting:
            return kBlockBits;
        case Layout::blocked_1024:
            return 1024;
        case Layout::blocked_2048:
            return 2048;
        case Layout::blocked_4096:
            return 4096;
        default:
            return 0;
    }
}
// A layer layout whose k bits lie in one block of bits (not counting).
inline bool blocked_layout(Layout layout) {
    return layout == Layout::blocked || layout == Layout::blocked_1024 ||
           layout == Layout::blocked_2048 || layout == Layout::blocked_4096;
}
// The automatic policies (their rules: Layout).
inline bool automatic_policy(Layout layout) {
    return layout == Layout::automatic || layout == Layout::automatic_blocks;
}

// How a filter turns an item into bit positions, fixed when it is created
// and kept with it everywhere it goes (snapshots, journal, replicas, dumps).
//   bloomery:   MurmurHash3 x64_128, enhanced double hashing, fast range
//               (hash.hpp), bloomery's sizing (params.hpp) and layouts.
//   redisbloom: RedisBloom 2.x's, exactly (redisbloom.hpp): MurmurHash64A
//               double hashing reduced modulo the bit count, its sizing
//               per sub-filter and its scaling rule, so a filter migrated
//               from RedisBloom keeps every bit and answers as it did.
//               Its layers are classic (probes over the whole array).
enum class HashScheme : std::uint8_t { bloomery = 0, redisbloom = 1 };
// "bloomery" / "redisbloom"
std::string_view scheme_name(HashScheme scheme);

struct FilterOptions {
    double error_rate = 0.01;
    std::uint64_t capacity = 100;
    std::uint32_t expansion = 2;
    bool nonscaling = false;
    Layout layout = Layout::classic;  // what new layers use (when it pays), or automatic
    HashScheme scheme = HashScheme::bloomery;
    // RedisBloom scheme only: the chain's option word as RedisBloom keeps it
    // (redisbloom.hpp: kRedisBloomNoRound | kRedisBloomForce64 |
    // kRedisBloomNoScaling); 0 for bloomery's scheme.
    std::uint32_t redisbloom_options = 0;
    // The ratio r between a layer's error rate and the one before it
    // (first_layer); kept by a NONSCALING filter too, which never uses it.
    double tightening = kDefaultTightening;
};

// One layer's geometry: what it was sized for and what it is.
struct LayerGeometry {
    std::uint64_t capacity = 0;
    double error_rate = 0;
    std::uint64_t bits = 0;
    std::uint32_t hashes = 0;
    Layout layout = Layout::classic;  // a layer's layout, never a policy (automatic*)
    HashScheme scheme = HashScheme::bloomery;
    // RedisBloom scheme only (0 otherwise), kept verbatim so a dump gives
    // back RedisBloom's header byte for byte: its bits per entry (`bpe`, from
    // which RedisBloom derived `hashes`) and `n2`: when non-zero, probes are
    // reduced modulo 2^n2 instead of modulo `bits` (filters RedisBloom 1.x
    // sized to powers of two).
    double redisbloom_bpe = 0;
    std::uint8_t redisbloom_n2 = 0;
};

// Why a set of parameters is refused; `describe` words it for logs and the
// snapshot reader (the command layer has its own RedisBloom texts).
enum class BoundsError {
    none,
    error_rate_range,      // not in (0, 1), or NaN
    error_rate_too_small,  // in (0, kMinErrorRate)
    capacity_zero,
    capacity_too_large,
    expansion_range,
    layers_range,
    nonscaling_layers,  // a NONSCALING filter with more than one layer
    bits_invalid,    // zero, not a multiple of 64 (of the block if blocked), or above kMaxLayerBits
    layout_invalid,  // not a known Layout (automatic: options only)
    hashes_range,
    items_too_large,
    scheme_invalid,       // an unknown scheme, RedisBloom options it cannot honour
                          // (a tightening ratio other than 0.5 among them), or a
                          // RedisBloom layer whose bpe, hashes and n2 disagree
    tightening_range,     // tightening ratio not in (0, 1), or NaN
    counting_error_rate,  // a counting filter below kMinCountingErrorRate
};
std::string describe(BoundsError error);

BoundsError check_error_rate(double error_rate);
// Options of a filter to create (every command path).
BoundsError check_options(const FilterOptions& options);
// Options of a stored filter (snapshot loader, BF.LOADCHUNK, RDB import): the same bounds
// except the minimum error rate, so filters written by earlier versions with
// a smaller one still load. Their layers are checked by check_layer(), and
// growth stops (next_layer() fails) before a layer would leave the bounds.
BoundsError check_stored_options(const FilterOptions& options);
// Whether a stored layer's layout (a number read from a file) may belong to
// a filter of `filter_layout`: classic or blocked (any block size), or
// counting in a counting filter, whose layers are all counting.
bool layer_layout_fits(Layout filter_layout, std::uint32_t layer_layout);
// A layer as stored (loaders): geometry and item count.
BoundsError check_layer(const LayerGeometry& layer, std::uint64_t items);

// The first layer of a new filter, derived from its options, sized by the
// filter's scheme. A NONSCALING filter's has error p. A scaling filter's
// has p·(1 − r) and layer i p·(1 − r)·r^i (next_layer), so the error rates
// of all its layers, however many, sum to less than p, the rate the filter
// promises, for every r in (0, 1); at r = 0.5 these are RedisBloom's p/2,
// p/4, ... (valkey-bloom gives layer i p·r^i, which sums to p/(1 − r)).
// Precondition: check_options(options) == none.
LayerGeometry first_layer(const FilterOptions& options);
// The layer a scaling filter adds after `last`: capacity × expansion, error
// × r, sized by the filter's scheme. Nothing if it would leave the bounds
// (capacity, bits or hashes too large, or an error rate below 2^-128, which
// no kMaxHashes hashes can reach).
std::optional<LayerGeometry> next_layer(const FilterOptions& options, const LayerGeometry& last);

// The bloomery-scheme layer for this capacity, rate and layout (or
// policy), computed afresh. first_layer() and next_layer() give the same
// from a cache of recent sizings (one per distinct capacity, rate and
// layout), as sizing one costs far more than creating a small filter.
LayerGeometry size_layer(std::uint64_t capacity, double error_rate, Layout layout);

// Bytes the bit arrays of these layers take (the quantity --max-filter-bytes
// bounds). Saturates instead of overflowing.
std::uint64_t filter_bytes(std::span<const LayerGeometry> layers);

// Why a filter can grow no further (max_scaled_capacity).
enum class GrowthStop {
    nonscaling,    // NONSCALING: one layer, ever
    layers,        // kMaxLayers layers
    bounds,        // next_layer() refuses: capacity, bits or hashes out of bounds
    filter_bytes,  // the next layer would pass max_filter_bytes
};

// How far a filter can scale: the total capacity of its layers once it has
// grown as far as it can, and what stops it there.
struct ScaleReach {
    std::uint64_t capacity = 0;
    GrowthStop stop = GrowthStop::nonscaling;
};

// The filter whose layers are `layers` (at least one: a filter's layers, or
// {first_layer(options)} for a filter yet to be created), grown layer by
// layer with next_layer() as the live filter grows: until kMaxLayers, until
// next_layer() refuses, or until the bit arrays of all layers would pass
// `max_filter_bytes` (0: no limit; the check growth makes, filter_bytes()).
// At most kMaxLayers sizings; --maxmemory is not counted (it changes).
ScaleReach max_scaled_capacity(const FilterOptions& options, std::span<const LayerGeometry> layers,
                               std::uint64_t max_filter_bytes);

}  // namespace bloomery::bloom
