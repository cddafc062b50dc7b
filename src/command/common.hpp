#pragma once
// Private helpers shared by several command families.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "bloomery/command/context.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::command {

// The Redis version we announce in HELLO and INFO: clients gate features on
// it (redis-py, go-redis and redis-cli expect 6+ for HELLO/RESP3 and 7 for
// COMMAND DOCS). bloomery's own version is reported beside it.
inline constexpr std::string_view kRedisCompatVersion = "7.0.15";

// The RedisBloom version whose BF.* replies bloomery follows (2.4.23), as
// MODULE LIST, HELLO and INFO modules show the "bf" module.
inline constexpr int kRedisBloomVersion = 20423;

// The "bf" module's entry of MODULE LIST and HELLO: name, ver, path, args.
void write_module_entry(Context& ctx);

// Client names and library names may not contain spaces or control
// characters (CLIENT LIST is space-separated), as in Redis.
bool valid_client_name(std::string_view name);

// A HELP reply: one simple string per line.
void reply_help(Context& ctx, std::initializer_list<std::string_view> lines);

// Whether a command that writes a key (COPY, RESTORE, MIGRATE's target)
// replaces one that exists: REPLACE, or keeps it and does nothing.
enum class IfExists { keep, replace };

// How a command gives a time (EXPIRE and PEXPIRE against EXPIREAT and
// PEXPIREAT, TTL against EXPIRETIME, RESTORE without and with ABSTTL): as an
// amount from now, or as a Unix time.
enum class TimeBase { from_now, unix_time };

// A refusal whose reply is `text` (an errors.hpp constant): what the helpers
// of a command return when they refuse, leaving the reply to the handler.
inline core::Error refuse(std::string_view text) {
    return core::Error{std::string(text)};
}

// The refusal "ERR wrong number of arguments for 'NAME' command", for
// parsers that find the count wrong only as they read (BF.INSERT's options);
// reply_wrong_arity (registry.hpp) answers the same text.
core::Error wrong_arity(std::string_view command_name);

// One add's, lookup's or delete's answer (BF.* and CF.*): an integer under
// RESP2 (RedisBloom 2.4), a boolean under RESP3 (RedisBloom 2.8, Redis 8).
inline void reply_flag(Context& ctx, bool value) {
    if (ctx.out.protocol() >= 3) {
        ctx.out.boolean(value);
    } else {
        ctx.out.integer(value ? 1 : 0);
    }
}

// What a command that creates a filter of kind `kind` answers when `key`
// exists already: "item exists" (RedisBloom's) for a filter of that kind,
// WRONGTYPE for one of the other.
std::string_view exists_error(const Context& ctx, std::string_view key, store::ValueKind kind);

// Counts `changes` writes that changed data (INFO's changes since the last
// save, the save points).
inline void note_changes(Context& ctx, std::uint64_t changes = 1) {
    if (changes != 0) WorkerStats::bump(ctx.stats.changes, changes);
}

}  // namespace bloomery::command
