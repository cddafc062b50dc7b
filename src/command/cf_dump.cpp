// Cuckoo filters copied for DUMP, RESTORE, COPY and MIGRATE (cf_family.hpp).

#include <new>

#include "bloomery/command/errors.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/persist/dump_payload.hpp"
#include "cf_family.hpp"
#include "common.hpp"

namespace bloomery::command::cf {

namespace {

// Whether a new filter of `bytes` bytes fits --max-filter-bytes and
// --maxmemory: ok, or the error to reply.
core::Status fits(const Context& ctx, std::uint64_t bytes) {
    if (ctx.config.max_filter_bytes != 0 && bytes > ctx.config.max_filter_bytes) {
        return refuse(errors::kFilterTooLarge);
    }
    if (core::memory_would_exceed(ctx.config.maxmemory, bytes)) return refuse(errors::kOom);
    return {};
}

}  // namespace

core::Result<cuckoo::CuckooRef> duplicate(const Context& ctx, const cuckoo::CuckooObject& source) {
    if (core::Status room = fits(ctx, source.allocated_bytes()); !room) return room.failure();
    try {
        return cuckoo::CuckooObject::make(source.copy().filter);
    } catch (const std::bad_alloc&) {
        return refuse(errors::kOutOfMemory);
    }
}

core::Result<cuckoo::CuckooRef> from_payload(const Context& ctx, std::string_view payload) {
    // The slots' size is the payload's: checked before anything is made.
    if (core::Status room = fits(ctx, payload.size()); !room) return room.failure();
    try {
        core::Result<cuckoo::CuckooFilter> filter =
            persist::parse_dump_cuckoo(payload, cuckoo::kNoLimit);
        if (!filter) return refuse(errors::kBadDataFormat);
        return cuckoo::CuckooObject::make(std::move(*filter));
    } catch (const std::bad_alloc&) {
        return refuse(errors::kOutOfMemory);
    }
}

}  // namespace bloomery::command::cf
