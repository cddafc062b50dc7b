#pragma once
// The CF.* family (RedisBloom's Cuckoo filter, TYPE MBbloomCF), with
// RedisBloom 2.4's replies, texts, defaults and limits; RESP3 replies as
// the BF.* family gives them (booleans, a map for CF.INFO). Its files:
//   cf_commands.cpp        creating filters, adds, lookups, deletes
//                          (CF.RESERVE, CF.ADD, CF.ADDNX, CF.INSERT,
//                          CF.INSERTNX, CF.EXISTS, CF.MEXISTS, CF.COUNT,
//                          CF.DEL, CF.COMPACT); its register_cf_commands
//                          (families.hpp) calls the one below
//   cf_chunk_commands.cpp  CF.INFO, CF.SCANDUMP, CF.LOADCHUNK
//   cf_dump.cpp            copies for DUMP, RESTORE, COPY and MIGRATE

#include <cstdint>
#include <optional>
#include <string_view>

#include "bloomery/command/context.hpp"
#include "bloomery/core/parse_int64.hpp"
#include "bloomery/core/result.hpp"
#include "bloomery/cuckoo/cuckoo_object.hpp"

namespace bloomery::command {
class Registry;
void register_cf_chunk_commands(Registry& registry);

namespace cf {

// A CF command's integer argument: Redis's strict form, nothing else.
inline std::optional<std::int64_t> integer(std::string_view text) {
    std::int64_t value = 0;
    if (!core::parse_int64(text, value)) return std::nullopt;
    return value;
}

// RedisBloom's CF_MAX_EXPANSIONS: a filter of this many sub-filters takes
// no more items ("Maximum expansions reached").
inline constexpr std::uint16_t kMaxSubFilters = 32;

// The most bytes a Cuckoo filter now holding `current` bytes may grow to:
// --max-filter-bytes, and what --maxmemory leaves.
std::uint64_t growth_limit(const Context& ctx, std::uint64_t current);

// Calls fn(CuckooObject&) if `key` holds a Cuckoo filter; false if it is
// missing or (as RedisBloom's lookups and deletes answer) holds a Bloom
// filter.
template <class Fn>
bool find(const Context& ctx, std::string_view key, Fn&& fn) {
    bool found = false;
    ctx.keyspace.with_value(key, [&](const store::ValueRef& value) {
        if (cuckoo::CuckooObject* object = value.cuckoo_or_null()) {
            found = true;
            fn(*object);
        }
    });
    return found;
}

// ---- Copies (cf_dump.cpp): DUMP, RESTORE, COPY and MIGRATE ----

// COPY's new filter: `source` copied, within --max-filter-bytes and
// --maxmemory; or the error to reply.
core::Result<cuckoo::CuckooRef> duplicate(const Context& ctx, const cuckoo::CuckooObject& source);
// RESTORE's: the filter of a verified payload of a Cuckoo filter, within
// the same limits; or the error to reply.
core::Result<cuckoo::CuckooRef> from_payload(const Context& ctx, std::string_view payload);

}  // namespace cf
}  // namespace bloomery::command
