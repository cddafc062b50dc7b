#include "bloomery/bloom/age_params.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace bloomery::bloom {

namespace {

// The share of slice `i`'s bits that are set (slice 0 the newest). Slice i < k
// has taken i full generations and the newest one's share; an older slice
// took its k generations and stopped. With m = k·g / ln 2, x items set a share
// 1 - e^(-x/m) = 1 - 2^(-x / (k·g)) of the bits.
double slice_fill(std::uint32_t i, std::uint32_t k, double generation_fill) {
    const double generations = i < k ? static_cast<double>(i) + generation_fill : k;
    return 1.0 - std::exp2(-generations / static_cast<double>(k));
}

}  // namespace

double age_false_positive_rate(AgeShape shape, double generation_fill) {
    if (shape.k == 0 || shape.k > kMaxAgeK) return 1.0;
    const double fill = std::clamp(generation_fill, 0.0, 1.0);
    return age_run_probability(shape.k, shape.k + shape.l,
                               [&](std::uint32_t i) { return slice_fill(i, shape.k, fill); });
}

double age_bits_per_window_item(AgeShape shape) {
    if (shape.k == 0 || shape.l == 0) return 0.0;
    const double k = shape.k;
    const double l = shape.l;
    return (k + l) * k / (l * std::numbers::ln2);
}

std::optional<AgeShape> choose_age_shape(double error_rate) {
    if (!(error_rate > 0.0 && error_rate < 1.0)) return std::nullopt;
    std::optional<AgeShape> best;
    double best_bits = 0.0;
    for (std::uint32_t k = 1; k <= kMaxAgeK; ++k) {
        // However long the window, k slices of half-full bits cost k / ln 2
        // per item: no larger k can do better than the best found.
        if (best && static_cast<double>(k) / std::numbers::ln2 >= best_bits) break;
        const auto fits = [&](std::uint32_t l) {
            return age_false_positive_rate({k, l}) <= error_rate;
        };
        if (!fits(1)) continue;
        // The rate grows with l: double while it fits, then bisect between
        // the last l that fits and the first that does not (or the cap).
        std::uint32_t low = 1;
        std::uint32_t high = 2;
        while (high <= kMaxAgeL && fits(high)) {
            low = high;
            high *= 2;
        }
        high = std::min(high, kMaxAgeL + 1);
        while (high - low > 1) {
            const std::uint32_t middle = low + (high - low) / 2;
            (fits(middle) ? low : high) = middle;
        }
        const AgeShape shape{k, low};
        const double bits = age_bits_per_window_item(shape);
        if (!best || bits < best_bits) {
            best = shape;
            best_bits = bits;
        }
    }
    return best;
}

std::uint64_t age_slice_bits(AgeShape shape, std::uint64_t generation_items) {
    const double bits = std::ceil(static_cast<double>(shape.k) *
                                  static_cast<double>(generation_items) / std::numbers::ln2);
    const auto words = static_cast<std::uint64_t>(std::ceil(bits / 64.0));
    return std::max<std::uint64_t>(words, 1) * 64;
}

}  // namespace bloomery::bloom
