// DEBUG: subcommands for tests against the real binary, refused unless
// enable-debug-command allows the client (never by default).
//   DEBUG JUMP-CLOCK ms   moves the server's clock forward by ms (deadlines,
//                         expiring filters' time windows), then has the
//                         shifter look at what is due at once
//   DEBUG HELP

#include <string>
#include <string_view>

#include "bloomery/command/registry.hpp"
#include "bloomery/core/ascii.hpp"
#include "bloomery/core/parse_int64.hpp"
#include "bloomery/core/printable.hpp"
#include "bloomery/store/age_shifter.hpp"
#include "bloomery/store/clock.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

constexpr std::string_view kDebugNotAllowed =
    "ERR DEBUG command not allowed: start the server with enable-debug-command yes (or local, "
    "for clients on the loopback interface)";
constexpr std::string_view kBadJump = "ERR JUMP-CLOCK takes a whole number of ms, 1 to 2^40";

bool loopback(std::string_view address) {
    return address.starts_with("127.") || address.starts_with("[::1]") ||
           address.starts_with("::1:");
}

bool allowed(const Context& ctx) {
    switch (ctx.config.enable_debug_command) {
        case core::DebugCommand::yes:
            return true;
        case core::DebugCommand::local:
            return loopback(ctx.client.address);
        case core::DebugCommand::no:
            break;
    }
    return false;
}

void jump_clock(Context& ctx, Args argv) {
    std::int64_t ms = 0;
    if (argv.size() != 3 || !core::parse_int64(argv[2], ms) || ms < 1 ||
        ms > (std::int64_t{1} << 40)) {
        ctx.out.error(kBadJump);
        return;
    }
    store::jump_clock(ms);
    if (store::AgeShifter* shifter = ctx.keyspace.age_shifter()) shifter->poke();
    ctx.out.ok();
}

void cmd_debug(Context& ctx, Args argv) {
    if (!allowed(ctx)) {
        ctx.out.error(kDebugNotAllowed);
        return;
    }
    const std::string_view sub = argv[1];
    if (core::iequals(sub, "JUMP-CLOCK")) {
        jump_clock(ctx, argv);
    } else if (core::iequals(sub, "HELP")) {
        ctx.out.array(2);
        ctx.out.simple("JUMP-CLOCK <ms>: move the server's clock forward by <ms>.");
        ctx.out.simple("HELP: this text.");
    } else {
        std::string message = "ERR unknown subcommand '";
        core::append_printable(message, sub, 128);
        message += "'. Try DEBUG HELP.";
        ctx.out.error(message);
    }
}

}  // namespace

void register_debug_commands(Registry& registry) {
    registry.register_handler<cmd_debug>("debug");
}

}  // namespace bloomery::command
