#include "bloomery/bloom/dump.hpp"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "bloomery/bloom/params.hpp"

namespace bloomery::bloom {

// Header layout (little-endian, 40 + 40·layers + 8 bytes in version 2):
//   0  char[8] "BLMDUMP1"
//   8  u32     version: 2 (1 is still read: no layout fields, all classic)
//   12 f64     options.error_rate
//   20 u64     options.capacity
//   28 u32     options.expansion
//   32 u32     flags: bit 0 = nonscaling, bit 1 = blocked layout for new
//              layers (version 2); other bits must be 0
//   36 u32     layer count
//   40 per layer: u64 capacity, f64 error_rate, u64 bits, u32 hashes,
//              u32 layout (version 2: 0 classic, 1 blocked), u64 items
//   .. u64     XXH64 (seed 0) of every byte before it
// Chunk: payload words (little-endian), then u64 XXH64 (seed 0) of
// (u64 byte offset of the payload in the concatenated layers, payload).
// Hashing the offset with the payload means a valid chunk replayed at another
// iterator is rejected, not written to the wrong place.

namespace {

constexpr char kMagic[8] = {'B', 'L', 'M', 'D', 'U', 'M', 'P', '1'};
constexpr std::uint32_t kVersion = 2;
constexpr std::uint32_t kFlagNonscaling = 1;
constexpr std::uint32_t kFlagBlocked = 2;
constexpr std::size_t kFixedHeaderBytes = 8 + 4 + 8 + 8 + 4 + 4 + 4;  // before the layers
constexpr std::size_t kLayerBytesV1 = 8 + 8 + 8 + 4 + 8;
constexpr std::size_t kLayerBytes = kLayerBytesV1 + 4;
constexpr std::size_t kChecksumBytes = 8;
constexpr std::uint64_t kChecksumSeed = 0;

// Little-endian conversion. On little-endian hosts (all we ship on) these are
// plain copies the compiler turns into single moves.
std::uint64_t to_le(std::uint64_t v) {
    if constexpr (std::endian::native == std::endian::big) return __builtin_bswap64(v);
    return v;
}
std::uint32_t to_le(std::uint32_t v) {
    if constexpr (std::endian::native == std::endian::big) return __builtin_bswap32(v);
    return v;
}

void put_u32(std::string& out, std::uint32_t v) {
    v = to_le(v);
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_u64(std::string& out, std::uint64_t v) {
    v = to_le(v);
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_f64(std::string& out, double v) {
    put_u64(out, std::bit_cast<std::uint64_t>(v));
}

// Bounds are checked by the caller (exact total length) before any read.
class Reader {
public:
    explicit Reader(std::string_view bytes) : bytes_(bytes) {}
    std::uint32_t u32() {
        std::uint32_t v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof v);
        pos_ += sizeof v;
        return to_le(v);
    }
    std::uint64_t u64() {
        std::uint64_t v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof v);
        pos_ += sizeof v;
        return to_le(v);
    }
    double f64() { return std::bit_cast<double>(u64()); }
    void skip(std::size_t n) { pos_ += n; }

private:
    std::string_view bytes_;
    std::size_t pos_ = 0;
};

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

struct Location {
    std::size_t layer;
    std::uint64_t layer_offset;  // byte offset inside the layer
    std::uint64_t layer_bytes;
};

// Finds the layer holding byte `offset` of the concatenated bit arrays.
bool locate(const ScalableFilter& filter, std::uint64_t offset, Location& loc) {
    const std::size_t n = filter.num_layers();
    std::uint64_t start = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t size = filter.layer(i).byte_size();
        if (offset - start < size) {
            loc = Location{i, offset - start, size};
            return true;
        }
        start += size;
    }
    return false;
}

}  // namespace

