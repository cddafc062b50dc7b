#include "bloomery/bloom/dump.hpp"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "bloomery/bloom/params.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "dump_location.hpp"
#include "little_endian.hpp"

namespace bloomery::bloom {

// bloomery's header and chunks: dump.hpp.

namespace {

using dump_location::chunk_length;
using dump_location::locate;
using dump_location::locate_touched;
using dump_location::Location;
using little_endian::put_f64;
using little_endian::put_u32;
using little_endian::put_u64;
using little_endian::Reader;
using little_endian::to_le;

constexpr char kMagic[8] = {'B', 'L', 'M', 'D', 'U', 'M', 'P', '1'};
constexpr std::uint32_t kVersion = 2;
constexpr std::uint32_t kFlagNonscaling = 1;
constexpr std::uint32_t kFlagBlocked = 2;
constexpr std::uint32_t kFlagAutomatic = 4;
constexpr std::uint32_t kFlagTightening = 8;
constexpr std::uint32_t kFlagCounting = 16;
constexpr std::uint32_t kLayoutFlags = kFlagBlocked | kFlagAutomatic | kFlagCounting;
constexpr std::size_t kFixedHeaderBytes = 8 + 4 + 8 + 8 + 4 + 4 + 4;  // before the layers
constexpr std::size_t kLayerBytesV1 = 8 + 8 + 8 + 4 + 8;
constexpr std::size_t kLayerBytes = kLayerBytesV1 + 4;
constexpr std::size_t kChecksumBytes = 8;
constexpr std::uint64_t kChecksumSeed = 0;

std::uint64_t chunk_checksum(std::uint64_t offset, std::string_view payload) {
    struct StateDeleter {
        void operator()(XXH64_state_t* s) const { XXH64_freeState(s); }
    };
    std::unique_ptr<XXH64_state_t, StateDeleter> state(XXH64_createState());
    if (!state) throw std::bad_alloc();
    const std::uint64_t le_offset = to_le(offset);
    XXH64_reset(state.get(), kChecksumSeed);
    XXH64_update(state.get(), &le_offset, sizeof le_offset);
    XXH64_update(state.get(), payload.data(), payload.size());
    return XXH64_digest(state.get());
}

// ---- RedisBloom's format ----

constexpr std::size_t kRedisBloomHeaderBytes = 8 + 4 + 4 + 4;
constexpr std::size_t kRedisBloomLinkBytes = 8 + 8 + 8 + 8 + 8 + 4 + 8 + 1;
// RedisBloom's own error texts (sb.c, rebloom.c), for what it would refuse too.
constexpr const char* kBadData = "received bad data";
constexpr const char* kNoLink = "invalid offset - no link found";
constexpr const char* kTooBig = "invalid chunk - Too big for current filter";

void put_u8(std::string& out, std::uint8_t v) {
    out.push_back(static_cast<char>(v));
}

// A payload shaped as RedisBloom's header: not bloomery's magic, and exactly
// as long as the sub-filter count it names says. Anything else is judged as
// bloomery's format (and refused as such).
bool looks_like_redisbloom_header(std::string_view bytes) {
    if (bytes.size() < kRedisBloomHeaderBytes + kRedisBloomLinkBytes) return false;
    if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0) return false;
    Reader in(bytes);
    in.skip(8);
    const std::uint64_t nfilters = in.u32();
    return nfilters >= 1 &&
           bytes.size() == kRedisBloomHeaderBytes + nfilters * kRedisBloomLinkBytes;
}

std::string encode_redisbloom_header(const ScalableFilter& filter) {
    const std::size_t n = filter.num_layers();
    const FilterOptions options = filter.options();
    // Each layer's count read once, so `size` is the sum of what is written.
    std::vector<std::uint64_t> items(n);
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += items[i] = filter.layer(i).items();
    std::string out;
    out.reserve(kRedisBloomHeaderBytes + n * kRedisBloomLinkBytes);
    put_u64(out, total);
    put_u32(out, static_cast<std::uint32_t>(n));
    put_u32(out, options.redisbloom_options);
    put_u32(out, options.expansion);
    for (std::size_t i = 0; i < n; ++i) {
        const LayerGeometry g = filter.layer(i).geometry();
        put_u64(out, g.bits / 8);
        put_u64(out, g.bits);
        put_u64(out, items[i]);
        put_f64(out, g.error_rate);
        put_f64(out, g.redisbloom_bpe);
        put_u32(out, g.hashes);
        put_u64(out, g.capacity);
        put_u8(out, g.redisbloom_n2);
    }
    return out;
}

// The chain's own fields, before its sub-filters.
struct RedisBloomChain {
    std::uint64_t size = 0;  // items in all sub-filters
    std::uint32_t nfilters = 0;
    std::uint32_t options = 0;
    std::uint32_t growth = 0;
};

// SB_NewChainFromHeader's checks of the chain's fields and a sub-filter
// count bloomery keeps; then a header with the options they give, its
// sub-filters still to read and its requested rate and capacity still to
// derive from them.
core::Result<DumpHeader> redisbloom_chain_header(const RedisBloomChain& chain) {
    if (chain.nfilters > kMaxLayers) {
        return core::Error{"RedisBloom filter of " + std::to_string(chain.nfilters) +
                           " sub-filters, more than the " + std::to_string(kMaxLayers) +
                           " bloomery keeps"};
    }
    constexpr std::uint32_t kRedisBloomKnown =
        kRedisBloomNoRound | kRedisBloomEntsIsBits | kRedisBloomForce64 | kRedisBloomNoScaling;
    if ((chain.options & ~kRedisBloomKnown) != 0) return core::Error{kBadData};
    if ((chain.options & kRedisBloomEntsIsBits) != 0) {
        return core::Error{"unsupported RedisBloom filter options " +
                           std::to_string(chain.options) + " (ENTS_IS_BITS)"};
    }
    DumpHeader header;
    header.options.scheme = HashScheme::redisbloom;
    header.options.redisbloom_options = chain.options;
    header.options.nonscaling = (chain.options & kRedisBloomNoScaling) != 0;
    header.options.expansion = chain.growth;
    header.options.layout = Layout::classic;
    header.layers.resize(chain.nfilters);
    header.items.resize(chain.nfilters);
    return header;
}

// bloom_validate_integrity of a sub-filter whose link says it takes
// `link_bytes` of bit array.
bool redisbloom_link_is_sound(const LayerGeometry& layer, std::uint64_t link_bytes) {
    return layer.error_rate > 0 && layer.error_rate < 1.0 && layer.redisbloom_n2 <= 63 &&
           (layer.redisbloom_n2 == 0 || layer.bits >= (std::uint64_t{1} << layer.redisbloom_n2)) &&
           layer.bits != 0 && link_bytes <= std::numeric_limits<std::uint64_t>::max() / 8 &&
           layer.bits == link_bytes * 8 && std::isfinite(layer.redisbloom_bpe) &&
           redisbloom_hashes(layer.redisbloom_bpe) == layer.hashes;
}

// Sub-filter `index` (53 bytes) into the header: RedisBloom's integrity
// check, a chain size that still fits 64 bits after the `items_before` of
// the sub-filters before it, then bloomery's bounds.
core::Status read_redisbloom_link(Reader& in, std::uint32_t index, std::uint64_t items_before,
                                  DumpHeader& header) {
    const std::uint64_t link_bytes = in.u64();
    LayerGeometry& layer = header.layers[index];
    std::uint64_t& items = header.items[index];
    layer.bits = in.u64();
    items = in.u64();
    layer.error_rate = in.f64();
    layer.redisbloom_bpe = in.f64();
    layer.hashes = in.u32();
    layer.capacity = in.u64();
    layer.redisbloom_n2 = in.u8();
    layer.scheme = HashScheme::redisbloom;
    layer.layout = Layout::classic;
    if (!redisbloom_link_is_sound(layer, link_bytes) ||
        items > std::numeric_limits<std::uint64_t>::max() - items_before) {
        return core::Error{kBadData};
    }
    if (const BoundsError e = check_layer(layer, items); e != BoundsError::none) {
        return core::Error{"RedisBloom sub-filter " + std::to_string(index) +
                           " is outside what bloomery keeps: " + describe(e)};
    }
    return {};
}

// RedisBloom keeps no requested rate or capacity: the first sub-filter's
// say what they were (its error is the requested one halved on a scaling
// chain). Then the bounds of a stored filter's options.
core::Status derive_redisbloom_options(DumpHeader& header) {
    const LayerGeometry& first = header.layers.front();
    header.options.capacity = first.capacity;
    header.options.error_rate =
        header.options.nonscaling ? first.error_rate : first.error_rate / 0.5;
    if (const BoundsError e = check_stored_options(header.options); e != BoundsError::none) {
        return core::Error{"RedisBloom filter is outside what bloomery keeps: " + describe(e)};
    }
    if (header.options.nonscaling && header.layers.size() != 1) {
        return core::Error{"RedisBloom filter is outside what bloomery keeps: " +
                           describe(BoundsError::nonscaling_layers)};
    }
    return {};
}

// RedisBloom's checks of a header (SB_NewChainFromHeader,
// bloom_validate_integrity, SB_ValidateIntegrity), then bloomery's bounds,
// all before anything is allocated. The caller has checked the length
// (looks_like_redisbloom_header): at least one sub-filter, all present.
core::Result<DumpHeader> parse_redisbloom_header(std::string_view bytes) {
    Reader in(bytes);
    RedisBloomChain chain;
    chain.size = in.u64();
    chain.nfilters = in.u32();
    chain.options = in.u32();
    chain.growth = in.u32();
    core::Result<DumpHeader> header = redisbloom_chain_header(chain);
    if (!header) return header;
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < chain.nfilters; ++i) {
        if (core::Status link = read_redisbloom_link(in, i, total, *header); !link) {
            return link.failure();
        }
        total += header->items[i];
    }
    if (total != chain.size) return core::Error{kBadData};  // SB_ValidateIntegrity
    if (core::Status options = derive_redisbloom_options(*header); !options) {
        return options.failure();
    }
    return header;
}

