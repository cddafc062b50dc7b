#include "bloomery/bloom/age_params.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace bloomery::bloom {

namespace {

// The share of slice `i`'s bits that are set (slice 0 the newest). Slice i < k
// has taken i full generations and the newest one's share; an older slice
// took its k generations and stopped. With m = scale·k·g / ln 2, x items set
// a share 1 - e^(-x/m) = 1 - 2^(-x / (scale·k·g)) of the bits.
double slice_fill(std::uint32_t i, std::uint32_t k, double generation_fill, double scale) {
    const double generations = i < k ? static_cast<double>(i) + generation_fill : k;
    return 1.0 - std::exp2(-generations / (scale * static_cast<double>(k)));
}

}  // namespace

double age_false_positive_rate(AgeShape shape, double generation_fill, double scale) {
    if (shape.k == 0 || shape.k > kMaxAgeK) return 1.0;
    const double fill = std::clamp(generation_fill, 0.0, 1.0);
    return age_run_probability(shape.k, shape.k + shape.l, [&](std::uint32_t i) {
        return slice_fill(i, shape.k, fill, scale);
    });
}

double age_block_inflation(std::uint32_t k) {
    const double kk = k;
    const auto b = static_cast<double>(kAgeBlockBits);
    const double covariance = std::numbers::ln2 * (kk - 1) * (2 * kk - 1) / (6 * b);
    const double concavity = kk * std::numbers::ln2 / (2 * b);
    return std::max(0.0, covariance - concavity);
}

double age_slice_scale(AgeShape shape, double error_rate) {
    const double inflation = 1.0 + age_block_inflation(shape.k);
    const auto fits = [&](double scale) {
        return age_false_positive_rate(shape, 1.0, scale) * inflation <= error_rate;
    };
    if (fits(1.0)) return 1.0;
    // A shape chosen for the rate needs a few percent more; one a user
    // chose may need many times the bits. Double until it fits, then bisect.
    double low = 1.0;  // does not fit
    double high = 2.0;
    while (!fits(high)) {
        low = high;
        high *= 2;
        if (high > kMaxAgeScale) return 0.0;
    }
    for (int step = 0; step < 40; ++step) {
        const double middle = (low + high) / 2;
        (fits(middle) ? high : low) = middle;
    }
    return high;
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

std::uint64_t age_slice_bits(AgeShape shape, std::uint64_t generation_items, double scale) {
    const double bits = std::ceil(scale * static_cast<double>(shape.k) *
                                  static_cast<double>(generation_items) / std::numbers::ln2);
    const auto blocks =
        static_cast<std::uint64_t>(std::ceil(bits / static_cast<double>(kAgeBlockBits)));
    return std::max<std::uint64_t>(blocks, 1) * kAgeBlockBits;
}

}  // namespace bloomery::bloom
