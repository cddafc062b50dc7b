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

void reply_save_error(resp::Writer& out, const persist::SaveResult& result) {
    if (result.status == persist::SaveStatus::in_progress) {
        out.error(errors::kBgsaveInProgress);
    } else {
        out.error("ERR " + result.detail);
    }
}

// The snapshot is written on the persistence thread; this client waits for
// the reply (sent once the file is durable) while the worker serves others.
void cmd_save(With<uses::Persistence>& ctx, Args) {
    const DeferredReply reply = ctx.defer_reply();
    if (!reply) {
        ctx.out.error(errors::kCannotWait);
        return;
    }
    ctx.server.persistence.save_async([reply](persist::SaveResult result) {
        reply.complete([result = std::move(result)](resp::Writer& out) {
            if (result.ok()) {
                out.ok();
            } else {
                reply_save_error(out, result);
            }
        });
    });
}

void cmd_bgsave(With<uses::Persistence>& ctx, Args argv) {
    if (argv.size() > 2 || (argv.size() == 2 && !iequals(argv[1], "SCHEDULE"))) {
        ctx.out.error(errors::kSyntax);
        return;
    }
    const persist::SaveResult result = ctx.server.persistence.bgsave();
    if (result.ok()) {
        ctx.out.simple("Background saving started");
    } else {
        reply_save_error(ctx.out, result);
    }
}

// The journal is compacted by a snapshot: once it is durable, the segments
// it covers are dropped. So a rewrite is a BGSAVE, with Redis's reply.
void cmd_bgrewriteaof(With<uses::Persistence>& ctx, Args) {
    const persist::SaveResult result = ctx.server.persistence.bgsave();
    if (result.ok()) {
        ctx.out.simple("Background append only file rewriting started");
    } else if (result.status == persist::SaveStatus::in_progress) {
        ctx.out.error(
            "ERR Background append only file rewriting already in progress (a snapshot is being "
            "written)");
    } else {
        reply_save_error(ctx.out, result);
    }
}

void cmd_lastsave(With<uses::Persistence>& ctx, Args) {
    ctx.out.integer(ctx.server.persistence.persistence().last_save_time);
}

// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. The final save and the wait
// for replicas run off the worker (net::Server), which serves its other
// clients meanwhile; this client waits. Like Redis, a SHUTDOWN that stops the
// server closes the connection without a reply; one that fails, or that
// ABORT cancels, answers an error and the server carries on.
void cmd_shutdown(With<uses::Shutdown>& ctx, Args argv) {
    command::ShutdownOptions options;
    bool save = false, nosave = false, abort = false;
    for (std::size_t i = 1; i < argv.size(); ++i) {
        if (iequals(argv[i], "NOSAVE")) {
            nosave = true;
        } else if (iequals(argv[i], "SAVE")) {
            save = true;
        } else if (iequals(argv[i], "NOW")) {
            options.now = true;
        } else if (iequals(argv[i], "FORCE")) {
            options.force = true;
        } else if (iequals(argv[i], "ABORT")) {
            abort = true;
        } else {
            ctx.out.error(errors::kSyntax);
            return;
        }
    }
    // Redis: SAVE and NOSAVE exclude each other, ABORT takes no other option.
    if ((save && nosave) || (abort && argv.size() > 2)) {
        ctx.out.error(errors::kSyntax);
        return;
    }
    options.mode = nosave ? command::ShutdownMode::nosave
                   : save ? command::ShutdownMode::save
                          : command::ShutdownMode::default_save;
    const DeferredReply reply = ctx.defer_reply();
    if (!reply) {
        ctx.out.error(errors::kCannotWait);
        return;
    }
    if (abort) {
        ctx.server.shutdown.abort_shutdown([reply](bool cancelled) {
            reply.complete([cancelled](resp::Writer& out) {
                if (cancelled) {
                    out.ok();
                } else {
                    out.error(errors::kNoShutdownInProgress);
                }
            });
        });
        return;
    }
    ctx.server.shutdown.begin_shutdown(options, [reply] {
        reply.complete([](resp::Writer& out) { out.error(errors::kShutdownFailed); });
    });
}

}  // namespace

void register_persistence_commands(Registry& registry) {
    registry.register_handler<cmd_save>("save");
    registry.register_handler<cmd_bgsave>("bgsave");
    registry.register_handler<cmd_bgrewriteaof>("bgrewriteaof");
    registry.register_handler<cmd_lastsave>("lastsave");
    registry.register_handler<cmd_shutdown>("shutdown");
}

}  // namespace bloomery::command