// The bytes [offset, offset + length) of a layer, little-endian.
std::string layer_bytes(const BloomLayer& layer, std::uint64_t offset, std::uint64_t length) {
    const std::uint64_t first_word = offset / 8;
    const std::uint64_t last_word = (offset + length + 7) / 8;
    std::vector<std::uint64_t> buffer(last_word - first_word);
    layer.copy_words(first_word, buffer.size(), buffer.data());
    for (std::uint64_t& w : buffer) w = to_le(w);
    return {reinterpret_cast<const char*>(buffer.data()) + offset % 8, length};
}

DumpChunk redisbloom_chunk(const ScalableFilter& filter, std::int64_t iter,
                           std::size_t max_chunk_bytes) {
    if (iter < 1) return DumpChunk{0, {}};
    auto offset = static_cast<std::uint64_t>(iter - 1);
    const std::optional<Location> loc = locate_touched(filter, offset);
    if (!loc) return DumpChunk{0, {}};
    const std::uint64_t limit = std::max<std::uint64_t>(1, max_chunk_bytes);
    const std::uint64_t length = chunk_length(filter, *loc, limit);
    DumpChunk chunk;
    chunk.data = layer_bytes(filter.layer(loc->layer), loc->layer_offset, length);
    chunk.next_iter = static_cast<std::int64_t>(offset + length + 1);
    return chunk;
}

