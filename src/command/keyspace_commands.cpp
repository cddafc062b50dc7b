// Generic key commands (DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, RENAMENX,
// COPY, TOUCH, RANDOMKEY, EXPIRE family, TTL family, PERSIST, DBSIZE,
// FLUSHALL), worded as Redis words them.

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/glob.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/allocator.hpp"
#include "bloomery/core/printable.hpp"
#include "common.hpp"
#include "families.hpp"
#include "new_filter.hpp"

namespace bloomery::command {
namespace {

// RedisBloom's module type name, which TYPE reports for a Bloom filter.
constexpr std::string_view kBloomTypeName = "MBbloom--";

void cmd_del(Context& ctx, Args argv) {
    std::int64_t removed = 0;
    for (std::size_t i = 1; i < argv.size(); ++i) removed += ctx.keyspace.erase(argv[i]) ? 1 : 0;
    if (removed) WorkerStats::bump(ctx.stats.changes, static_cast<std::uint64_t>(removed));
    ctx.out.integer(removed);
}

void cmd_exists(Context& ctx, Args argv) {
    std::int64_t count = 0;
    for (std::size_t i = 1; i < argv.size(); ++i) count += ctx.keyspace.contains(argv[i]) ? 1 : 0;
    ctx.out.integer(count);
}

void cmd_type(Context& ctx, Args argv) {
    ctx.out.simple(ctx.keyspace.contains(argv[1]) ? kBloomTypeName : "none");
}

void cmd_dbsize(Context& ctx, Args) {
    ctx.out.integer(static_cast<std::int64_t>(ctx.keyspace.size()));
}

// O(keys), as in Redis: every key is looked at (SCAN is the bounded way).
void cmd_keys(Context& ctx, Args argv) {
    const GlobPattern pattern(argv[1]);
    std::vector<std::string> keys;
    for (std::size_t shard = 0; shard < ctx.keyspace.num_shards(); ++shard) {
        for (auto& entry : ctx.keyspace.shard_entries(shard)) {
            if (pattern.match(entry.key)) keys.push_back(std::move(entry.key));
        }
    }
    ctx.out.array(keys.size());
    for (const auto& key : keys) ctx.out.bulk(key);
}

// A cursor as Redis reads it (strtoul, then nothing may follow): leading
// zeros and a sign are fine ("-1" wraps, as in Redis), an empty one is 0,
// spaces, other characters and values past 2^64 - 1 are not.
bool parse_scan_cursor(std::string_view text, std::uint64_t& out) {
    std::size_t i = 0;
    bool negative = false;
    if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
        negative = text[0] == '-';
        i = 1;
        if (text.size() == 1) return false;
    }
    std::uint64_t value = 0;
    for (; i < text.size(); ++i) {
        const unsigned digit = static_cast<unsigned char>(text[i]) - unsigned{'0'};
        if (digit > 9) return false;
        if (value > (UINT64_MAX - digit) / 10) return false;
        value = value * 10 + digit;
    }
    out = negative ? 0 - value : value;
    return true;
}

// The cursor is the keyspace's (store::Keyspace::scan): each call looks at
// about COUNT buckets, so its work is bounded whatever the key count, and it
// may return no key with a cursor that is not 0. MATCH and TYPE filter what
// those buckets held, as Redis filters after it gathers.
void cmd_scan(Context& ctx, Args argv) {
    std::uint64_t cursor;
    if (!parse_scan_cursor(argv[1], cursor)) {
        ctx.out.error(errors::kInvalidCursor);
        return;
    }
    std::string_view pattern;
    std::int64_t count = 10;
    bool type_mismatch = false;
    for (std::size_t i = 2; i < argv.size(); i += 2) {
        if (i + 1 >= argv.size()) {
            ctx.out.error(errors::kSyntax);
            return;
        }
        if (iequals(argv[i], "MATCH")) {
            pattern = argv[i + 1];
        } else if (iequals(argv[i], "COUNT")) {
            if (!parse_int64(argv[i + 1], count)) {
                ctx.out.error(errors::kNotInteger);
                return;
            }
            if (count < 1) {
                ctx.out.error(errors::kSyntax);
                return;
            }
        } else if (iequals(argv[i], "TYPE")) {
            type_mismatch = !iequals(argv[i + 1], kBloomTypeName);
        } else {
            ctx.out.error(errors::kSyntax);
            return;
        }
    }
    std::vector<std::string> keys;
    const std::uint64_t next = ctx.keyspace.scan(cursor, static_cast<std::size_t>(count), keys);
    if (type_mismatch) {
        keys.clear();
    } else if (!pattern.empty()) {
        const GlobPattern compiled(pattern);
        if (!compiled.matches_everything()) {
            std::erase_if(keys, [&](const std::string& key) { return !compiled.match(key); });
        }
    }
    ctx.out.array(2);
    ctx.out.bulk(std::to_string(next));
    ctx.out.array(keys.size());
    for (const auto& key : keys) ctx.out.bulk(key);
}

void cmd_rename(Context& ctx, Args argv) {
    if (!ctx.keyspace.rename(argv[1], argv[2])) {
        ctx.out.error(errors::kNoSuchKey);
        return;
    }
    WorkerStats::bump(ctx.stats.changes);
    ctx.out.ok();
}

// RENAMENX: 1 if renamed, 0 if the new name is taken (or is the same key).
void cmd_renamenx(Context& ctx, Args argv) {
    const std::optional<bool> renamed = ctx.keyspace.rename_if_absent(argv[1], argv[2]);
    if (!renamed) {
        ctx.out.error(errors::kNoSuchKey);
        return;
    }
    if (*renamed) WorkerStats::bump(ctx.stats.changes);
    ctx.out.integer(*renamed ? 1 : 0);
}

// COPY source destination [DB destination-db] [REPLACE], as Redis 7: 1 if
// copied (with the source's deadline), 0 if the source is missing or the
// destination exists without REPLACE. The copy is a new filter with the
// source's bits and counts, journaled with its bits (Keyspace::restore), so
// neither replay nor a replica needs the source as it was. bloomery has one
// database: DB 0 is this one, any other is out of range.
void cmd_copy(Context& ctx, Args argv) {
    bool replace = false;
    for (std::size_t j = 3; j < argv.size(); ++j) {
        if (iequals(argv[j], "REPLACE")) {
            replace = true;
        } else if (iequals(argv[j], "DB") && j + 1 < argv.size()) {
            std::int64_t db;
            // Redis reads it as an int.
            if (!parse_int64(argv[j + 1], db) || db < std::numeric_limits<int>::min() ||
                db > std::numeric_limits<int>::max()) {
                ctx.out.error(errors::kNotInteger);
                return;
            }
            if (db != 0) {
                ctx.out.error(errors::kDbIndexOutOfRange);
                return;
            }
            ++j;
        } else {
            ctx.out.error(errors::kSyntax);
            return;
        }
    }
    if (argv[1] == argv[2]) {
        ctx.out.error(errors::kSameObject);
        return;
    }
    const std::optional<store::KeySnapshot> source = ctx.keyspace.get(argv[1]);
    if (!source || (!replace && ctx.keyspace.contains(argv[2]))) {
        ctx.out.integer(0);
        return;
    }
    const bloom::ScalableFilter& filter = *source->filter;
    const std::size_t layers = filter.num_layers();
    std::vector<bloom::LayerGeometry> geometry(layers);
    for (std::size_t i = 0; i < layers; ++i) geometry[i] = filter.layer(i).geometry();
    core::Result<bloom::FilterRef> copy = build_new_filter(ctx, geometry, [&] {
        return bloom::ScalableFilter::copy_of(filter, layers, ctx.config.maxmemory);
    });
    if (!copy) {
        ctx.out.error(copy.error());
        return;
    }
    if (!ctx.keyspace.restore(argv[2], std::move(*copy), source->expire_at_ms, replace)) {
        ctx.out.integer(0);  // created by another client meanwhile
        return;
    }
    WorkerStats::bump(ctx.stats.changes);
    ctx.out.integer(1);
}

// TOUCH: how many of the keys exist; each one's access clock moves to now
// (OBJECT IDLETIME 0), as a lookup by any command does.
void cmd_touch(Context& ctx, Args argv) {
    std::int64_t count = 0;
    for (std::size_t i = 1; i < argv.size(); ++i) {
        count += ctx.keyspace.with_filter(argv[i], [](const bloom::ScalableFilter&) {}) ? 1 : 0;
    }
    ctx.out.integer(count);
}

// RANDOMKEY: a live key drawn uniformly with bounded work
// (Keyspace::random_key), nil for an empty keyspace.
void cmd_randomkey(Context& ctx, Args) {
    const std::optional<std::string> key = ctx.keyspace.random_key();
    if (key) {
        ctx.out.bulk(*key);
    } else {
        ctx.out.null();
    }
}

// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX / XX / GT / LT, as Redis 7.0's
// expireGenericCommand: options first, then the amount; seconds are refused
// where multiplying by 1000 overflows, any amount where adding the base time
// does. A deadline at or before now (negative ones too) deletes the key.
void expire_generic(Context& ctx, Args argv, bool seconds, bool absolute, std::string_view name) {
    bool nx = false, xx = false, gt = false, lt = false;
    for (std::size_t i = 3; i < argv.size(); ++i) {
        if (iequals(argv[i], "NX")) {
            nx = true;
        } else if (iequals(argv[i], "XX")) {
            xx = true;
        } else if (iequals(argv[i], "GT")) {
            gt = true;
        } else if (iequals(argv[i], "LT")) {
            lt = true;
        } else {
            std::string message(errors::kUnsupportedOption);
            core::append_printable(message, argv[i]);
            ctx.out.error(message);
            return;
        }
    }
    if (nx && (xx || gt || lt)) {
        ctx.out.error(errors::kNxXxGtLt);
        return;
    }
    if (gt && lt) {
        ctx.out.error(errors::kGtLtNx);
        return;
    }
    std::int64_t deadline;
    if (!parse_int64(argv[2], deadline)) {
        ctx.out.error(errors::kNotInteger);
        return;
    }
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
    const std::int64_t base = absolute ? 0 : store::now_ms();
    // C++ division truncates toward zero, as C's does in Redis's check.
    const bool overflows = (seconds && (deadline > kMax / 1000 || deadline < kMin / 1000)) ||
                           (seconds ? deadline * 1000 : deadline) > kMax - base;
    if (overflows) {
        std::string message(errors::kInvalidExpireTime);
        message += name;
        message += "' command";
        ctx.out.error(message);
        return;
    }
    if (seconds) deadline *= 1000;
    deadline += base;
    if (deadline <= 0) deadline = 1;  // in the past: delete now (0 would mean "no expiry")
    const std::optional<bool> changed = ctx.keyspace.update_expiry(
        argv[1], [&](std::int64_t current) -> std::optional<std::int64_t> {
            // No expiry counts as an infinite TTL for GT and LT, as in Redis.
            const bool has_ttl = current != 0;
            if ((nx && has_ttl) || (xx && !has_ttl) || (gt && (!has_ttl || deadline <= current)) ||
                (lt && has_ttl && deadline >= current)) {
                return std::nullopt;
            }
            return deadline;
        });
    const bool done = changed.value_or(false);
    if (done) WorkerStats::bump(ctx.stats.changes);
    ctx.out.integer(done ? 1 : 0);
}

void cmd_expire(Context& ctx, Args argv) {
    expire_generic(ctx, argv, true, false, "expire");
}
void cmd_pexpire(Context& ctx, Args argv) {
    expire_generic(ctx, argv, false, false, "pexpire");
}
void cmd_expireat(Context& ctx, Args argv) {
    expire_generic(ctx, argv, true, true, "expireat");
}
void cmd_pexpireat(Context& ctx, Args argv) {
    expire_generic(ctx, argv, false, true, "pexpireat");
}

void ttl_generic(Context& ctx, Args argv, bool millis, bool absolute) {
    const std::optional<std::int64_t> deadline = ctx.keyspace.expiry(argv[1]);
    if (!deadline) {
        ctx.out.integer(-2);
        return;
    }
    if (*deadline == 0) {
        ctx.out.integer(-1);
        return;
    }
    if (absolute) {
        ctx.out.integer(millis ? *deadline : *deadline / 1000);
        return;
    }
    const std::int64_t remaining = std::max<std::int64_t>(0, *deadline - store::now_ms());
    ctx.out.integer(millis ? remaining : (remaining + 500) / 1000);
}

void cmd_ttl(Context& ctx, Args argv) {
    ttl_generic(ctx, argv, false, false);
}
void cmd_pttl(Context& ctx, Args argv) {
    ttl_generic(ctx, argv, true, false);
}
void cmd_expiretime(Context& ctx, Args argv) {
    ttl_generic(ctx, argv, false, true);
}
void cmd_pexpiretime(Context& ctx, Args argv) {
    ttl_generic(ctx, argv, true, true);
}

void cmd_persist(Context& ctx, Args argv) {
    const std::optional<bool> changed = ctx.keyspace.update_expiry(
        argv[1], [](std::int64_t current) -> std::optional<std::int64_t> {
            if (current == 0) return std::nullopt;  // nothing to remove
            return 0;
        });
    const bool done = changed.value_or(false);
    if (done) WorkerStats::bump(ctx.stats.changes);
    ctx.out.integer(done ? 1 : 0);
}

void cmd_flushall(Context& ctx, Args argv) {
    if (argv.size() > 2 ||
        (argv.size() == 2 && !iequals(argv[1], "ASYNC") && !iequals(argv[1], "SYNC"))) {
        ctx.out.error(errors::kSyntax);
        return;
    }
    const std::size_t keys = ctx.keyspace.clear();
    // Give the freed pages back now (as Redis does after a FLUSHALL) rather
    // than after the allocator's decay time.
    core::allocator_release_free_memory();
    WorkerStats::bump(ctx.stats.changes, std::max<std::size_t>(keys, 1));
    ctx.out.ok();
}

}  // namespace

