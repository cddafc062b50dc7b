// The dispatch path, run for every request: the command's lookup, the
// checks before it (arity, access control, transactions, Pub/Sub, cluster
// slot, replica state, memory and disk), queueing inside MULTI, its handler,
// and its statistics. A command that is served allocates nothing here
// (tests/unit/hot_path_alloc_test.cpp): the checks answer a core::Status
// whose text is built only for a refusal.

#include <algorithm>
#include <cctype>
#include <new>
#include <stdexcept>

#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/core/ascii.hpp"
#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/core/printable.hpp"
#include "bloomery/persist/journal.hpp"
#include "cluster_routing.hpp"

namespace bloomery::command {

// The lookups are defined here, beside their one caller on every request,
// so the compiler may inline them into it.

const CommandSpec* Registry::find(std::string_view name) const {
    // Command names are short: lower-casing into a stack buffer avoids an
    // allocation per command on the hot path.
    char buffer[32] = {};
    if (name.size() > sizeof(buffer)) return nullptr;
    for (std::size_t i = 0; i < name.size(); ++i) {
        buffer[i] = core::ascii_lower(name[i]);
    }
    auto it = commands_.find(std::string_view(buffer, name.size()));
    return it == commands_.end() ? nullptr : it->second.get();
}

const CommandSpec* CommandSpec::find_subcommand(std::string_view sub) const {
    for (const auto& s : subcommands) {
        const std::string_view full = s->name;
        const std::string_view tail = full.substr(full.find('|') + 1);
        if (core::iequals(tail, sub)) {  // names are lower case
            return s.get();
        }
    }
    return nullptr;
}

void reply_wrong_arity(Context& ctx, std::string_view command_name) {
    std::string message(errors::kWrongArity);
    message += command_name;
    message += "' command";
    ctx.out.error(message);
}

namespace {

// What admit() decided about a command.
enum class Admission {
    unknown,   // no such command or subcommand: counted for no command (as Redis)
    rejected,  // refused before running (arity, NOAUTH, NOPERM, OOM, MISCONF): error written
    run,       // the handler may run
};

// The decision and the command it is about: the subcommand for a
// container; null when unknown.
struct Admitted {
    Admission admission;
    const CommandSpec* spec;
};

// Unknown command: its name and the start of its arguments, bounded.
void reply_unknown_command(Context& ctx, Args argv) {
    std::string message(errors::kUnknownCommand);
    core::append_printable(message, argv[0], 128);
    message += "', with args beginning with: ";
    std::size_t budget = 128;
    for (std::size_t i = 1; i < argv.size() && budget > 0; ++i) {
        message += '\'';
        core::append_printable(message, argv[i], budget);
        budget -= std::min(budget, argv[i].size());
        message += "' ";
    }
    ctx.out.error(message);
}

void reply_unknown_subcommand(Context& ctx, const CommandSpec& spec, std::string_view sub) {
    std::string message(errors::kUnknownSubcommand);
    core::append_printable(message, sub, 128);
    message += "'. Try ";
    for (char c : spec.name) {
        message.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
    message += " HELP.";
    ctx.out.error(message);
}

// The command (or subcommand) argv names; when there is none, replies and
// answers unknown, or rejected for a container named without a subcommand.
Admitted find_command(const Registry& registry, Context& ctx, Args argv) {
    const CommandSpec* spec = registry.find(argv[0]);
    if (spec == nullptr) {
        reply_unknown_command(ctx, argv);
        return {Admission::unknown, nullptr};
    }
    if (!spec->subcommands.empty() && (argv.size() >= 2 || spec->handler == nullptr)) {
        if (argv.size() < 2) {
            reply_wrong_arity(ctx, spec->name);
            return {Admission::rejected, spec};
        }
        const CommandSpec* sub = spec->find_subcommand(argv[1]);
        if (sub == nullptr) {
            reply_unknown_subcommand(ctx, *spec, argv[1]);
            return {Admission::unknown, nullptr};
        }
        spec = sub;
    }
    return {Admission::run, spec};
}

// Access control, in Redis's order: after the name and arity checks, NOAUTH
// before any user's permissions. Allowed commands cost a flag test and a bit
// test.
core::Status access_allowed(const Acl& acl, const Context& ctx, const CommandSpec& spec,
                            Args argv) {
    if (!acl.is_authenticated(ctx.client) && !spec.no_auth) {
        return core::Error{std::string(errors::kNoAuth)};
    }
    const AclUser& user = acl.user_of(ctx.client);
    if (!user.may_run(spec)) {
        return core::Error{std::string(errors::kNoPermUser) + user.name() +
                           " has no permissions to run the '" + spec.name + "' command"};
    }
    if (!user.may_access_keys(spec, argv)) return core::Error{std::string(errors::kNoPermKey)};
    return {};
}

// What the client's state allows: no MULTI inside MULTI (no_multi flag),
// and for a subscribed RESP2 client, which reads messages on this
// connection, only what keeps it subscribed (RESP3 pushes mix with replies).
core::Status session_allows(const Context& ctx, const CommandSpec& spec) {
    if (spec.no_multi && ctx.client.transaction.active) {
        return core::Error{std::string(errors::kNotInTransaction)};
    }
    if (!spec.allowed_while_subscribed && ctx.client.subscriptions.count() != 0 &&
        ctx.out.protocol() == 2) {
        return core::Error{std::string(errors::kCannotExecute) + spec.name +
                           std::string(errors::kOnlySubscriptionCommands)};
    }
    return {};
}

// What the checks before a command look at: its own flags, or for EXEC
// those of the commands it would run (as Redis's processCommand).
struct Effects {
    bool write;
    bool denyoom;
    bool keys;
};

Effects effects_of(const DispatchContext& ctx, const CommandSpec& spec) {
    const TransactionState& transaction = ctx.client.transaction;
    if (spec.is_exec && transaction.active) {
        return {transaction.any_write, transaction.any_denyoom, transaction.any_keys};
    }
    // Inside MULTI every command queued takes memory: refused past maxmemory.
    const bool queued = transaction.active && !spec.transaction_control;
    return {spec.write, spec.denyoom || queued, spec.first_key > 0};
}

// A replica takes writes only from its primary (whose stream does not come
// through here); while it loads a primary's snapshot, commands on keys wait
// for the data. One relaxed load when neither applies.
core::Status replica_allows(const DispatchContext& ctx, const Effects& effects) {
    const std::uint8_t replication =
        ctx.server.gate.replication_flags.load(std::memory_order_relaxed);
    if (replication == 0) return {};
    std::string_view reason;
    if ((replication & kReplicationReplica) != 0 && effects.write) {
        reason = errors::kReadOnlyReplica;
    } else if ((replication & kReplicationLoading) != 0 && effects.keys) {
        reason = errors::kLoading;
    } else if ((replication & kReplicationUnsynced) != 0 && effects.keys) {
        reason = errors::kMasterDownUnsynced;
    } else if ((replication & kReplicationStale) != 0 && effects.keys &&
               !ctx.config.replica_serve_stale_data) {
        reason = errors::kMasterDownStale;
    }
    if (reason.empty()) return {};
    return core::Error{std::string(reason)};
}

// Redis's order: memory first, then the disk error. Reads and deletes (no
// denyoom flag) keep working past maxmemory.
core::Status resources_allow(const DispatchContext& ctx, const Effects& effects) {
    if (effects.denyoom && core::memory_would_exceed(ctx.config.maxmemory)) {
        return core::Error{std::string(errors::kOom)};
    }
    if (!effects.write) return {};
    if (ctx.config.stop_writes_on_bgsave_error && ctx.server.persistence.snapshot_failing()) {
        return core::Error{std::string(errors::kMisconf)};
    }
    // Unlike snapshots, a journal that cannot write always stops writes:
    // what it cannot record would be lost silently at the next crash.
    if (persist::Journal* journal = ctx.server.persistence.journal();
        journal && journal->failing()) {
        std::string reason(errors::kMisconfJournal);
        core::append_printable(reason, journal->failure(), 400);
        return core::Error{std::move(reason)};
    }
    return {};
}

// Writes a refusal of the replica or resource checks. EXEC refused ends its
// transaction, with the reason ("EXECABORT Transaction discarded because
// of: ..."), as Redis does.
void refuse(Context& ctx, const CommandSpec& spec, std::string_view reason) {
    if (spec.is_exec && ctx.client.transaction.active) {
        std::string message(errors::kExecAbortBecause);
        message += reason;
        ctx.client.transaction.discard();
        ctx.out.error(message);
        return;
    }
    ctx.out.error(reason);
}

// Cluster redirection, where Redis checks it: after access control, before
// the memory and disk checks (a key this node does not serve is redirected,
// not refused for this node's memory or disk). The checks write their
// -MOVED or -CROSSSLOT themselves, from a stack buffer (cluster_routing.hpp):
// in a cluster a redirect is an ordinary reply.
bool cluster_serves(DispatchContext& ctx, const CommandSpec& spec, Args argv) {
    if (spec.is_exec && ctx.client.transaction.active) {
        if (cluster_admits_transaction(ctx)) return true;
        ctx.client.transaction.discard();
        return false;
    }
    return cluster_admits(spec, ctx, argv);
}

// Looks the command up and runs every check before its handler, writing the
// error of a refusal.
Admitted admit(const Registry& registry, DispatchContext& ctx, Args argv) {
    const Admitted found = find_command(registry, ctx, argv);
    if (found.admission != Admission::run) return found;
    const CommandSpec& spec = *found.spec;
    const Admitted rejected{Admission::rejected, &spec};
    ctx.client.last_command.store(spec.name.c_str(), std::memory_order_relaxed);
    if (!spec.arity_ok(argv.size())) {
        reply_wrong_arity(ctx, spec.name);
        return rejected;
    }
    if (const core::Status allowed = access_allowed(registry.acl(), ctx, spec, argv); !allowed) {
        ctx.out.error(allowed.error());
        return rejected;
    }
    if (const core::Status allowed = session_allows(ctx, spec); !allowed) {
        ctx.out.error(allowed.error());
        return rejected;
    }
    // Without cluster mode this is one test of a flag fixed at start, always
    // predicted; the checks are out of line so they add nothing else here.
    if (ctx.config.cluster_enabled && !cluster_serves(ctx, spec, argv)) return rejected;
    const Effects effects = effects_of(ctx, spec);
    if (const core::Status allowed = replica_allows(ctx, effects); !allowed) {
        refuse(ctx, spec, allowed.error());
        return rejected;
    }
    if (const core::Status allowed = resources_allow(ctx, effects); !allowed) {
        refuse(ctx, spec, allowed.error());
        return rejected;
    }
    return found;
}

// Runs a handler; an allocation failure answers -OOM in place of whatever
// the command had written.
void run_handler(const CommandSpec& spec, DispatchContext& ctx, Args argv) {
    const std::size_t reply_mark = ctx.out.buffer().size();
    try {
        spec.handler(ctx, argv);
    } catch (const std::bad_alloc&) {
        // Whatever could not be allocated failed before anything changed
        // (records are reserved or encoded before their change); the
        // command's partial reply goes, so the pipeline stays one reply
        // per command.
        ctx.out.buffer().resize(reply_mark);
        ctx.out.error(errors::kNoMemory);
    } catch (const std::length_error&) {
        ctx.out.buffer().resize(reply_mark);
        ctx.out.error(errors::kNoMemory);
    }
}

// Queues a command inside MULTI: "+QUEUED", or a refusal that aborts the
// transaction when the queue would pass its bound. True if queued.
bool queue(Context& ctx, const CommandSpec& spec, Args argv) {
    TransactionState& transaction = ctx.client.transaction;
    std::size_t adding = sizeof(TransactionState::Queued);
    for (std::string_view argument : argv) {
        adding += argument.size() + sizeof(std::pair<std::size_t, std::size_t>);
    }
    const std::size_t limit =
        std::min<std::size_t>(ctx.config.client_query_buffer_limit, kMaxTransactionQueueBytes);
    if (transaction.bytes() + adding > limit) {
        transaction.aborted = true;
        ctx.out.error(errors::kTransactionTooLarge);
        return false;
    }
    const std::size_t first = transaction.arguments.size();
    for (std::string_view argument : argv) {
        transaction.arguments.emplace_back(transaction.argument_bytes.size(), argument.size());
        transaction.argument_bytes.append(argument);
    }
    transaction.commands.push_back(
        {&spec, static_cast<std::uint32_t>(first), static_cast<std::uint32_t>(argv.size())});
    transaction.any_write = transaction.any_write || spec.write;
    transaction.any_denyoom = transaction.any_denyoom || spec.denyoom;
    transaction.any_keys = transaction.any_keys || spec.first_key > 0;
    transaction.publish();
    ctx.out.simple("QUEUED");
    return true;
}

// Counts the error replies written since `errors_before` (INFO's
// total_error_replies, whichever handler or check wrote them) and says
// whether there were any.
bool count_error_replies(Context& ctx, std::uint64_t errors_before) {
    const std::uint64_t errors = ctx.out.errors_written() - errors_before;
    if (errors == 0) return false;
    WorkerStats::bump(ctx.stats.error_replies, errors);
    return true;
}

// How a command that ran ended, for its statistics (failed_calls).
enum class Outcome { replied, failed };

// Counts a command that ran (calls, time, whether it failed, the slow log)
// or was refused; `nanoseconds` is its time.
void record(Context& ctx, const Admitted& admitted, Args argv, std::uint64_t nanoseconds,
            Outcome outcome) {
    const CommandSpec* spec = admitted.spec;
    switch (admitted.admission) {
        case Admission::unknown:
            break;
        case Admission::rejected:
            ctx.stats.command_stats.record_rejected(spec->id);
            break;
        case Admission::run:
            ctx.stats.command_stats.record_call(spec->id, nanoseconds, outcome == Outcome::failed);
            if (ctx.slowlog != nullptr && ctx.slowlog->is_slow(nanoseconds)) {
                ctx.slowlog->record(spec, argv, nanoseconds, ctx.client);
            }
            // The latency monitor (off by default): one relaxed load.
            core::latency_add_sample_if_needed(
                spec->fast ? core::kLatencyFastCommand : core::kLatencyCommand,
                nanoseconds / 1000000);
            break;
    }
}

}  // namespace

void dispatch(const Registry& registry, DispatchContext& ctx, Args argv,
              std::uint64_t& clock_mark) {
    WorkerStats::bump(ctx.stats.commands);
    // Every error reply is counted here, whichever handler or check wrote it
    // (INFO's total_error_replies).
    const std::uint64_t errors_before = ctx.out.errors_written();
    Admitted admitted = admit(registry, ctx, argv);
    TransactionState& transaction = ctx.client.transaction;
    bool queued = false;
    if (transaction.active && admitted.admission != Admission::run) {
        // Refused while queueing: EXEC will answer EXECABORT (an EXEC
        // refused has ended the transaction already).
        transaction.aborted = true;
    } else if (transaction.active && !admitted.spec->transaction_control) {
        // Queued, not run: counted when EXEC runs it (a queue over its bound
        // counts as refused).
        queued = queue(ctx, *admitted.spec, argv);
        if (!queued) admitted.admission = Admission::rejected;
    } else if (admitted.admission == Admission::run) {
        run_handler(*admitted.spec, ctx, argv);
    }
    // One clock read per command, at its end (see CommandClock for why not
    // clock_gettime). Redis times the handler alone, with two reads; this
    // time also holds the command's parsing and checks, a few tens of ns for
    // a small command. README ("Monitoring") has what timing costs.
    const core::CommandClock& clock = core::CommandClock::get();
    const std::uint64_t now = clock.now();
    const std::uint64_t nanoseconds = clock.nanoseconds(now - clock_mark);
    clock_mark = now;
    const Outcome outcome =
        count_error_replies(ctx, errors_before) ? Outcome::failed : Outcome::replied;
    if (!queued) record(ctx, admitted, argv, nanoseconds, outcome);
}

void run_queued(const Registry& registry, DispatchContext& ctx, const CommandSpec& spec,
                Args argv) {
    WorkerStats::bump(ctx.stats.commands);
    const std::uint64_t errors_before = ctx.out.errors_written();
    const core::CommandClock& clock = core::CommandClock::get();
    const std::uint64_t began = clock.now();
    ctx.client.last_command.store(spec.name.c_str(), std::memory_order_relaxed);
    // Rules may have changed since the command was queued (Redis checks
    // them again too, with this message).
    const Acl& acl = registry.acl();
    const AclUser& user = acl.user_of(ctx.client);
    Admitted admitted{Admission::run, &spec};
    if (!user.may_run(spec)) {
        ctx.out.error(errors::kNoPermChangedCommand);
        admitted.admission = Admission::rejected;
    } else if (!user.may_access_keys(spec, argv)) {
        ctx.out.error(errors::kNoPermChangedKeys);
        admitted.admission = Admission::rejected;
    } else {
        run_handler(spec, ctx, argv);
    }
    const std::uint64_t nanoseconds = clock.nanoseconds(clock.now() - began);
    const Outcome outcome =
        count_error_replies(ctx, errors_before) ? Outcome::failed : Outcome::replied;
    record(ctx, admitted, argv, nanoseconds, outcome);
}

void dispatch(const Registry& registry, DispatchContext& ctx, Args argv) {
    std::uint64_t clock_mark = core::CommandClock::get().now();
    dispatch(registry, ctx, argv, clock_mark);
}

}  // namespace bloomery::command
