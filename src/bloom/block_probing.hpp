#pragma once
// Probing a blocked layer (bounds.hpp: blocked_layout) whose blocks are
// 2^W bits: W = 9 for `blocked` (one cache line), 10, 11 and 12 for the
// blocks of 2, 4 and 8 adjacent lines. An item's block is the fast range of
// h1 over the blocks, its k bits in it come from h2 (hash.hpp:
// BasicBlockProbes<W>). Words are read and written only through
// std::atomic_ref (filter.hpp: thread safety).

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/hash.hpp"

namespace bloomery::bloom::blocks {

template <unsigned W>
inline constexpr std::uint64_t kWords = (std::uint64_t{1} << W) / 64;

// log2 of a blocked layout's block bits: 9 to 12.
inline unsigned width_of(Layout layout) {
    return static_cast<unsigned>(std::countr_zero(layout_block_bits(layout)));
}

// f(std::integral_constant<unsigned, W>{}) for the block width `width`.
template <class F>
inline decltype(auto) with_width(unsigned width, F&& f) {
    switch (width) {
        case 10:
            return f(std::integral_constant<unsigned, 10>{});
        case 11:
            return f(std::integral_constant<unsigned, 11>{});
        case 12:
            return f(std::integral_constant<unsigned, 12>{});
        default:
            return f(std::integral_constant<unsigned, 9>{});
    }
}

// The first word of the item's block in a layer of `bits` bits.
template <unsigned W>
inline std::uint64_t* block_of(std::uint64_t* words, std::uint64_t bits, const ItemHash& hash) {
    return words + block_index(hash, bits >> W) * kWords<W>;
}

// Every cache line of the block: the probes of an item spread over all.
template <unsigned W>
inline void prefetch(const std::uint64_t* block) {
    for (std::uint64_t line = 0; line < kWords<W>; line += 8) __builtin_prefetch(block + line);
}

// Whether the item's k probes are all set. Stops at the first clear bit: a
// branch-free AND of all k was slower in batches, as the early exit lets
// the processor run ahead into the next items' loads.
template <unsigned W>
inline bool holds(std::uint64_t* block, const ItemHash& hash, std::uint32_t k) {
    BasicBlockProbes<W> probes(hash);
    for (std::uint32_t i = 0; i < k; ++i) {
        const std::uint32_t pos = probes.next();
        const std::uint64_t word =
            std::atomic_ref<std::uint64_t>(block[pos >> 6]).load(std::memory_order_relaxed);
        if (((word >> (pos & 63)) & 1) == 0) return false;
    }
    return true;
}

// Sets the item's k probes with set_bit(block, pos) (1 if it flipped the
// bit); the number flipped.
template <unsigned W, class SetBit>
inline std::int64_t add(std::uint64_t* block, const ItemHash& hash, std::uint32_t k,
                        SetBit set_bit) {
    BasicBlockProbes<W> probes(hash);
    std::int64_t flipped = 0;
    for (std::uint32_t i = 0; i < k; ++i) flipped += set_bit(block, probes.next());
    return flipped;
}

// The lines of the item's first two probes, for lookups: an absent item is
// found out at its first or second probe most of the time, and prefetching
// every line of a multi-line block 16 items ahead stalls on the core's
// miss buffers (a BF.MEXISTS of 2,048-bit blocks spent a third of its time
// in prefetches).
template <unsigned W>
inline void prefetch_first_probes(const std::uint64_t* block, const ItemHash& hash) {
    if constexpr (W == 9) {
        __builtin_prefetch(block);
    } else {
        BasicBlockProbes<W> probes(hash);
        // The 64-byte line (8 words) of each probe.
        const std::size_t first = std::size_t{probes.next() >> 9} * 8;
        const std::size_t second = std::size_t{probes.next() >> 9} * 8;
        __builtin_prefetch(block + first);
        if (second != first) __builtin_prefetch(block + second);
    }
}

// found[i] = holds(hashes[i]) for i in [0, n), each item's first lines
// prefetched 16 items ahead (filter.hpp: BloomLayer::contains_blocked).
template <unsigned W>
inline void contains_batch(std::uint64_t* words, std::uint64_t bits, std::uint32_t k,
                           const ItemHash* hashes, std::size_t n, std::uint8_t* found) {
    constexpr std::size_t kAhead = 16;
    const std::size_t ahead = std::min(kAhead, n);
    for (std::size_t i = 0; i < ahead; ++i) {
        prefetch_first_probes<W>(block_of<W>(words, bits, hashes[i]), hashes[i]);
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (i + ahead < n) {
            const ItemHash& next = hashes[i + ahead];
            prefetch_first_probes<W>(block_of<W>(words, bits, next), next);
        }
        found[i] = holds<W>(block_of<W>(words, bits, hashes[i]), hashes[i], k) ? 1 : 0;
    }
}

}  // namespace bloomery::bloom::blocks
