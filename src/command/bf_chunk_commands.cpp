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
#include "bloomery/bloom/age_header.hpp"
#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/command/arg_cursor.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/memory.hpp"
#include "common.hpp"
#include "new_filter.hpp"

namespace bloomery::command {
namespace {

// BF.SCANDUMP key iter: the key first, then the iterator (RedisBloom's
// order and text); an iterator past the end, or below 0, gives (0, "").
// An expiring filter's chunks: at 0 its header with its counts, then its
// words, chunk j at iterator j + 1 (bloom/age_header.hpp).
void scandump_age(Context& ctx, const bloom::AgeFilter& filter, std::int64_t iter) {
    if (iter == 0) {
        ctx.out.integer(1);
        ctx.out.bulk(bloom::encode_age_dump_header(filter));
        return;
    }
    // Chunks of zero words are left out: the filter a header creates is
    // all zero, and a chunk is placed by its iterator.
    const std::uint64_t chunk = bloom::next_age_chunk(filter, static_cast<std::uint64_t>(iter - 1));
    if (chunk >= bloom::age_chunks(filter)) {
        ctx.out.integer(0);
        ctx.out.bulk("");
        return;
    }
    ctx.out.integer(static_cast<std::int64_t>(chunk) + 2);
    ctx.out.bulk(bloom::age_chunk(filter, chunk));
}

void cmd_scandump(Context& ctx, Args argv) {
    const std::optional<std::int64_t> iter = ArgCursor(argv, 2).next_int();
    const bool found = ctx.keyspace.with_value(argv[1], [&](const store::ValueRef& value) {
        if (!iter) {
            ctx.out.error(errors::kScandumpIterator);
            return;
        }
        const bloom::ScalableFilter* plain = value.bloom_or_null();
        const bloom::AgeFilter* age = plain == nullptr ? &value.age() : nullptr;
        ctx.out.array(2);
        if (*iter < 0) {
            ctx.out.integer(0);
            ctx.out.bulk("");
            return;
        }
        if (age != nullptr) {
            scandump_age(ctx, *age, *iter);
            return;
        }
        const bloom::ScalableFilter& filter = *plain;
        // A counting filter's cells as of one moment within the chunk.
        const std::unique_lock serial = filter.serialize_changes();
        const bloom::DumpChunk chunk = bloom::dump_chunk(filter, *iter);
        ctx.out.integer(chunk.next_iter);
        ctx.out.bulk(chunk.data);
    });
    if (!found) ctx.out.error(errors::kNotFound);
}

// BF.LOADCHUNK key 1 header of an expiring filter, `key` missing: creates
// it with the header's shape, generation and counts, all bits clear.
core::Status load_age_header(Context& ctx, std::string_view key, std::string_view bytes) {
    const core::Result<bloom::AgeDumpHeader> dumped = bloom::decode_age_dump_header(bytes);
    if (!dumped) return core::Error{"ERR " + dumped.error()};
    core::Result<bloom::AgeFilterRef> filter = build_new_age_filter(
        ctx, dumped->header.geometry, [&] { return bloom::create_dumped(*dumped); });
    if (!filter) return filter.failure();
    if (!ctx.keyspace.insert_new(key, std::move(*filter))) return refuse(errors::kItemExists);
    return {};
}

// BF.LOADCHUNK key 1 header, `key` missing: creates it with the filter the
// header describes, all bits clear. A payload that is no header of either
// format is refused as RedisBloom refuses it; a header of either format with
// the check it fails (bloom::parse_header: RedisBloom's texts for
// RedisBloom's format, bloomery's own checks for its own).
core::Status load_header(Context& ctx, std::string_view key, std::string_view header_bytes) {
    if (header_bytes.starts_with(bloom::kAgeHeaderMagic))
        return load_age_header(ctx, key, header_bytes);
    if (bloom::header_format(header_bytes) == bloom::HeaderFormat::unknown) {
        return refuse(errors::kBadChunkData);
    }
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
// its header created, checked in the format of its scheme.
core::Status load_data_chunk(Context& ctx, std::string_view key, std::int64_t iter,
                             std::string_view chunk) {
    core::Result<store::Keyspace::ChunkStatus> loaded = store::Keyspace::ChunkStatus::missing;
    try {
        loaded = ctx.keyspace.load_chunk(key, iter, chunk);
    } catch (const std::bad_alloc&) {
        return refuse(errors::kNoMemory);  // nothing was recorded or applied
    } catch (const std::length_error&) {
        return refuse(errors::kNoMemory);
    }
    if (!loaded) return core::Error{"ERR " + loaded.error()};
    if (*loaded == store::Keyspace::ChunkStatus::missing) return refuse(errors::kNotFound);
    return {};
}

// Where BF.LOADCHUNK's payload goes, decided as RedisBloom decides it: the
// filter first. Into a filter that exists, iterator 1 (a header's) and those
// below it are data RedisBloom refuses (below the chunk's length; it also
// refuses a one-byte chunk at 1 as "no link" and takes an empty one, neither
// of which carries a bit). A missing filter is created by a header alone.
core::Status load_payload(Context& ctx, std::string_view key, std::int64_t iter,
                          std::string_view payload) {
    if (iter > 1) return load_data_chunk(ctx, key, iter, payload);
    if (ctx.keyspace.contains(key)) return refuse(errors::kBadChunkData);
    if (iter < 1) return refuse(errors::kNotFound);
    return load_header(ctx, key, payload);
}

void cmd_loadchunk(Context& ctx, Args argv) {
    ArgCursor args(argv, 2);
    const std::optional<std::int64_t> iter = args.next_int();
    if (!iter) {
        ctx.out.error(errors::kLoadchunkIterator);
        return;
    }
    const core::Status loaded = load_payload(ctx, argv[1], *iter, args.next());
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