// SBChain_LoadEncodedChunk's checks: the chunk ends at byte iter - 1 and
// lies within one sub-filter.
core::Result<ChunkTarget> check_redisbloom_chunk(const ScalableFilter& filter, std::int64_t iter,
                                                 std::string_view chunk) {
    if (iter <= 0 || static_cast<std::uint64_t>(iter) < chunk.size()) return core::Error{kBadData};
    const auto end = static_cast<std::uint64_t>(iter);
    if (end - chunk.size() < 1) return core::Error{kNoLink};
    const std::optional<Location> loc = locate(filter, end - chunk.size() - 1);
    if (!loc) return core::Error{kNoLink};
    if (chunk.size() > loc->layer_bytes - loc->layer_offset) return core::Error{kTooBig};
    return ChunkTarget{loc->layer, loc->layer_offset, chunk};
}

// ---- bloomery's format ----

constexpr const char* kInvalidHeader = "invalid dump header";

// The fields after the version: the options, their flags and the layer
// count. The same bounds every other path uses (bounds.hpp): a dump this
// server could not have written is refused, so a restored filter can always
// be saved and loaded again. The count must also agree with the header's
// length, so the layers can then be read without a bounds check.
core::Result<DumpHeader> read_bloomery_options(Reader& in, std::uint32_t version,
                                               std::size_t body_bytes) {
    const std::size_t layer_bytes = version == 1 ? kLayerBytesV1 : kLayerBytes;
    const std::uint32_t known_flags =
        version == 1 ? kFlagNonscaling : kFlagNonscaling | kLayoutFlags | kFlagTightening;
    DumpHeader header;
    header.options.error_rate = in.f64();
    header.options.capacity = in.u64();
    header.options.expansion = in.u32();
    const std::uint32_t flags = in.u32();
    header.options.nonscaling = (flags & kFlagNonscaling) != 0;
    const bool both = (flags & (kFlagBlocked | kFlagAutomatic)) == (kFlagBlocked | kFlagAutomatic);
    header.options.layout = both                            ? Layout::automatic_blocks
                            : (flags & kFlagBlocked) != 0   ? Layout::blocked
                            : (flags & kFlagAutomatic) != 0 ? Layout::automatic
                            : (flags & kFlagCounting) != 0  ? Layout::counting
                                                            : Layout::classic;
    const std::uint32_t layers = in.u32();
    const bool own_tightening = (flags & kFlagTightening) != 0;
    const std::size_t fixed_bytes = kFixedHeaderBytes + (own_tightening ? sizeof(double) : 0);
    if ((flags & ~known_flags) != 0 || layers < 1 || layers > kMaxLayers ||
        body_bytes != fixed_bytes + layers * layer_bytes) {
        return core::Error{kInvalidHeader};
    }
    if (own_tightening) header.options.tightening = in.f64();
    // Written only when not the default: one encoding per filter.
    if ((own_tightening && header.options.tightening == kDefaultTightening) ||
        check_stored_options(header.options) != BoundsError::none ||
        (std::popcount(flags & kLayoutFlags) > 1 &&
         (flags & kLayoutFlags) != (kFlagBlocked | kFlagAutomatic)) ||
        (header.options.nonscaling && layers != 1)) {
        return core::Error{kInvalidHeader};
    }
    header.layers.resize(layers);
    header.items.resize(layers);
    return header;
}

