// SAVE, BGSAVE, BGREWRITEAOF, LASTSAVE, SHUTDOWN: the persistence layer reports typed
// results; the replies are worded here.

#include <string>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

void reply_save_error(resp::Writer& out, const core::SaveResult& result) {
    if (result.status == core::SaveStatus::in_progress) {
        out.error(errors::kBgsaveInProgress);
    } else {
        out.error("ERR " + result.detail);
    }
}

// The snapshot is written on the persistence thread; this client waits for
// the reply (sent once the file is durable) while the worker serves others.
void cmd_save(Context& ctx, Args) {
    const DeferredReply reply = ctx.defer_reply();
    if (!reply) {
        ctx.out.error(errors::kCannotWait);
        return;
    }
    ctx.server.save_async([reply](core::SaveResult result) {
        reply.complete([result = std::move(result)](resp::Writer& out) {
            if (result.ok()) {
                out.ok();
            } else {
                reply_save_error(out, result);
            }
        });
    });
}

void cmd_bgsave(Context& ctx, Args argv) {
    if (argv.size() > 2 || (argv.size() == 2 && !iequals(argv[1], "SCHEDULE"))) {
        ctx.out.error(errors::kSyntax);
        return;
    }
    const core::SaveResult result = ctx.server.bgsave();
    if (result.ok()) {
        ctx.out.simple("Background saving started");
    } else {
        reply_save_error(ctx.out, result);
    }
}

// The journal is compacted by a snapshot: once it is durable, the segments
// it covers are dropped. So a rewrite is a BGSAVE, with Redis's reply.
void cmd_bgrewriteaof(Context& ctx, Args) {
    const core::SaveResult result = ctx.server.bgsave();
    if (result.ok()) {
        ctx.out.simple("Background append only file rewriting started");
    } else if (result.status == core::SaveStatus::in_progress) {
        ctx.out.error(
            "ERR Background append only file rewriting already in progress (a snapshot is being "
            "written)");
    } else {
        reply_save_error(ctx.out, result);
    }
}

void cmd_lastsave(Context& ctx, Args) {
    ctx.out.integer(ctx.server.persistence().last_save_time);
}

void cmd_shutdown(Context& ctx, Args argv) {
    core::ShutdownMode mode = core::ShutdownMode::default_save;
    for (std::size_t i = 1; i < argv.size(); ++i) {
        if (iequals(argv[i], "NOSAVE")) {
            mode = core::ShutdownMode::nosave;
        } else if (iequals(argv[i], "SAVE")) {
            mode = core::ShutdownMode::save;
        } else if (iequals(argv[i], "NOW") || iequals(argv[i], "FORCE")) {
            // Nothing to wait for (no replicas), and FORCE is implied by NOSAVE.
        } else {
            ctx.out.error(errors::kSyntax);
            return;
        }
    }
    if (!ctx.server.shutdown(mode).ok()) {
        ctx.out.error("ERR Errors trying to SHUTDOWN. Check logs.");
        return;
    }
    // Like Redis, a successful SHUTDOWN closes the connection without a reply.
    ctx.client.close_after_reply = true;
}

}  // namespace

void register_persistence_commands(Registry& registry) {
    registry.register_handler("save", cmd_save);
    registry.register_handler("bgsave", cmd_bgsave);
    registry.register_handler("bgrewriteaof", cmd_bgrewriteaof);
    registry.register_handler("lastsave", cmd_lastsave);
    registry.register_handler("shutdown", cmd_shutdown);
}

}  // namespace bloomery::command
