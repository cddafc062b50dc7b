#pragma once
// The shape of an age-partitioned Bloom filter (Shtul, Baquero, Almeida,
// "Age-Partitioned Bloom Filters", 2020): a ring of k + l slices of equal
// size. Each generation of g items is added to the k newest slices (one bit
// in each); a lookup answers 1 when some k consecutive slices all hold the
// item's bit. When a generation is full the ring shifts: the oldest slice is
// cleared and becomes the newest. An item is found for at least l·g adds
// after it was added, and only by false positive after (l + 1)·g.
//
// Slices are sized so that one that took its k generations is half full:
// m = k·g / ln 2 bits. The false-positive rate then depends on (k, l) alone
// (and on how far the newest generation has filled), which is what
// choose_age_shape() searches. All functions are pure and thread-safe.

#include <array>
#include <cstdint>
#include <optional>

namespace bloomery::bloom {

struct AgeShape {
    std::uint32_t k = 0;  // slices an item is added to and a lookup needs in a row
    std::uint32_t l = 0;  // slices beyond k: the window is l generations
};

// The largest k and l choose_age_shape() considers.
inline constexpr std::uint32_t kMaxAgeK = 64;
inline constexpr std::uint32_t kMaxAgeL = 1u << 16;

// The probability that an item never added answers 1, when the newest
// generation holds `generation_fill` (0 to 1) of its g items and every older
// slice took its full generations. The rate is highest at the end of a
// generation (fill 1), which is what a requested error rate bounds.
// `scale`: slices of scale·k·g / ln 2 bits (1: the size above).
double age_false_positive_rate(AgeShape shape, double generation_fill = 1.0, double scale = 1.0);

// The probability that `slices` independent bits, bit i set with
// probability fill(i) (slice 0 the newest), hold `k` set in a row: the rate
// of a ring whose slices are that full (a dynamic program over the length
// of the run that ends at each slice). 1 for k outside [1, kMaxAgeK].
template <class Fill>
double age_run_probability(std::uint32_t k, std::uint32_t slices, Fill&& fill) {
    if (k == 0 || k > kMaxAgeK) return 1.0;
    // runs[j]: the probability that the slices seen so far hold no k in a
    // row and end in a run of exactly j set bits. What reaches k is the rate.
    std::array<double, kMaxAgeK> runs{};
    runs[0] = 1.0;
    double found = 0.0;
    for (std::uint32_t i = 0; i < slices; ++i) {
        const double p = fill(i);
        found += runs[k - 1] * p;
        // A clear bit ends every run; a set one lengthens each by one.
        double broken = 0.0;
        for (std::uint32_t j = k - 1; j > 0; --j) {
            broken += runs[j];
            runs[j] = runs[j - 1] * p;
        }
        runs[0] = (runs[0] + broken) * (1.0 - p);
    }
    return found;
}

// Bits per item of the guaranteed window (l·g items): (k + l)·k / (l·ln 2).
double age_bits_per_window_item(AgeShape shape);

// The shape of fewest bits per window item whose rate at the end of a
// generation is at most `error_rate`; nullopt when the rate is not in
// (0, 1) or no k up to kMaxAgeK reaches it.
std::optional<AgeShape> choose_age_shape(double error_rate);

// Slices are kept in blocks of this many bits (one cache line): an item's
// bit in every slice lies in the same block index, and the ring's blocks of
// one index are adjacent, so an item's k slices are k adjacent lines.
inline constexpr std::uint64_t kAgeBlockBits = 512;

// What blocks add to the rate, relatively: an absent item meets the same
// block in every slice, and a block's load varies (Poisson) from block to
// block alike in slices that share generations. To second order, over a
// run of k older slices (each of k generations, neighbours at distance d
// sharing k − d), the covariances add ln 2·(k − 1)(2k − 1)/(6B) and the
// fill's concavity takes k·ln 2/(2B) back (B: kAgeBlockBits). A simulation
// of the ring's blocks puts it somewhat lower (3.6 % at k = 12, 8.5 % at
// k = 16): the estimate errs on the safe side.
double age_block_inflation(std::uint32_t k);

// The smallest scale (≥ 1) of a slice's bits for which the rate with
// blocks, age_false_positive_rate(shape, 1, scale)·(1 + inflation), is
// within `error_rate`; 0 if not even kMaxAgeScale is (a shape chosen by
// choose_age_shape() needs a few percent; one chosen by hand may need more).
inline constexpr double kMaxAgeScale = 1024.0;
double age_slice_scale(AgeShape shape, double error_rate);

// Bits of one slice for generations of `generation_items` items:
// scale·k·g / ln 2, rounded up to whole blocks (at least one).
std::uint64_t age_slice_bits(AgeShape shape, std::uint64_t generation_items, double scale = 1.0);

}  // namespace bloomery::bloom