// Layer `index` into the header (its layout from version 2 on), within the
// bounds of a stored layer.
core::Status read_bloomery_layer(Reader& in, std::uint32_t version, std::uint32_t index,
                                 DumpHeader& header) {
    LayerGeometry& layer = header.layers[index];
    layer.capacity = in.u64();
    layer.error_rate = in.f64();
    layer.bits = in.u64();
    layer.hashes = in.u32();
    if (version != 1) {
        const std::uint32_t layout = in.u32();
        if (!layer_layout_fits(header.options.layout, layout)) return core::Error{kInvalidHeader};
        layer.layout = static_cast<Layout>(layout);
    }
    header.items[index] = in.u64();
    if (check_layer(layer, header.items[index]) != BoundsError::none) {
        return core::Error{kInvalidHeader};
    }
    return {};
}

// bloomery's own header (its layout at the top of this file).
core::Result<DumpHeader> parse_bloomery_header(std::string_view bytes) {
    if (bytes.size() < kFixedHeaderBytes + kLayerBytesV1 + kChecksumBytes) {
        return core::Error{kInvalidHeader};
    }
    // The checksum is always the last 8 bytes, so it can be verified before
    // trusting any field (a flipped bit in the layer count reads as a
    // checksum mismatch, not as a confusing length error).
    const std::string_view body = bytes.substr(0, bytes.size() - kChecksumBytes);
    Reader trailer(bytes.substr(body.size()));
    if (trailer.u64() != XXH64(body.data(), body.size(), kChecksumSeed)) {
        return core::Error{"dump header checksum mismatch"};
    }
    if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return core::Error{kInvalidHeader};
    Reader in(body);
    in.skip(sizeof kMagic);
    const std::uint32_t version = in.u32();
    if (version != 1 && version != kVersion) return core::Error{"unsupported dump version"};
    core::Result<DumpHeader> header = read_bloomery_options(in, version, body.size());
    if (!header) return header;
    const auto layers = static_cast<std::uint32_t>(header->layers.size());
    for (std::uint32_t i = 0; i < layers; ++i) {
        if (core::Status layer = read_bloomery_layer(in, version, i, *header); !layer) {
            return layer.failure();
        }
    }
    return header;
}

}  // namespace

