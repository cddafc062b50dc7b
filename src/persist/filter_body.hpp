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

// A layer's words as runs (proto/snapshot.md, "Layer words"): pairs of u64
// zeros (zero words left out) and u64 count (words that follow), until the
// pairs account for every word. A run ends before a gap of this many zero
// words (shorter gaps stay in it: a pair costs 16 bytes) and at every
// multiple of kWordChunk words.
inline constexpr std::uint64_t kMinZeroGap = 4;

// The end of the run of words[from, count) that starts at the non-zero word
// `from`: just after its last non-zero word before a gap of kMinZeroGap zero
// words or the end of the chunk.
inline std::size_t run_end(const std::uint64_t* words, std::size_t from, std::size_t count) {
    std::size_t last = from;
    for (std::size_t i = from + 1; i < count && i - last < kMinZeroGap + 1; ++i) {
        if (words[i] != 0) last = i;
    }
    return last + 1;
}

// Writes `layer`'s words as runs, visiting only its touched regions (every
// other word is zero), kWordChunk words at a time through `words`. Copied
// live: words only go from zero in a non-counting layer, and a word found
// zero here is written as zero.
// (`Layer`: a BloomLayer, or an expiring filter's slices.)
template <class Out, class Layer>
void write_layer_runs(Out& out, const Layer& layer, std::vector<std::uint64_t>& words) {
    const std::uint64_t num_words = layer.num_words();
    if (words.size() < kWordChunk && words.size() < num_words) {
        words.resize(num_words < kWordChunk ? static_cast<std::size_t>(num_words) : kWordChunk);
    }
    std::uint64_t done = 0;  // every word before this is written or left out
    for (std::uint64_t from = layer.next_touched(0); from < num_words;
         from = layer.next_touched(from)) {
        const std::uint64_t end = layer.touched_end(from);
        for (; from < end;) {
            // Chunks end at multiples of kWordChunk, so runs split there and
            // nowhere else beside the gaps: one encoding per layer.
            const std::uint64_t chunk_end = (from / kWordChunk + 1) * kWordChunk;
            const auto count = static_cast<std::size_t>((chunk_end < end ? chunk_end : end) - from);
            layer.copy_words(from, count, words.data());
            for (std::size_t i = 0; i < count;) {
                if (words[i] == 0) {
                    ++i;
                    continue;
                }
                const std::size_t stop = run_end(words.data(), i, count);
                out.append_u64(from + i - done);
                out.append_u64(stop - i);
                words_host_to_little(words.data() + i, stop - i);
                out.append(words.data() + i, (stop - i) * sizeof(std::uint64_t));
                done = from + stop;
                i = stop;
            }
            from += count;
        }
    }
    if (done < num_words) {
        out.append_u64(num_words - done);
        out.append_u64(0);
    }
}

// Writes the filter's options and its first `num_layers` layers (read once by
// the caller: a filter may grow meanwhile) to `out`, which has
// append(data, size), append_u8, append_u32, append_u64 and append_f64.
// Layer i counts counts[i] items (0 past the end of `counts`: a layer created
// after they were read). Words as runs (write_layer_runs()).
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
        write_layer_runs(out, layer, words);
    }
}

}  // namespace bloomery::persist::format
