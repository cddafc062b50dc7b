#include "new_filter.hpp"

#include "bloomery/core/memory.hpp"

namespace bloomery::command {

core::Status new_filter_fits(const Context& ctx, std::span<const bloom::LayerGeometry> layers) {
    const std::uint64_t max_bytes = ctx.config.max_filter_bytes;
    if (max_bytes != 0 && bloom::filter_bytes(layers) > max_bytes) {
        return refuse(errors::kFilterTooLarge);
    }
    if (core::memory_would_exceed(ctx.config.maxmemory,
                                  bloom::ScalableFilter::allocation_bytes(layers))) {
        return refuse(errors::kOom);
    }
    return {};
}

core::Status new_age_filter_fits(const Context& ctx, const bloom::AgeGeometry& geometry) {
    const std::uint64_t bytes = geometry.slices() * (geometry.slice_bits / 8);
    const std::uint64_t max_bytes = ctx.config.max_filter_bytes;
    if (max_bytes != 0 && bytes > max_bytes) return refuse(errors::kFilterTooLarge);
    if (core::memory_would_exceed(ctx.config.maxmemory, bytes)) return refuse(errors::kOom);
    return {};
}

}  // namespace bloomery::command
