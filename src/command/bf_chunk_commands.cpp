// Dumping and loading a filter by chunks: BF.SCANDUMP and BF.LOADCHUNK, with
// RedisBloom's iterator protocol and texts (the payloads: bloom/dump.hpp,
// proto/resp.md).

#include <cstdint>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "bf_family.hpp"
#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/command/arg_cursor.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "common.hpp"
#include "new_filter.hpp"

namespace bloomery::command {
namespace {

// BF.SCANDUMP key iter: the key first, then the iterator (RedisBloom's
// order and text); an iterator past the end, or below 0, gives (0, "").
void cmd_scandump(Context& ctx, Args argv) {
    const std::optional<std::int64_t> iter = ArgCursor(argv, 2).next_int();
    const bool found = ctx.keyspace.with_filter(argv[1], [&](const bloom::ScalableFilter& filter) {
        if (!iter) {
            ctx.out.error(errors::kScandumpIterator);
            return;
        }
        ctx.out.array(2);
        if (*iter < 0) {
            ctx.out.integer(0);
            ctx.out.bulk("");
            return;
        }
        const bloom::DumpChunk chunk = bloom::dump_chunk(filter, *iter);
        ctx.out.integer(chunk.next_iter);
        ctx.out.bulk(chunk.data);
    });
    if (!found) ctx.out.error(errors::kNotFound);
}

// BF.LOADCHUNK key 1 header: creates the key with the filter the header
// describes, all bits clear.
core::Status load_header(Context& ctx, std::string_view key, std::string_view header_bytes) {
    // Iterator 1 is always a header, which creates the key; RedisBloom reads
    // it as data for a filter that exists, and refuses it so.
    if (ctx.keyspace.contains(key)) return refuse(errors::kBadChunkData);
    const core::Result<bloom::DumpHeader> header = bloom::parse_header(header_bytes);
    if (!header) return core::Error{"ERR " + header.error()};
    // The whole filter, every layer, is checked before anything is allocated.
    core::Result<bloom::FilterRef> filter = build_new_filter(
        ctx, header->layers, [&] { return bloom::build_filter(*header, ctx.config.maxmemory); });
    if (!filter) return filter.failure();
    if (!ctx.keyspace.insert_new(key, std::move(*filter))) return refuse(errors::kItemExists);
    return {};
}

// BF.LOADCHUNK key iter chunk (iter > 1): the chunk's bits, into the filter
// its header created.
core::Status load_data_chunk(Context& ctx, std::string_view key, std::int64_t iter,
                             std::string_view chunk) {
    std::string error;
    store::Keyspace::ChunkStatus status;
    try {
        status = ctx.keyspace.load_chunk(key, iter, chunk, error);
    } catch (const std::bad_alloc&) {
        return refuse(errors::kNoMemory);  // nothing was recorded or applied
    } catch (const std::length_error&) {
        return refuse(errors::kNoMemory);
    }
    switch (status) {
        case store::Keyspace::ChunkStatus::missing:
            return refuse(errors::kNotFound);
        case store::Keyspace::ChunkStatus::refused:
            return core::Error{"ERR " + error};
        case store::Keyspace::ChunkStatus::loaded:
            break;
    }
    return {};
}

void cmd_loadchunk(Context& ctx, Args argv) {
    const std::string_view key = argv[1];
    ArgCursor args(argv, 2);
    const std::optional<std::int64_t> iter = args.next_int();
    if (!iter) {
        ctx.out.error(errors::kLoadchunkIterator);
        return;
    }
    if (*iter < 1) {
        // RedisBloom looks for the filter first.
        ctx.out.error(ctx.keyspace.contains(key) ? errors::kInvalidIterator : errors::kNotFound);
        return;
    }
    const std::string_view data = args.next();
    const core::Status loaded =
        *iter == 1 ? load_header(ctx, key, data) : load_data_chunk(ctx, key, *iter, data);
    if (!loaded) {
        ctx.out.error(loaded.error());
        return;
    }
    note_changes(ctx);
    ctx.out.ok();
}

}  // namespace

void register_bf_chunk_commands(Registry& registry) {
    registry.register_handler<cmd_scandump>("bf.scandump");
    registry.register_handler<cmd_loadchunk>("bf.loadchunk");
}

}  // namespace bloomery::command
