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

// BGSAVE [SCHEDULE]: a snapshot already running is an error either way
// (SCHEDULE is accepted, not queued).
void cmd_bgsave(With<uses::Persistence>& ctx, Args argv) {
    ArgCursor args(argv);
    args.eat("SCHEDULE");
    if (args.has_next()) return ctx.out.error(errors::kSyntax);
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
        ctx.out.error(errors::kRewriteInProgress);
    } else {
        reply_save_error(ctx.out, result);
    }
}

void cmd_lastsave(With<uses::Persistence>& ctx, Args) {
    ctx.out.integer(ctx.server.persistence.persistence().last_save_time);
}

// What SHUTDOWN asks for: to stop (with these options), or to cancel a
// shutdown under way (ABORT).
struct ShutdownRequest {
    enum class Action { stop, abort };
    Action action = Action::stop;
    command::ShutdownOptions options;
};

// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. Redis: SAVE and NOSAVE
// exclude each other, ABORT takes no other option.
core::Result<ShutdownRequest> parse_shutdown(Args argv) {
    ShutdownRequest request;
    bool save = false, nosave = false;
    ArgCursor args(argv);
    while (args.has_next()) {
        if (args.eat("NOSAVE")) {
            nosave = true;
        } else if (args.eat("SAVE")) {
            save = true;
        } else if (args.eat("NOW")) {
            request.options.now = true;
        } else if (args.eat("FORCE")) {
            request.options.force = true;
        } else if (args.eat("ABORT")) {
            request.action = ShutdownRequest::Action::abort;
        } else {
            return core::Error{std::string(errors::kSyntax)};
        }
    }
    const bool abort = request.action == ShutdownRequest::Action::abort;
    if ((save && nosave) || (abort && argv.size() > 2)) {
        return core::Error{std::string(errors::kSyntax)};
    }
    request.options.mode = nosave ? command::ShutdownMode::nosave
                           : save ? command::ShutdownMode::save
                                  : command::ShutdownMode::default_save;
    return request;
}

// The final save and the wait for replicas run off the worker
// (net::Server), which serves its other clients meanwhile; this client
// waits. Like Redis, a SHUTDOWN that stops the server closes the connection
// without a reply; one that fails, or that ABORT cancels, answers an error
// and the server carries on.
void cmd_shutdown(With<uses::Shutdown>& ctx, Args argv) {
    const core::Result<ShutdownRequest> request = parse_shutdown(argv);
    if (!request) return ctx.out.error(request.error());
    const DeferredReply reply = ctx.defer_reply();
    if (!reply) return ctx.out.error(errors::kCannotWait);
    if (request->action == ShutdownRequest::Action::abort) {
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
    ctx.server.shutdown.begin_shutdown(request->options, [reply] {
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
