// Generic key commands (DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, RENAMENX,
// COPY, TOUCH, RANDOMKEY, EXPIRE family, TTL family, PERSIST, DBSIZE,
// FLUSHALL), worded as Redis words them.

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bloomery/bloom/age_header.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/glob.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/allocator.hpp"
#include "bloomery/core/printable.hpp"
#include "cf_family.hpp"
#include "common.hpp"
#include "families.hpp"
#include "new_filter.hpp"

namespace bloomery::command {
namespace {

// RedisBloom's module type names, which TYPE reports for a Bloom and a
// Cuckoo filter.
constexpr std::string_view kBloomTypeName = "MBbloom--";
constexpr std::string_view kCuckooTypeName = "MBbloomCF";

std::string_view type_name(store::ValueKind kind) {
    return kind == store::ValueKind::cuckoo ? kCuckooTypeName : kBloomTypeName;
}

void cmd_del(Context& ctx, Args argv) {
    std::int64_t removed = 0;
    for (std::size_t i = 1; i < argv.size(); ++i) removed += ctx.keyspace.erase(argv[i]) ? 1 : 0;
    note_changes(ctx, static_cast<std::uint64_t>(removed));
    ctx.out.integer(removed);
}

void cmd_exists(Context& ctx, Args argv) {
    std::int64_t count = 0;
    for (std::size_t i = 1; i < argv.size(); ++i) count += ctx.keyspace.contains(argv[i]) ? 1 : 0;
    ctx.out.integer(count);
}

void cmd_type(Context& ctx, Args argv) {
    const std::optional<store::KeyDetails> key = ctx.keyspace.inspect(argv[1]);
    ctx.out.simple(key ? type_name(key->value.kind()) : "none");
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
std::optional<std::uint64_t> parse_scan_cursor(std::string_view text) {
    std::size_t i = 0;
    bool negative = false;
    if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
        negative = text[0] == '-';
        i = 1;
        if (text.size() == 1) return std::nullopt;
    }
    std::uint64_t value = 0;
    for (; i < text.size(); ++i) {
        const unsigned digit = static_cast<unsigned char>(text[i]) - unsigned{'0'};
        if (digit > 9) return std::nullopt;
        if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
        value = value * 10 + digit;
    }
    return negative ? 0 - value : value;
}

// SCAN's options, each a word and its value, as Redis 7 reads them (the
// last of a repeated one counts).
struct ScanOptions {
    std::string_view pattern;  // MATCH; empty: every key
    std::int64_t count = 10;   // COUNT: about how many buckets to look at
    // TYPE: only keys of this kind; a type no filter has answers no key.
    std::optional<store::ValueKind> kind;
    bool other_type = false;
};

core::Result<ScanOptions> parse_scan_options(Args argv) {
    ScanOptions options;
    ArgCursor args(argv, 2);
    while (args.has_next()) {
        if (args.remaining() < 2) return refuse(errors::kSyntax);
        if (args.eat("MATCH")) {
            options.pattern = args.next();
        } else if (args.eat("COUNT")) {
            const core::Result<std::int64_t> count = args.take_int(errors::kNotInteger);
            if (!count) return count.failure();
            if (*count < 1) return refuse(errors::kSyntax);
            options.count = *count;
        } else if (args.eat("TYPE")) {
            const std::string_view type = args.next();
            options.kind.reset();
            options.other_type = false;
            if (iequals(type, kBloomTypeName)) {
                options.kind = store::ValueKind::bloom;
            } else if (iequals(type, kCuckooTypeName)) {
                options.kind = store::ValueKind::cuckoo;
            } else {
                options.other_type = true;
            }
        } else {
            return refuse(errors::kSyntax);
        }
    }
    return options;
}

// The cursor is the keyspace's (store::Keyspace::scan): each call looks at
// about COUNT buckets, so its work is bounded whatever the key count, and it
// may return no key with a cursor that is not 0. MATCH and TYPE filter what
// those buckets held, as Redis filters after it gathers.
void cmd_scan(Context& ctx, Args argv) {
    const std::optional<std::uint64_t> cursor = parse_scan_cursor(argv[1]);
    if (!cursor) {
        ctx.out.error(errors::kInvalidCursor);
        return;
    }
    const core::Result<ScanOptions> options = parse_scan_options(argv);
    if (!options) {
        ctx.out.error(options.error());
        return;
    }
    std::vector<std::string> keys;
    const std::uint64_t next =
        ctx.keyspace.scan(*cursor, static_cast<std::size_t>(options->count), keys);
    if (options->other_type) {
        keys.clear();
    } else if (options->kind) {
        std::erase_if(keys, [&](const std::string& key) {
            const std::optional<store::KeyDetails> found = ctx.keyspace.inspect(key);
            return !found || found->value.kind() != *options->kind;
        });
    }
    if (!options->other_type && !options->pattern.empty()) {
        const GlobPattern compiled(options->pattern);
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
    note_changes(ctx);
    ctx.out.ok();
}

// RENAMENX: 1 if renamed, 0 if the new name is taken (or is the same key).
void cmd_renamenx(Context& ctx, Args argv) {
    const std::optional<bool> renamed = ctx.keyspace.rename_if_absent(argv[1], argv[2]);
    if (!renamed) {
        ctx.out.error(errors::kNoSuchKey);
        return;
    }
    if (*renamed) note_changes(ctx);
    ctx.out.integer(*renamed ? 1 : 0);
}

// COPY's options after the two keys: REPLACE, DB destination-db. bloomery
// has one database: DB 0 is this one, any other is out of range.
core::Result<IfExists> parse_copy_options(Args argv) {
    IfExists if_exists = IfExists::keep;
    ArgCursor args(argv, 3);
    while (args.has_next()) {
        if (args.eat("REPLACE")) {
            if_exists = IfExists::replace;
        } else if (args.remaining() >= 2 && args.eat("DB")) {
            const std::optional<std::int64_t> db = args.next_int();
            // Redis reads it as an int.
            if (!db || *db < std::numeric_limits<int>::min() ||
                *db > std::numeric_limits<int>::max()) {
                return refuse(errors::kNotInteger);
            }
            if (*db != 0) return refuse(errors::kDbIndexOutOfRange);
        } else {
            return refuse(errors::kSyntax);
        }
    }
    return if_exists;
}

// COPY of a Cuckoo filter: a copy taken under its lock, linked with its
// slots recorded (Keyspace::restore()).
// Links a copy under `to` and answers COPY: 1, or 0 when `to` was created
// by another client meanwhile (without REPLACE).
void link_copy(Context& ctx, std::string_view to, store::ValueRef copy, std::int64_t expire_at_ms,
               bool replace) {
    if (!ctx.keyspace.restore(
            to, std::move(copy),
            {.expire_at_ms = expire_at_ms,
             .if_live = replace ? store::IfLive::replace : store::IfLive::keep})) {
        ctx.out.integer(0);
        return;
    }
    note_changes(ctx);
    ctx.out.integer(1);
}

void copy_cuckoo(Context& ctx, std::string_view to, const cuckoo::CuckooObject& source,
                 std::int64_t expire_at_ms, bool replace) {
    core::Result<cuckoo::CuckooRef> copy = cf::duplicate(ctx, source);
    if (!copy) {
        ctx.out.error(copy.error());
        return;
    }
    link_copy(ctx, to, std::move(*copy), expire_at_ms, replace);
}

// An expiring filter's copy: its header, counts and words.
void copy_expiring(Context& ctx, std::string_view to, const bloom::AgeFilter& source,
                   std::int64_t expire_at_ms, bool replace) {
    core::Result<bloom::AgeFilterRef> copy =
        build_new_age_filter(ctx, source.geometry(), [&] { return bloom::copy_age(source); });
    if (!copy) {
        ctx.out.error(copy.error());
        return;
    }
    link_copy(ctx, to, std::move(*copy), expire_at_ms, replace);
}

// COPY source destination [DB destination-db] [REPLACE], as Redis 7: 1 if
// copied (with the source's deadline), 0 if the source is missing or the
// destination exists without REPLACE. The copy is a new filter with the
// source's bits and counts, journaled with its bits (Keyspace::restore), so
// neither replay nor a replica needs the source as it was.
void cmd_copy(Context& ctx, Args argv) {
    const core::Result<IfExists> if_exists = parse_copy_options(argv);
    if (!if_exists) {
        ctx.out.error(if_exists.error());
        return;
    }
    const bool replace = *if_exists == IfExists::replace;
    if (argv[1] == argv[2]) {
        ctx.out.error(errors::kSameObject);
        return;
    }
    const std::optional<store::KeySnapshot> source = ctx.keyspace.get(argv[1]);
    if (!source || (!replace && ctx.keyspace.contains(argv[2]))) {
        ctx.out.integer(0);
        return;
    }
    if (const cuckoo::CuckooObject* object = source->value.cuckoo_or_null()) {
        copy_cuckoo(ctx, argv[2], *object, source->expire_at_ms, replace);
        return;
    }
    if (const bloom::AgeFilter* age = source->value.age_or_null()) {
        copy_expiring(ctx, argv[2], *age, source->expire_at_ms, replace);
        return;
    }
    const bloom::ScalableFilter& filter = source->value.filter();
    const std::size_t layers = filter.num_layers();
    std::vector<bloom::LayerGeometry> geometry(layers);
    for (std::size_t i = 0; i < layers; ++i) geometry[i] = filter.layer(i).geometry();
    core::Result<bloom::FilterRef> copy = build_new_filter(ctx, geometry, [&] {
        // A counting filter's cells and counts as of one moment.
        const std::unique_lock serial = filter.serialize_changes();
        return bloom::ScalableFilter::copy_of(filter, layers, ctx.config.maxmemory);
    });
    if (!copy) {
        ctx.out.error(copy.error());
        return;
    }
    link_copy(ctx, argv[2], std::move(*copy), source->expire_at_ms, replace);
}

// TOUCH: how many of the keys exist; each one's access clock moves to now
// (OBJECT IDLETIME 0), as a lookup by any command does.
void cmd_touch(Context& ctx, Args argv) {
    std::int64_t count = 0;
    for (std::size_t i = 1; i < argv.size(); ++i) {
        count += ctx.keyspace.with_value(argv[i], [](const store::ValueRef&) {}) ? 1 : 0;
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

// The unit of a time a command takes or answers.
enum class TimeUnit { seconds, milliseconds };

// What each command of the EXPIRE and TTL families takes or answers.
struct TimeForm {
    TimeUnit unit;
    TimeBase base;
};

// EXPIRE's conditions, NX / XX / GT / LT, as Redis 7.0 reads them: any order,
// repeats allowed, then the incompatible pairs refused.
struct ExpireConditions {
    bool nx = false;  // only a key without a deadline
    bool xx = false;  // only a key with one
    bool gt = false;  // only a later deadline (none counts as infinite)
    bool lt = false;  // only an earlier one

    // Whether a key whose deadline is `current` (0: none) takes `deadline`.
    bool allow(std::int64_t current, std::int64_t deadline) const {
        // No expiry counts as an infinite TTL for GT and LT, as in Redis.
        const bool has_ttl = current != 0;
        return !((nx && has_ttl) || (xx && !has_ttl) || (gt && (!has_ttl || deadline <= current)) ||
                 (lt && has_ttl && deadline >= current));
    }
};

core::Result<ExpireConditions> parse_expire_conditions(Args argv) {
    ExpireConditions when;
    ArgCursor args(argv, 3);
    while (args.has_next()) {
        if (args.eat("NX")) {
            when.nx = true;
        } else if (args.eat("XX")) {
            when.xx = true;
        } else if (args.eat("GT")) {
            when.gt = true;
        } else if (args.eat("LT")) {
            when.lt = true;
        } else {
            std::string message(errors::kUnsupportedOption);
            core::append_printable(message, args.peek());
            return core::Error{std::move(message)};
        }
    }
    if (when.nx && (when.xx || when.gt || when.lt)) return refuse(errors::kNxXxGtLt);
    if (when.gt && when.lt) return refuse(errors::kGtLtNx);
    return when;
}

// The deadline (Unix time in ms) an EXPIRE-family `amount` names; nullopt
// where Redis refuses it: seconds where multiplying by 1000 overflows, any
// amount where adding the base time does. A deadline at or before now
// (negative ones too) is 1, which deletes the key.
std::optional<std::int64_t> expire_deadline(std::int64_t amount, TimeForm form) {
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
    const bool seconds = form.unit == TimeUnit::seconds;
    const std::int64_t base = form.base == TimeBase::unix_time ? 0 : store::now_ms();
    // C++ division truncates toward zero, as C's does in Redis's check.
    if ((seconds && (amount > kMax / 1000 || amount < kMin / 1000)) ||
        (seconds ? amount * 1000 : amount) > kMax - base) {
        return std::nullopt;
    }
    const std::int64_t deadline = (seconds ? amount * 1000 : amount) + base;
    return deadline <= 0 ? 1 : deadline;  // 0 would mean "no expiry"
}

// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX / XX / GT / LT, as Redis 7.0's
// expireGenericCommand: options first, then the amount.
void expire_generic(Context& ctx, Args argv, TimeForm form, std::string_view name) {
    const core::Result<ExpireConditions> when = parse_expire_conditions(argv);
    if (!when) {
        ctx.out.error(when.error());
        return;
    }
    const std::optional<std::int64_t> amount = ArgCursor(argv, 2).next_int();
    if (!amount) {
        ctx.out.error(errors::kNotInteger);
        return;
    }
    const std::optional<std::int64_t> deadline = expire_deadline(*amount, form);
    if (!deadline) {
        std::string message(errors::kInvalidExpireTime);
        message += name;
        message += "' command";
        ctx.out.error(message);
        return;
    }
    const std::optional<bool> changed = ctx.keyspace.update_expiry(
        argv[1], [&](std::int64_t current) -> std::optional<std::int64_t> {
            if (!when->allow(current, *deadline)) return std::nullopt;
            return *deadline;
        });
    const bool done = changed.value_or(false);
    if (done) note_changes(ctx);
    ctx.out.integer(done ? 1 : 0);
}

void cmd_expire(Context& ctx, Args argv) {
    expire_generic(ctx, argv, {TimeUnit::seconds, TimeBase::from_now}, "expire");
}
void cmd_pexpire(Context& ctx, Args argv) {
    expire_generic(ctx, argv, {TimeUnit::milliseconds, TimeBase::from_now}, "pexpire");
}
void cmd_expireat(Context& ctx, Args argv) {
    expire_generic(ctx, argv, {TimeUnit::seconds, TimeBase::unix_time}, "expireat");
}
void cmd_pexpireat(Context& ctx, Args argv) {
    expire_generic(ctx, argv, {TimeUnit::milliseconds, TimeBase::unix_time}, "pexpireat");
}

// TTL, PTTL (what is left, rounded to the nearest second for TTL) and
// EXPIRETIME, PEXPIRETIME (the deadline): -2 for a missing key, -1 for one
// without a deadline.
void ttl_generic(Context& ctx, Args argv, TimeForm form) {
    const std::optional<std::int64_t> deadline = ctx.keyspace.expiry(argv[1]);
    if (!deadline) {
        ctx.out.integer(-2);
        return;
    }
    if (*deadline == 0) {
        ctx.out.integer(-1);
        return;
    }
    const bool millis = form.unit == TimeUnit::milliseconds;
    if (form.base == TimeBase::unix_time) {
        ctx.out.integer(millis ? *deadline : *deadline / 1000);
        return;
    }
    const std::int64_t remaining = std::max<std::int64_t>(0, *deadline - store::now_ms());
    ctx.out.integer(millis ? remaining : (remaining + 500) / 1000);
}

void cmd_ttl(Context& ctx, Args argv) {
    ttl_generic(ctx, argv, {TimeUnit::seconds, TimeBase::from_now});
}
void cmd_pttl(Context& ctx, Args argv) {
    ttl_generic(ctx, argv, {TimeUnit::milliseconds, TimeBase::from_now});
}
void cmd_expiretime(Context& ctx, Args argv) {
    ttl_generic(ctx, argv, {TimeUnit::seconds, TimeBase::unix_time});
}
void cmd_pexpiretime(Context& ctx, Args argv) {
    ttl_generic(ctx, argv, {TimeUnit::milliseconds, TimeBase::unix_time});
}

void cmd_persist(Context& ctx, Args argv) {
    const std::optional<bool> changed = ctx.keyspace.update_expiry(
        argv[1], [](std::int64_t current) -> std::optional<std::int64_t> {
            if (current == 0) return std::nullopt;  // nothing to remove
            return 0;
        });
    const bool done = changed.value_or(false);
    if (done) note_changes(ctx);
    ctx.out.integer(done ? 1 : 0);
}

// FLUSHALL / FLUSHDB [ASYNC | SYNC]: either way the keys go at once.
void cmd_flushall(Context& ctx, Args argv) {
    ArgCursor args(argv);
    args.eat_one_of({"ASYNC", "SYNC"});
    if (args.has_next()) {
        ctx.out.error(errors::kSyntax);
        return;
    }
    const std::size_t keys = ctx.keyspace.clear();
    // Give the freed pages back now (as Redis does after a FLUSHALL) rather
    // than after the allocator's decay time.
    core::allocator_release_free_memory();
    note_changes(ctx, std::max<std::size_t>(keys, 1));
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