std::string encode_header(const ScalableFilter& filter) {
    if (filter.scheme() == HashScheme::redisbloom) return encode_redisbloom_header(filter);
    const std::size_t n = filter.num_layers();
    const FilterOptions options = filter.options();
    std::string out;
    const bool own_tightening = options.tightening != kDefaultTightening;
    out.reserve(kFixedHeaderBytes + sizeof(double) + n * kLayerBytes + kChecksumBytes);
    out.append(kMagic, sizeof kMagic);
    put_u32(out, kVersion);
    put_f64(out, options.error_rate);
    put_u64(out, options.capacity);
    put_u32(out, options.expansion);
    put_u32(out,
            (options.nonscaling ? kFlagNonscaling : 0) |
                (options.layout == Layout::blocked ? kFlagBlocked : 0) |
                (options.layout == Layout::automatic ? kFlagAutomatic : 0) |
                (options.layout == Layout::automatic_blocks ? kFlagBlocked | kFlagAutomatic : 0) |
                (options.layout == Layout::counting ? kFlagCounting : 0) |
                (own_tightening ? kFlagTightening : 0));
    put_u32(out, static_cast<std::uint32_t>(n));
    if (own_tightening) put_f64(out, options.tightening);
    for (std::size_t i = 0; i < n; ++i) {
        const BloomLayer& layer = filter.layer(i);
        put_u64(out, layer.capacity());
        put_f64(out, layer.error_rate());
        put_u64(out, layer.bits());
        put_u32(out, layer.hashes());
        put_u32(out, static_cast<std::uint32_t>(layer.layout()));
        put_u64(out, layer.items());
    }
    put_u64(out, XXH64(out.data(), out.size(), kChecksumSeed));
    return out;
}

HeaderFormat header_format(std::string_view bytes) {
    if (bytes.size() >= sizeof kMagic && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0) {
        return HeaderFormat::bloomery;
    }
    return looks_like_redisbloom_header(bytes) ? HeaderFormat::redisbloom : HeaderFormat::unknown;
}

core::Result<DumpHeader> parse_header(std::string_view bytes) {
    if (looks_like_redisbloom_header(bytes)) return parse_redisbloom_header(bytes);
    return parse_bloomery_header(bytes);
}

FilterRef build_filter(const DumpHeader& header, std::uint64_t maxmemory) {
    FilterRef filter = ScalableFilter::create(header.options, header.layers, maxmemory);
    if (!filter) return filter;
    for (std::size_t i = 0; i < header.items.size(); ++i)
        filter->layer(i).set_items(header.items[i]);
    return filter;
}

core::Result<FilterRef> decode_header(std::string_view bytes, std::uint64_t max_filter_bytes) {
    const core::Result<DumpHeader> header = parse_header(bytes);
    if (!header) return header.failure();
    if (max_filter_bytes != 0 && filter_bytes(header->layers) > max_filter_bytes) {
        return core::Error{"dump exceeds max filter size"};
    }
    try {
        return build_filter(*header);
    } catch (const std::bad_alloc&) {
        return core::Error{"not enough memory to load dump"};
    }
}

DumpChunk dump_chunk(const ScalableFilter& filter, std::int64_t iter, std::size_t max_chunk_bytes) {
    if (iter == 0) return DumpChunk{1, encode_header(filter)};
    if (filter.scheme() == HashScheme::redisbloom) {
        return redisbloom_chunk(filter, iter, max_chunk_bytes);
    }
    if (iter < 0) return DumpChunk{0, {}};
    auto offset = static_cast<std::uint64_t>(iter - 1);
    if (offset % 8 != 0) return DumpChunk{0, {}};
    const std::optional<Location> loc = locate_touched(filter, offset);
    if (!loc) return DumpChunk{0, {}};

    const std::uint64_t limit = std::max<std::uint64_t>(8, max_chunk_bytes & ~std::size_t{7});
    const std::uint64_t length = chunk_length(filter, *loc, limit);
    const std::uint64_t words = length / 8;
    std::vector<std::uint64_t> buffer(words);
    filter.layer(loc->layer).copy_words(loc->layer_offset / 8, words, buffer.data());
    for (std::uint64_t& w : buffer) w = to_le(w);

    DumpChunk chunk;
    chunk.data.reserve(length + kChecksumBytes);
    chunk.data.append(reinterpret_cast<const char*>(buffer.data()), length);
    put_u64(chunk.data, chunk_checksum(offset, chunk.data));
    // Filters are far below 2^63 bytes (memory-bound), so this cannot overflow.
    chunk.next_iter = static_cast<std::int64_t>(offset + length + 1);
    return chunk;
}

