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

}  // namespace bloomery::command
