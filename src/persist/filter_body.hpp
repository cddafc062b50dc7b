#pragma once
// Private to src/persist: a filter's fields as a snapshot record holds them
// (proto/snapshot.md, "Filter record", from error_rate through the last
// layer's words), written by the snapshot writer and by DUMP payloads
// (dump_payload.cpp), so both hold a filter exactly alike.

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist::format {

// Bytes of one layer's header: u64 capacity, f64 error_rate, u64 bits, u32
// hashes, u8 layout, [f64 bpe, u8 n2 for the RedisBloom scheme], u64 items.
inline std::uint64_t layer_header_bytes(bloom::HashScheme scheme) {
    return kLayerHeaderBytes + (scheme == bloom::HashScheme::redisbloom ? 8 + 1 : 0);
}

// Bytes of the options before the layers: f64 error_rate, u64 capacity, u32
// expansion, u8 option bits, u8 layout, u8 scheme, [u32 RedisBloom options],
// [f64 tightening], u32 layer count.
inline std::uint64_t options_bytes(const bloom::FilterOptions& options) {
    return 8 + 8 + 4 + 1 + 1 + 1 + (options.scheme == bloom::HashScheme::redisbloom ? 4 : 0) +
           (options.tightening != bloom::kDefaultTightening ? 8 : 0) + 4;
}

// Bytes write_filter_body() writes for the first `num_layers` layers.
inline std::uint64_t filter_body_bytes(const bloom::ScalableFilter& filter,
                                       std::size_t num_layers) {
    const bloom::HashScheme scheme = filter.scheme();
    std::uint64_t bytes = options_bytes(filter.options());
    for (std::size_t i = 0; i < num_layers; ++i) {
        bytes += layer_header_bytes(scheme) + filter.layer(i).byte_size();
    }
    return bytes;
}

// Writes the filter's options and its first `num_layers` layers (read once by
// the caller: a filter may grow meanwhile) to `out`, which has
// append(data, size), append_u8, append_u32, append_u64 and append_f64.
// Layer i counts counts[i] items (0 past the end of `counts`: a layer created
// after they were read). Words are copied kWordChunk at a time through
// `words` (grown to that as needed), live: bits only go 0 -> 1.
template <class Out>
void write_filter_body(Out& out, const bloom::ScalableFilter& filter, std::size_t num_layers,
                       std::span<const std::uint64_t> counts, std::vector<std::uint64_t>& words) {
    const bloom::FilterOptions options = filter.options();
    out.append_f64(options.error_rate);
    out.append_u64(options.capacity);
    out.append_u32(options.expansion);
    const bool own_tightening = options.tightening != bloom::kDefaultTightening;
    out.append_u8((options.nonscaling ? kOptionNonscaling : 0) |
                  (own_tightening ? kOptionTightening : 0));
    out.append_u8(static_cast<std::uint8_t>(options.layout));
    out.append_u8(static_cast<std::uint8_t>(options.scheme));
    const bool redisbloom = options.scheme == bloom::HashScheme::redisbloom;
    if (redisbloom) out.append_u32(options.redisbloom_options);
    if (own_tightening) out.append_f64(options.tightening);
    out.append_u32(static_cast<std::uint32_t>(num_layers));
    for (std::size_t i = 0; i < num_layers; ++i) {
        const bloom::BloomLayer& layer = filter.layer(i);
        const std::uint64_t items = i < counts.size() ? counts[i] : 0;
        const bloom::LayerGeometry geometry = layer.geometry();
        out.append_u64(geometry.capacity);
        out.append_f64(geometry.error_rate);
        out.append_u64(geometry.bits);
        out.append_u32(geometry.hashes);
        out.append_u8(static_cast<std::uint8_t>(geometry.layout));
        if (redisbloom) {
            out.append_f64(geometry.redisbloom_bpe);
            out.append_u8(geometry.redisbloom_n2);
        }
        out.append_u64(items);

        const std::uint64_t num_words = layer.num_words();
        if (words.size() < kWordChunk && words.size() < num_words) {
            words.resize(num_words < kWordChunk ? static_cast<std::size_t>(num_words) : kWordChunk);
        }
        for (std::uint64_t first = 0; first < num_words; first += kWordChunk) {
            const std::uint64_t left = num_words - first;
            const std::size_t count =
                left < kWordChunk ? static_cast<std::size_t>(left) : kWordChunk;
            layer.copy_words(first, count, words.data());
            words_host_to_little(words.data(), count);
            out.append(words.data(), count * sizeof(std::uint64_t));
        }
    }
}

}  // namespace bloomery::persist::format