std::string_view chunk_bits(const ScalableFilter& filter, std::string_view chunk) {
    if (filter.scheme() == HashScheme::redisbloom || chunk.size() < kChecksumBytes) return chunk;
    return chunk.substr(0, chunk.size() - kChecksumBytes);
}

core::Result<ChunkTarget> check_chunk(const ScalableFilter& filter, std::int64_t iter,
                                      std::string_view chunk) {
    if (filter.scheme() == HashScheme::redisbloom)
        return check_redisbloom_chunk(filter, iter, chunk);
    if (iter < 1) return core::Error{"invalid chunk iterator"};
    if (chunk.size() < 8 + kChecksumBytes || chunk.size() % 8 != 0) {
        return core::Error{"invalid chunk length"};
    }
    const std::uint64_t length = chunk.size() - kChecksumBytes;
    const auto end = static_cast<std::uint64_t>(iter - 1);
    if (end < length || end % 8 != 0) return core::Error{"invalid chunk iterator"};
    const std::uint64_t offset = end - length;
    const std::optional<Location> loc = locate(filter, offset);
    if (!loc || length > loc->layer_bytes - loc->layer_offset) {
        return core::Error{"chunk out of range"};
    }
    const std::string_view payload = chunk.substr(0, length);
    Reader trailer(chunk.substr(length));
    if (trailer.u64() != chunk_checksum(offset, payload)) {
        return core::Error{"chunk checksum mismatch"};
    }
    return ChunkTarget{loc->layer, loc->layer_offset, payload};
}

void apply_chunk(ScalableFilter& filter, const ChunkTarget& target) {
    // Through a fixed buffer: no allocation, so a chunk that was checked and
    // recorded cannot fail to apply.
    constexpr std::size_t kWords = 512;
    std::uint64_t words[kWords];
    BloomLayer& layer = filter.layer(target.layer);
    std::uint64_t at = target.byte_offset;
    std::string_view rest = target.payload;
    while (!rest.empty()) {
        if (at % 8 != 0 || rest.size() < 8) {
            // A RedisBloom chunk may start or end inside a word: that word's
            // bytes alone, the others left as they are.
            const std::size_t shift = at % 8;
            const std::size_t take = std::min<std::size_t>(8 - shift, rest.size());
            std::uint64_t word = 0;
            for (std::size_t i = 0; i < take; ++i) {
                word |= static_cast<std::uint64_t>(static_cast<unsigned char>(rest[i]))
                        << (8 * (shift + i));
            }
            layer.or_words(at / 8, 1, &word);
            at += take;
            rest.remove_prefix(take);
            continue;
        }
        const std::size_t n = std::min(kWords, rest.size() / 8);
        std::memcpy(words, rest.data(), n * 8);
        for (std::size_t i = 0; i < n; ++i) words[i] = to_le(words[i]);
        // A counting layer's cells are set to the chunk's (as RedisBloom's
        // LOADCHUNK copies bytes): counters are values, not bits to OR.
        if (layer.counting()) {
            layer.store_words(at / 8, n, words);
        } else {
            layer.or_words(at / 8, n, words);
        }
        at += n * 8;
        rest.remove_prefix(n * 8);
    }
}

core::Status load_chunk(ScalableFilter& filter, std::int64_t iter, std::string_view chunk) {
    const core::Result<ChunkTarget> target = check_chunk(filter, iter, chunk);
    if (!target) return target.failure();
    apply_chunk(filter, *target);
    return {};
}

}  // namespace bloomery::bloom
