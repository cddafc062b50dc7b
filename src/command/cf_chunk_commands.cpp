// What a Cuckoo filter reports and how it moves by chunks: CF.INFO,
// CF.SCANDUMP and CF.LOADCHUNK, in RedisBloom's format (cuckoo_filter.hpp)
// so chunks move between RedisBloom and bloomery both ways.

#include <optional>
#include <string_view>

#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "cf_family.hpp"
#include "common.hpp"

namespace bloomery::command {
namespace {

using cuckoo::CuckooFilter;
using cuckoo::CuckooObject;

void cmd_info(Context& ctx, Args argv) {
    const bool found = ctx.keyspace.with_cuckoo(argv[1], [&](const CuckooObject& object) {
        const CuckooObject::Locked locked = object.lock();
        const CuckooFilter& filter = locked.filter();
        const auto field = [&](std::string_view name, std::uint64_t value) {
            ctx.out.simple(name);
            ctx.out.integer(static_cast<std::int64_t>(value));
        };
        ctx.out.map(8);
        field("Size", filter.info_size());
        field("Number of buckets", filter.num_buckets());
        field("Number of filters", filter.num_filters());
        field("Number of items inserted", filter.num_items());
        field("Number of items deleted", filter.num_deletes());
        field("Bucket size", filter.bucket_size());
        field("Expansion rate", filter.expansion());
        field("Max iterations", filter.max_iterations());
    });
    if (!found) ctx.out.error(errors::kNotFound);
}

// CF.SCANDUMP key iter: the iterator is checked before the key.
void cmd_scandump(Context& ctx, Args argv) {
    const std::optional<std::int64_t> pos = cf::integer(argv[2]);
    if (!pos || *pos < 0) {
        ctx.out.error(errors::kCuckooPosition);
        return;
    }
    cuckoo::DumpChunk chunk;
    const bool found = ctx.keyspace.with_cuckoo(argv[1], [&](const CuckooObject& object) {
        chunk = object.lock().filter().scandump(*pos);
    });
    if (!found) {
        ctx.out.error(errors::kNotFound);
        return;
    }
    ctx.out.array(2);
    ctx.out.integer(chunk.next);
    if (chunk.next == 0) {
        ctx.out.null();
    } else {
        ctx.out.bulk(chunk.data);
    }
}

// CF.LOADCHUNK key 1 header: a new filter as the header describes it.
void load_header(Context& ctx, std::string_view key, std::string_view header) {
    if (ctx.keyspace.contains(key)) {
        ctx.out.error(exists_error(ctx, key, store::ValueKind::cuckoo));
        return;
    }
    core::Result<CuckooFilter> filter = CuckooFilter::load_header(header, cf::growth_limit(ctx, 0));
    if (!filter) {
        // The filter's own texts are RedisBloom's, as errors.hpp has them.
        ctx.out.error(filter.error() == errors::kCuckooBadHeader ? errors::kCuckooBadHeader
                                                                 : errors::kCuckooCannotCreate);
        return;
    }
    if (!ctx.keyspace.insert_new(key, CuckooObject::make(std::move(*filter)))) {
        ctx.out.error(exists_error(ctx, key, store::ValueKind::cuckoo));
        return;
    }
    note_changes(ctx);
    ctx.out.ok();
}

void cmd_loadchunk(Context& ctx, Args argv) {
    const std::optional<std::int64_t> pos = cf::integer(argv[2]);
    if (!pos || *pos == 0) {
        ctx.out.error(errors::kCuckooPosition);
        return;
    }
    if (*pos == 1) {
        load_header(ctx, argv[1], argv[3]);
        return;
    }
    const std::string_view data = argv[3];
    bool loaded = false;
    const bool found =
        ctx.keyspace.change_cuckoo(argv[1], nullptr, data.size(),
                                   [&](CuckooFilter& filter) -> std::optional<store::CuckooChange> {
                                       loaded = filter.load_chunk(*pos, data);
                                       if (!loaded) return std::nullopt;
                                       return store::CuckooChange::chunk(*pos, data);
                                   });
    if (!found) {
        ctx.out.error(errors::kNotFound);
    } else if (!loaded) {
        ctx.out.error(errors::kCuckooBadChunk);
    } else {
        note_changes(ctx);
        ctx.out.ok();
    }
}

}  // namespace

void register_cf_chunk_commands(Registry& registry) {
    registry.register_handler<cmd_info>("cf.info");
    registry.register_handler<cmd_scandump>("cf.scandump");
    registry.register_handler<cmd_loadchunk>("cf.loadchunk");
}

}  // namespace bloomery::command
