#pragma once
// A new filter made for a client (BF.RESERVE and the add that creates a key,
// BF.LOADCHUNK's header, RESTORE, COPY), within the configured limits: every
// such path goes through build_new_filter, so they all refuse alike and
// before anything is allocated.

#include <new>
#include <span>

#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/command/context.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/core/result.hpp"
#include "common.hpp"

namespace bloomery::command {

// Whether a new filter of these layers fits --max-filter-bytes (all layers
// together) and --maxmemory: ok, or the error to reply (errors::kFilterTooLarge,
// errors::kOom). Allocates nothing.
core::Status new_filter_fits(const Context& ctx, std::span<const bloom::LayerGeometry> layers);

// The filter `build()` makes (a bloom::FilterRef, empty when reserving its
// bytes against --maxmemory failed: they are reserved before they are
// allocated, so clients creating filters at once never together pass the
// limit), built only once new_filter_fits agrees;
// or the error to reply: new_filter_fits's, errors::kOom for an empty
// reference, errors::kOutOfMemory when the allocation throws std::bad_alloc.
// Nothing stays allocated on a refusal.
template <class Build>
core::Result<bloom::FilterRef> build_new_filter(const Context& ctx,
                                                std::span<const bloom::LayerGeometry> layers,
                                                Build&& build) {
    if (core::Status fits = new_filter_fits(ctx, layers); !fits) return fits.failure();
    bloom::FilterRef filter;
    try {
        filter = build();
    } catch (const std::bad_alloc&) {
        return refuse(errors::kOutOfMemory);
    }
    if (!filter) return refuse(errors::kOom);
    return filter;
}

// The same for an expiring filter of `geometry` (bloom/age_filter.hpp):
// build() makes it once its bytes fit --max-filter-bytes and --maxmemory.
core::Status new_age_filter_fits(const Context& ctx, const bloom::AgeGeometry& geometry);
template <class Build>
core::Result<bloom::AgeFilterRef> build_new_age_filter(const Context& ctx,
                                                       const bloom::AgeGeometry& geometry,
                                                       Build&& build) {
    if (core::Status fits = new_age_filter_fits(ctx, geometry); !fits) return fits.failure();
    try {
        return build();
    } catch (const std::bad_alloc&) {
        return refuse(errors::kOutOfMemory);
    }
}

}  // namespace bloomery::command
