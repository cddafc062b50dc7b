#include "bloomery/bloom/redisbloom.hpp"

#include <cmath>

namespace bloomery::bloom {

namespace {

// RedisBloom's constants, as it writes them (not std::numbers::ln2: its
// LN2 is rounded to 15 digits, and hash counts derive from it).
constexpr double kLn2Squared = 0.480453013918201;
constexpr double kLn2 = 0.693147180559945;
constexpr std::uint64_t kSeed64 = 0xc6a4a7935bd1e995ull;
constexpr std::uint32_t kSeed32 = 0x9747b28cu;

std::uint64_t load_le64(const unsigned char* p) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
    return v;
}
std::uint32_t load_le32(const unsigned char* p) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
    return v;
}

}  // namespace

std::uint64_t murmur_hash64a(std::string_view data, std::uint64_t seed) {
    constexpr std::uint64_t m = 0xc6a4a7935bd1e995ull;
    constexpr int r = 47;
    const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
    const std::size_t len = data.size();
    std::uint64_t h = seed ^ (static_cast<std::uint64_t>(len) * m);
    const std::size_t whole = len / 8;
    for (std::size_t i = 0; i < whole; ++i) {
        std::uint64_t k = load_le64(bytes + 8 * i);
        k *= m;
        k ^= k >> r;
        k *= m;
        h ^= k;
        h *= m;
    }
    const unsigned char* tail = bytes + 8 * whole;
    const std::size_t rest = len & 7;
    if (rest != 0) {
        for (std::size_t i = rest; i-- > 0;) h ^= static_cast<std::uint64_t>(tail[i]) << (8 * i);
        h *= m;
    }
    h ^= h >> r;
    h *= m;
    h ^= h >> r;
    return h;
}

std::uint32_t murmur_hash2(std::string_view data, std::uint32_t seed) {
    constexpr std::uint32_t m = 0x5bd1e995u;
    constexpr int r = 24;
    const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
    std::size_t len = data.size();
    std::uint32_t h = seed ^ static_cast<std::uint32_t>(len);
    while (len >= 4) {
        std::uint32_t k = load_le32(bytes);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
        bytes += 4;
        len -= 4;
    }
    if (len != 0) {
        for (std::size_t i = len; i-- > 0;) h ^= static_cast<std::uint32_t>(bytes[i]) << (8 * i);
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

ItemHash redisbloom_hash(std::string_view item, std::uint32_t options) {
    if ((options & kRedisBloomForce64) != 0) {
        const std::uint64_t a = murmur_hash64a(item, kSeed64);
        return ItemHash{a, murmur_hash64a(item, a)};
    }
    const std::uint32_t a = murmur_hash2(item, kSeed32);
    return ItemHash{a, murmur_hash2(item, a)};
}

double redisbloom_bpe(double error_rate) {
    const double bpe = -(std::log(error_rate) / kLn2Squared);
    return bpe < 0 ? -bpe : bpe;
}

std::uint32_t redisbloom_hashes(double bpe) {
    const double hashes = std::ceil(kLn2 * bpe);
    // Beyond any bound (kMaxHashes): saturate instead of an undefined cast.
    if (!(hashes < 1e9)) return 1000000000u;
    return hashes < 0 ? 0 : static_cast<std::uint32_t>(hashes);
}

std::optional<LayerGeometry> redisbloom_layer(std::uint64_t entries, double error_rate,
                                              std::uint32_t options) {
    if (entries < 1 || !(error_rate > 0) || !(error_rate < 1.0)) return std::nullopt;
    if ((options & kRedisBloomEntsIsBits) != 0) return std::nullopt;
    const double bpe = redisbloom_bpe(error_rate);
    const double wanted = static_cast<double>(entries) * bpe;
    // Conversions of doubles at or past 2^64 are undefined; no layer that
    // large is within the bounds anyway.
    if (!(wanted < 9.2e18)) return std::nullopt;
    std::uint64_t bits = 0;
    std::uint8_t n2 = 0;
    if ((options & kRedisBloomNoRound) != 0) {
        bits = static_cast<std::uint64_t>(wanted);
        if (bits == 0) bits = 1;
    } else {
        const double exponent = std::logb(wanted);
        // logb of 0.5 <= x < 1 is -1: n2 = 0, one bit, as bloom_init; below
        // that RedisBloom's n2 would wrap.
        if (!(exponent >= -1.0) || exponent > 62.0) return std::nullopt;
        n2 = static_cast<std::uint8_t>(exponent + 1);
        bits = std::uint64_t{1} << n2;
        const auto spare_bits = static_cast<std::uint64_t>(static_cast<double>(bits) - wanted);
        const auto spare_items = static_cast<std::uint64_t>(static_cast<double>(spare_bits) / bpe);
        entries += spare_items;
    }
    const std::uint64_t bytes = bits % 64 != 0 ? (bits / 64 + 1) * 8 : bits / 8;
    LayerGeometry out;
    out.capacity = entries;
    out.error_rate = error_rate;
    out.bits = bytes * 8;
    out.hashes = redisbloom_hashes(bpe);
    out.layout = Layout::classic;
    out.scheme = HashScheme::redisbloom;
    out.redisbloom_bpe = bpe;
    out.redisbloom_n2 = n2;
    return out;
}

}  // namespace bloomery::bloom