std::string encode_header(const ScalableFilter& filter) {
    const std::size_t n = filter.num_layers();
    const FilterOptions options = filter.options();
    std::string out;
    out.reserve(kFixedHeaderBytes + n * kLayerBytes + kChecksumBytes);
    out.append(kMagic, sizeof kMagic);
    put_u32(out, kVersion);
    put_f64(out, options.error_rate);
    put_u64(out, options.capacity);
    put_u32(out, options.expansion);
    put_u32(out, (options.nonscaling ? kFlagNonscaling : 0) |
                     (options.layout == Layout::blocked ? kFlagBlocked : 0));
    put_u32(out, static_cast<std::uint32_t>(n));
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

bool parse_header(std::string_view bytes, DumpHeader& out, std::string& error) {
    if (bytes.size() < kFixedHeaderBytes + kLayerBytesV1 + kChecksumBytes) {
        error = "invalid dump header";
        return false;
    }
    // The checksum is always the last 8 bytes, so it can be verified before
    // trusting any field (a flipped bit in the layer count reads as a
    // checksum mismatch, not as a confusing length error).
    const std::string_view body = bytes.substr(0, bytes.size() - kChecksumBytes);
    Reader trailer(bytes.substr(body.size()));
    if (trailer.u64() != XXH64(body.data(), body.size(), kChecksumSeed)) {
        error = "dump header checksum mismatch";
        return false;
    }
    if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
        error = "invalid dump header";
        return false;
    }
    Reader in(body);
    in.skip(sizeof kMagic);
    const std::uint32_t version = in.u32();
    if (version != 1 && version != kVersion) {
        error = "unsupported dump version";
        return false;
    }
    const std::size_t layer_bytes = version == 1 ? kLayerBytesV1 : kLayerBytes;
    const std::uint32_t known_flags =
        version == 1 ? kFlagNonscaling : kFlagNonscaling | kFlagBlocked;
    DumpHeader header;
    header.options.error_rate = in.f64();
    header.options.capacity = in.u64();
    header.options.expansion = in.u32();
    const std::uint32_t flags = in.u32();
    header.options.nonscaling = (flags & kFlagNonscaling) != 0;
    header.options.layout = (flags & kFlagBlocked) != 0 ? Layout::blocked : Layout::classic;
    const std::uint32_t layers = in.u32();
    // The same bounds every other path uses (bounds.hpp): a dump this server
    // could not have written is refused, so a restored filter can always be
    // saved and loaded again.
    if (check_stored_options(header.options) != BoundsError::none || (flags & ~known_flags) != 0 ||
        layers < 1 || layers > kMaxLayers || (header.options.nonscaling && layers != 1) ||
        body.size() != kFixedHeaderBytes + layers * layer_bytes) {
        error = "invalid dump header";
        return false;
    }
    header.layers.resize(layers);
    header.items.resize(layers);
    for (std::uint32_t i = 0; i < layers; ++i) {
        LayerGeometry& layer = header.layers[i];
        layer.capacity = in.u64();
        layer.error_rate = in.f64();
        layer.bits = in.u64();
        layer.hashes = in.u32();
        if (version != 1) {
            const std::uint32_t layout = in.u32();
            if (layout > static_cast<std::uint32_t>(Layout::blocked)) {
                error = "invalid dump header";
                return false;
            }
            layer.layout = static_cast<Layout>(layout);
        }
        header.items[i] = in.u64();
        if (check_layer(layer, header.items[i]) != BoundsError::none) {
            error = "invalid dump header";
            return false;
        }
    }
    out = std::move(header);
    return true;
}

FilterRef build_filter(const DumpHeader& header, std::uint64_t maxmemory) {
    FilterRef filter = ScalableFilter::create(header.options, header.layers, maxmemory);
    if (!filter) return filter;
    for (std::size_t i = 0; i < header.items.size(); ++i)
        filter->layer(i).set_items(header.items[i]);
    return filter;
}

