#pragma once
// Item hashing: one MurmurHash3 x64_128 per item gives (h1, h2); the k probe
// positions come from enhanced double hashing (Kirsch–Mitzenmacher, Dillinger):
//   g_i = h1 + i·h2 + (i³ − i)/6  (mod 2^64), reduced to [0, m) by fast range
//   ((g_i · m) >> 64), so every bit position is reachable for any m.

#include <cstdint>
#include <string_view>

namespace bloomery::bloom {

struct ItemHash {
    std::uint64_t h1;
    std::uint64_t h2;
};

// Stable across versions and platforms: snapshots and SCANDUMPs depend on it.
ItemHash hash_item(std::string_view item);

// Position of probe `i` (0-based) in a filter of `bits` bits.
inline std::uint64_t probe_position(const ItemHash& hash, std::uint32_t i, std::uint64_t bits) {
    const std::uint64_t ii = i;
    const std::uint64_t g = hash.h1 + ii * hash.h2 + (ii * ii * ii - ii) / 6;
    // __extension__: unsigned __int128 is a GCC/Clang extension that
    // -Wpedantic would otherwise reject in every file including this header.
    __extension__ typedef unsigned __int128 uint128;
    return static_cast<std::uint64_t>((static_cast<uint128>(g) * bits) >> 64);
}

// Blocked layout: block index (fast range of h1 over `blocks`), and the bit
// of probe `i` inside the 512-bit block: 9-bit fields of h2 (its low bit,
// forced to 1, left out), seven per 63 bits; probes past the seventh take
// fields of h2 remixed with the probe round (SplitMix64's multiplier).
inline std::uint64_t block_index(const ItemHash& hash, std::uint64_t blocks) {
    __extension__ typedef unsigned __int128 uint128;
    return static_cast<std::uint64_t>((static_cast<uint128>(hash.h1) * blocks) >> 64);
}
inline std::uint32_t block_probe(const ItemHash& hash, std::uint32_t i) {
    const std::uint32_t round = i / 7;
    std::uint64_t bits = hash.h2 >> 1;
    if (round != 0) {
        bits = (hash.h2 + round * 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
        bits ^= bits >> 29;
    }
    return static_cast<std::uint32_t>(bits >> (9 * (i % 7))) & 511u;
}

// The probes of one item in order, as probe_position(hash, 0, bits),
// probe_position(hash, 1, bits), ... but by additions: g_{i+1} - g_i =
// h2 + i(i+1)/2, so each step adds h2 plus a running triangular number
// instead of multiplying and dividing by 6, which batched lookups in a large
// classic filter feel.
class ClassicProbes {
public:
    ClassicProbes(const ItemHash& hash, std::uint64_t bits)
        : g_(hash.h1), step_(hash.h2), bits_(bits) {}
    std::uint64_t next() {
        __extension__ typedef unsigned __int128 uint128;
        const auto pos = static_cast<std::uint64_t>((static_cast<uint128>(g_) * bits_) >> 64);
        g_ += step_;
        step_ += ++i_;
        return pos;
    }

private:
    std::uint64_t g_;
    std::uint64_t step_;
    std::uint64_t bits_;
    std::uint64_t i_ = 0;
};

// The in-block probes of one item in order, as block_probe(hash, 0),
// block_probe(hash, 1), ...: a shift per probe, a remix every seven.
// BasicBlockProbes<W> does the same for blocks of 2^W bits: W-bit fields,
// 63 / W to a round (W = 9: BlockProbes, the 512-bit block's).
template <unsigned W>
class BasicBlockProbes {
public:
    static constexpr std::uint32_t kPerRound = 63 / W;
    explicit BasicBlockProbes(const ItemHash& hash) : h2_(hash.h2), fields_(hash.h2 >> 1) {}
    std::uint32_t next() {
        if (left_ == 0) {
            ++round_;
            fields_ = (h2_ + round_ * 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
            fields_ ^= fields_ >> 29;
            left_ = kPerRound;
        }
        const auto pos = static_cast<std::uint32_t>(fields_) & ((1u << W) - 1);
        fields_ >>= W;
        --left_;
        return pos;
    }

private:
    std::uint64_t h2_;
    std::uint64_t fields_;
    std::uint64_t round_ = 0;
    std::uint32_t left_ = kPerRound;
};
using BlockProbes = BasicBlockProbes<9>;

}  // namespace bloomery::bloom
