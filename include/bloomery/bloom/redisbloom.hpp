#pragma once
// RedisBloom 2.x's hash scheme (bounds.hpp: HashScheme::redisbloom), written
// from its algorithm so that a filter migrated from RedisBloom keeps its bits
// and answers every item as RedisBloom did. As RedisBloom 2.4 does it:
//
// Hashing (per item, once): a = MurmurHash64A(item, seed 0xc6a4a7935bd1e995),
//   b = MurmurHash64A(item, seed a) when the chain has FORCE64 (every chain
//   RedisBloom 2.x creates); chains without it (loaded by RedisBloom from
//   1.x data) use 32-bit MurmurHash2: a = MurmurHash2(item, 0x9747b28c),
//   b = MurmurHash2(item, a). ItemHash{h1 = a, h2 = b}, b left as it is.
// Probes: bit i (0 <= i < hashes) is (a + i·b mod 2^64) mod M, M the
//   layer's bit count, or 2^n2 when the layer has n2 != 0. Bit x is bit
//   x mod 8 of byte x / 8 (so bit x mod 64 of little-endian word x / 64).
// Sizing (bloom_init with NOROUND): bpe = -ln(error) / ln(2)^2 with RedisBloom's
//   constant 0.480453013918201; bits = trunc(entries · bpe) (at least 1),
//   rounded up to whole 64-bit words; hashes = ceil(0.693147180559945 · bpe).
//   Without NOROUND (1.x chains): bits = 2^n2 with n2 = logb(entries · bpe)
//   + 1, and the entries grow by the items the extra bits hold.
// Scaling: the first sub-filter has error p/2 (p if NONSCALING) and the
//   requested entries; the next has the previous one's entries × expansion
//   and error / 2. A sub-filter takes items until it holds `entries`.
//
// All functions are pure and thread-safe.

#include <cstdint>
#include <optional>
#include <string_view>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/hash.hpp"

namespace bloomery::bloom {

// RedisBloom's chain options (its BLOOM_OPT_* values).
inline constexpr std::uint32_t kRedisBloomNoRound = 1;     // sizes not rounded to 2^n
inline constexpr std::uint32_t kRedisBloomEntsIsBits = 2;  // never on a chain; refused
inline constexpr std::uint32_t kRedisBloomForce64 = 4;     // 64-bit hashing
inline constexpr std::uint32_t kRedisBloomNoScaling = 8;   // NONSCALING
// What RedisBloom 2.x gives every chain it creates.
inline constexpr std::uint32_t kRedisBloomDefaultOptions = kRedisBloomNoRound | kRedisBloomForce64;

// The two hashes of an item, as a chain with these options computes them.
ItemHash redisbloom_hash(std::string_view item, std::uint32_t options);
// The hash functions themselves (little-endian reads, as RedisBloom on x86).
std::uint64_t murmur_hash64a(std::string_view data, std::uint64_t seed);
std::uint32_t murmur_hash2(std::string_view data, std::uint32_t seed);

// RedisBloom's bits per entry for an error rate.
double redisbloom_bpe(double error_rate);
// RedisBloom's hash count for a bpe: ceil(0.693147180559945 · bpe).
std::uint32_t redisbloom_hashes(double bpe);

// A sub-filter sized as RedisBloom's bloom_init(entries, error, options)
// sizes it, every field set (scheme redisbloom, layout classic). Nothing
// where bloom_init fails or the size leaves what a double can hold; the
// caller still checks the result against the bounds (check_layer).
std::optional<LayerGeometry> redisbloom_layer(std::uint64_t entries, double error_rate,
                                              std::uint32_t options);

// Bytes RedisBloom reports as a chain's BF.INFO Size: its chain header (32),
// a 64-byte link per sub-filter, and the bit arrays.
inline constexpr std::uint64_t kRedisBloomChainBytes = 32;
inline constexpr std::uint64_t kRedisBloomLinkBytes = 64;

}  // namespace bloomery::bloom
