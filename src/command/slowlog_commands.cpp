// SLOWLOG GET | LEN | RESET | HELP, with Redis's reply shapes. The log itself
// is bloomery/command/slowlog.hpp; dispatch() records into it.

#include <limits>
#include <optional>
#include <string>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

// Redis's default for SLOWLOG GET without a count.
constexpr std::int64_t kDefaultGetCount = 10;

// SLOWLOG GET [count]: how many entries, -1 for all.
void cmd_slowlog_get(Context& ctx, Args argv) {
    ArgCursor args(argv, 2);
    if (args.remaining() > 1) return reply_wrong_arity(ctx, "slowlog|get");
    std::int64_t count = kDefaultGetCount;
    if (args.has_next()) {
        const std::optional<std::int64_t> given = args.next_int();
        if (!given || *given < -1) return ctx.out.error(errors::kSlowlogCount);
        count = *given;
    }
    if (ctx.slowlog == nullptr) return ctx.out.array(0);
    const std::size_t wanted =
        count < 0 ? std::numeric_limits<std::size_t>::max() : static_cast<std::size_t>(count);
    const std::vector<SlowlogEntry> entries = ctx.slowlog->newest(wanted);
    ctx.out.array(entries.size());
    for (const SlowlogEntry& entry : entries) {
        ctx.out.array(6);
        ctx.out.integer(entry.id);
        ctx.out.integer(entry.unix_time);
        ctx.out.integer(entry.duration_us);
        ctx.out.array(entry.argv.size());
        for (const std::string& arg : entry.argv) ctx.out.bulk(arg);
        ctx.out.bulk(entry.client_address);
        ctx.out.bulk(entry.client_name);
    }
}

void cmd_slowlog_len(Context& ctx, Args) {
    ctx.out.integer(ctx.slowlog != nullptr ? static_cast<std::int64_t>(ctx.slowlog->length()) : 0);
}

void cmd_slowlog_reset(Context& ctx, Args) {
    if (ctx.slowlog != nullptr) ctx.slowlog->reset();
    ctx.out.ok();
}

void cmd_slowlog_help(Context& ctx, Args) {
    reply_help(ctx,
               {"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "GET [<count>]",
                "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                "    Entries are made of:",
                "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                "    client name", "LEN", "    Return the length of the slowlog.", "RESET",
                "    Reset the slowlog.", "HELP", "    Print this help."});
}

}  // namespace

void register_slowlog_commands(Registry& registry) {
    registry.register_handler<cmd_slowlog_get>("slowlog|get");
    registry.register_handler<cmd_slowlog_len>("slowlog|len");
    registry.register_handler<cmd_slowlog_reset>("slowlog|reset");
    registry.register_handler<cmd_slowlog_help>("slowlog|help");
}

}  // namespace bloomery::command