void register_keyspace_commands(Registry& registry) {
    registry.register_handler<cmd_del>("del");
    registry.register_handler<cmd_del>("unlink");
    registry.register_handler<cmd_exists>("exists");
    registry.register_handler<cmd_type>("type");
    registry.register_handler<cmd_dbsize>("dbsize");
    registry.register_handler<cmd_keys>("keys");
    registry.register_handler<cmd_scan>("scan");
    registry.register_handler<cmd_rename>("rename");
    registry.register_handler<cmd_renamenx>("renamenx");
    registry.register_handler<cmd_copy>("copy");
    registry.register_handler<cmd_touch>("touch");
    registry.register_handler<cmd_randomkey>("randomkey");
    registry.register_handler<cmd_expire>("expire");
    registry.register_handler<cmd_pexpire>("pexpire");
    registry.register_handler<cmd_expireat>("expireat");
    registry.register_handler<cmd_pexpireat>("pexpireat");
    registry.register_handler<cmd_ttl>("ttl");
    registry.register_handler<cmd_pttl>("pttl");
    registry.register_handler<cmd_expiretime>("expiretime");
    registry.register_handler<cmd_pexpiretime>("pexpiretime");
    registry.register_handler<cmd_persist>("persist");
    registry.register_handler<cmd_flushall>("flushall");
    registry.register_handler<cmd_flushall>("flushdb");
}

}  // namespace bloomery::command
