#pragma once
// Private helpers shared by several command families.

#include <initializer_list>
#include <span>
#include <string_view>

#include "bloomery/bloom/bounds.hpp"

#include "bloomery/command/context.hpp"

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

// RESTORE and COPY: a new filter of these layers checked against
// --max-filter-bytes (all layers) and --maxmemory before anything is
// allocated, as BF.LOADCHUNK checks its header; false with the error to
// reply.
bool new_filter_fits(const Context& ctx, std::span<const bloom::LayerGeometry> layers,
                     std::string_view& error);

}  // namespace bloomery::command
