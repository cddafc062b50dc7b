#include "bloomery/bloom/hash.hpp"

#include <murmurhash.h>

#include <algorithm>
#include <climits>

namespace bloomery::bloom {

namespace {

// Fixed forever: snapshots and SCANDUMP payloads store bit positions derived
// from it. (Arbitrary odd constant, the 32-bit golden-ratio value.)
constexpr std::uint32_t kHashSeed = 0x9e3779b9u;

}  // namespace

ItemHash hash_item(std::string_view item) {
    std::uint64_t out[2];
    if (item.size() <= UINT_MAX) {
        lmmh_x64_128(item.data(), static_cast<unsigned>(item.size()), kHashSeed, out);
    } else {
        // lmmh_x64_128 takes an unsigned length. Items over 4 GiB cannot
        // arrive through the protocol (bulk strings are capped far lower), but
        // hash them fully anyway: chain fixed-size pieces, seeding each from
        // the previous digest, so no byte is ignored.
        constexpr std::size_t kPiece = std::size_t{1} << 30;
        std::uint32_t seed = kHashSeed;
        std::size_t offset = 0;
        std::uint64_t acc[2] = {0, 0};
        while (offset < item.size()) {
            const std::size_t len = std::min(kPiece, item.size() - offset);
            lmmh_x64_128(item.data() + offset, static_cast<unsigned>(len), seed, out);
            acc[0] ^= out[0];
            acc[1] = acc[1] * 0x9e3779b97f4a7c15ull + out[1];
            seed = static_cast<std::uint32_t>(out[0] >> 32);
            offset += len;
        }
        out[0] = acc[0];
        out[1] = acc[1];
    }
    // h2 is forced odd. With h2 == 0 the double-hashing sequence degenerates
    // (probes 0 and 1 both land on h1, so a k-probe item sets fewer bits).
    // An odd h2 can never be 0 and also makes i·h2 a permutation of 2^64
    // residues, so probes never repeat modulo 2^64. The cost is one bit of h2's
    // 64 bits of entropy, which the fast-range reduction never sees anyway
    // (it keeps the high bits).
    return ItemHash{out[0], out[1] | 1u};
}

}  // namespace bloomery::bloom