FilterRef decode_header(std::string_view bytes, std::uint64_t max_filter_bytes,
                        std::string& error) {
    DumpHeader header;
    if (!parse_header(bytes, header, error)) return {};
    if (max_filter_bytes != 0 && filter_bytes(header.layers) > max_filter_bytes) {
        error = "dump exceeds max filter size";
        return {};
    }
    try {
        return build_filter(header);
    } catch (const std::bad_alloc&) {
        error = "not enough memory to load dump";
        return {};
    }
}

DumpChunk dump_chunk(const ScalableFilter& filter, std::int64_t iter, std::size_t max_chunk_bytes) {
    if (iter == 0) return DumpChunk{1, encode_header(filter)};
    if (iter < 0) return DumpChunk{0, {}};
    const auto offset = static_cast<std::uint64_t>(iter - 1);
    Location loc;
    if (offset % 8 != 0 || !locate(filter, offset, loc)) return DumpChunk{0, {}};

    const std::uint64_t limit = std::max<std::uint64_t>(8, max_chunk_bytes & ~std::size_t{7});
    const std::uint64_t length = std::min(limit, loc.layer_bytes - loc.layer_offset);
    const std::uint64_t words = length / 8;
    std::vector<std::uint64_t> buffer(words);
    filter.layer(loc.layer).copy_words(loc.layer_offset / 8, words, buffer.data());
    for (std::uint64_t& w : buffer) w = to_le(w);

    DumpChunk chunk;
    chunk.data.reserve(length + kChecksumBytes);
    chunk.data.append(reinterpret_cast<const char*>(buffer.data()), length);
    put_u64(chunk.data, chunk_checksum(offset, chunk.data));
    // Filters are far below 2^63 bytes (memory-bound), so this cannot overflow.
    chunk.next_iter = static_cast<std::int64_t>(offset + length + 1);
    return chunk;
}

bool check_chunk(const ScalableFilter& filter, std::int64_t iter, std::string_view chunk,
                 ChunkTarget& target, std::string& error) {
    if (iter < 1) {
        error = "invalid chunk iterator";
        return false;
    }
    if (chunk.size() < 8 + kChecksumBytes || chunk.size() % 8 != 0) {
        error = "invalid chunk length";
        return false;
    }
    const std::uint64_t length = chunk.size() - kChecksumBytes;
    const auto end = static_cast<std::uint64_t>(iter - 1);
    if (end < length || end % 8 != 0) {
        error = "invalid chunk iterator";
        return false;
    }
    const std::uint64_t offset = end - length;
    Location loc;
    if (!locate(filter, offset, loc) || length > loc.layer_bytes - loc.layer_offset) {
        error = "chunk out of range";
        return false;
    }
    const std::string_view payload = chunk.substr(0, length);
    Reader trailer(chunk.substr(length));
    if (trailer.u64() != chunk_checksum(offset, payload)) {
        error = "chunk checksum mismatch";
        return false;
    }
    target = ChunkTarget{loc.layer, loc.layer_offset / 8, payload};
    return true;
}

void apply_chunk(ScalableFilter& filter, const ChunkTarget& target) {
    // Through a fixed buffer: no allocation, so a chunk that was checked and
    // recorded cannot fail to apply.
    constexpr std::size_t kWords = 512;
    std::uint64_t words[kWords];
    BloomLayer& layer = filter.layer(target.layer);
    const std::size_t total = target.payload.size() / 8;
    for (std::size_t done = 0; done < total; done += kWords) {
        const std::size_t n = std::min(kWords, total - done);
        std::memcpy(words, target.payload.data() + done * 8, n * 8);
        for (std::size_t i = 0; i < n; ++i) words[i] = to_le(words[i]);
        layer.or_words(target.first_word + done, n, words);
    }
}

bool load_chunk(ScalableFilter& filter, std::int64_t iter, std::string_view chunk,
                std::string& error) {
    ChunkTarget target;
    if (!check_chunk(filter, iter, chunk, target, error)) return false;
    apply_chunk(filter, target);
    return true;
}

}  // namespace bloomery::bloom
