#include "common.hpp"

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/core/memory.hpp"

namespace bloomery::command {

bool valid_client_name(std::string_view name) {
    for (char c : name) {
        if (c < '!' || c > '~') return false;
    }
    return true;
}

void write_module_entry(Context& ctx) {
    ctx.out.map(4);
    ctx.out.bulk("name");
    ctx.out.bulk("bf");
    ctx.out.bulk("ver");
    ctx.out.integer(kRedisBloomVersion);
    ctx.out.bulk("path");
    ctx.out.bulk("built-in");
    ctx.out.bulk("args");
    ctx.out.array(0);
}

void reply_help(Context& ctx, std::initializer_list<std::string_view> lines) {
    ctx.out.array(lines.size());
    for (std::string_view line : lines) ctx.out.simple(line);
}

bool new_filter_fits(const Context& ctx, std::span<const bloom::LayerGeometry> layers,
                     std::string_view& error) {
    const std::uint64_t max_bytes = ctx.config.max_filter_bytes;
    if (max_bytes != 0 && bloom::filter_bytes(layers) > max_bytes) {
        error = errors::kFilterTooLarge;
        return false;
    }
    if (core::memory_would_exceed(ctx.config.maxmemory,
                                  bloom::ScalableFilter::allocation_bytes(layers))) {
        error = errors::kOom;
        return false;
    }
    return true;
}

}  // namespace bloomery::command
