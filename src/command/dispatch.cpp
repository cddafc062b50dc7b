// The dispatch path, run for every request: the command's lookup, the
// checks before it (arity, access control, transactions, Pub/Sub, cluster
// slot, replica state, memory and disk), queueing inside MULTI, its handler,
// and its statistics. A command that is served allocates nothing here
// (tests/unit/hot_path_alloc_test.cpp): the checks answer a Refusal, whose
// text is built only when there is one.

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
#include "bloomery/persist/journal_health.hpp"
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

// Why a check before a command refused it, or none. The checks answer one
// of these, not a core::Status: they run before every command, and a byte
// costs nothing where a Status would build and destroy its (empty) text
// four times per command. word_refusal() gives each its text, on the
// refusal path only.
enum class Refusal : std::uint8_t {
    none,
    no_auth,                // not authenticated (NOAUTH)
    command_not_permitted,  // the user may not run it (NOPERM)
    key_not_permitted,      // the user may not name one of its keys (NOPERM)
    not_in_transaction,     // a no_multi command inside MULTI
    subscribed,             // a subscribed RESP2 client's other commands
    // The replica's and the resources' checks from here on: refuse() ends an
    // EXEC's transaction for these.
    read_only_replica,  // a write on a replica (READONLY)
    loading,            // keys while a replica loads its primary's data
    primary_unsynced,   // keys before a replica's first copy (MASTERDOWN)
    primary_down,       // keys while the link is down, no stale data (MASTERDOWN)
    out_of_memory,      // a denyoom command past maxmemory (OOM)
    snapshot_failing,   // a write while snapshots fail (MISCONF)
    journal_failing,    // a write while the journal cannot write (MISCONF)
    too_few_replicas,   // a write on a primary short of min-replicas-to-write (NOREPLICAS)
};

// Access control, in Redis's order: after the name and arity checks, NOAUTH
// before any user's permissions. Allowed commands cost a flag test and a bit
// test.
Refusal check_access(const Acl& acl, const Context& ctx, const CommandSpec& spec, Args argv) {
    if (!acl.is_authenticated(ctx.client) && !spec.no_auth) return Refusal::no_auth;
    const AclUser& user = acl.user_of(ctx.client);
    if (!user.may_run(spec)) return Refusal::command_not_permitted;
    if (!user.may_access_keys(spec, argv)) return Refusal::key_not_permitted;
    return Refusal::none;
}

// What the client's state allows: no MULTI inside MULTI (no_multi flag),
// and for a subscribed RESP2 client, which reads messages on this
// connection, only what keeps it subscribed (RESP3 pushes mix with replies).
Refusal check_session(const Context& ctx, const CommandSpec& spec) {
    if (spec.no_multi && ctx.client.transaction.active) return Refusal::not_in_transaction;
    if (!spec.allowed_while_subscribed && ctx.client.subscriptions.count() != 0 &&
        ctx.out.protocol() == 2) {
        return Refusal::subscribed;
    }
    return Refusal::none;
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
Refusal check_replica(const DispatchContext& ctx, const Effects& effects) {
    const std::uint8_t replication =
        ctx.server.gate.replication_flags.load(std::memory_order_relaxed);
    if (replication == 0) return Refusal::none;
    if ((replication & kReplicationReplica) != 0 && effects.write) {
        return Refusal::read_only_replica;
    }
    if ((replication & kReplicationLoading) != 0 && effects.keys) return Refusal::loading;
    if ((replication & kReplicationUnsynced) != 0 && effects.keys) {
        return Refusal::primary_unsynced;
    }
    if ((replication & kReplicationStale) != 0 && effects.keys &&
        !ctx.config.replica_serve_stale_data) {
        return Refusal::primary_down;
    }
    return Refusal::none;
}

// Redis's order: memory first, then the disk error. Reads and deletes (no
// denyoom flag) keep working past maxmemory.
Refusal check_resources(const DispatchContext& ctx, const Effects& effects) {
    if (effects.denyoom && core::memory_would_exceed(ctx.config.maxmemory)) {
        return Refusal::out_of_memory;
    }
    if (!effects.write) return Refusal::none;
    if (ctx.config.stop_writes_on_bgsave_error && ctx.server.persistence.snapshot_failing()) {
        return Refusal::snapshot_failing;
    }
    // Unlike snapshots, a journal that cannot write always stops writes:
    // what it cannot record would be lost silently at the next crash.
    if (const persist::JournalHealth* journal = ctx.server.persistence.journal();
        journal && journal->failing()) {
        return Refusal::journal_failing;
    }
    // Redis's min-replicas-to-write, after the disk: a primary's writes are
    // refused while too few replicas acknowledge within the lag (a replica
    // refuses them as READONLY already).
    const std::int64_t needed = ctx.settings.min_replicas_to_write();
    if (needed > 0 && ctx.settings.min_replicas_max_lag_seconds() > 0 &&
        ctx.server.gate.good_replicas.load(std::memory_order_relaxed) < needed) {
        return Refusal::too_few_replicas;
    }
    return Refusal::none;
}

// The error reply of a refusal, in Redis's words.
std::string word_refusal(const DispatchContext& ctx, const CommandSpec& spec, Refusal refusal) {
    switch (refusal) {
        case Refusal::none:
            break;
        case Refusal::no_auth:
            return std::string(errors::kNoAuth);
        case Refusal::command_not_permitted:
            return std::string(errors::kNoPermUser) +
                   ctx.registry.acl().user_of(ctx.client).name() +
                   " has no permissions to run the '" + spec.name + "' command";
        case Refusal::key_not_permitted:
            return std::string(errors::kNoPermKey);
        case Refusal::not_in_transaction:
            return std::string(errors::kNotInTransaction);
        case Refusal::subscribed:
            return std::string(errors::kCannotExecute) + spec.name +
                   std::string(errors::kOnlySubscriptionCommands);
        case Refusal::read_only_replica:
            return std::string(errors::kReadOnlyReplica);
        case Refusal::loading:
            return std::string(errors::kLoading);
        case Refusal::primary_unsynced:
            return std::string(errors::kMasterDownUnsynced);
        case Refusal::primary_down:
            return std::string(errors::kMasterDownStale);
        case Refusal::out_of_memory:
            return std::string(errors::kOom);
        case Refusal::snapshot_failing:
            return std::string(errors::kMisconf);
        case Refusal::journal_failing: {
            std::string reason(errors::kMisconfJournal);
            if (const persist::JournalHealth* journal = ctx.server.persistence.journal()) {
                core::append_printable(reason, journal->failure(), 400);
            }
            return reason;
        }
        case Refusal::too_few_replicas:
            return std::string(errors::kNoReplicas);
    }
    return {};
}

// Writes a refusal. EXEC refused by the replica or resource checks ends its
// transaction, with the reason ("EXECABORT Transaction discarded because
// of: ..."), as Redis does; a refusal before those leaves the transaction
// to answer EXECABORT at the next EXEC.
void refuse(DispatchContext& ctx, const CommandSpec& spec, Refusal refusal) {
    std::string reason = word_refusal(ctx, spec, refusal);
    const bool ends_transaction = refusal >= Refusal::read_only_replica;
    if (ends_transaction && spec.is_exec && ctx.client.transaction.active) {
        ctx.client.transaction.discard();
        reason.insert(0, errors::kExecAbortBecause);
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
    Refusal refusal = check_access(registry.acl(), ctx, spec, argv);
    if (refusal == Refusal::none) refusal = check_session(ctx, spec);
    if (refusal != Refusal::none) {
        refuse(ctx, spec, refusal);
        return rejected;
    }
    // Without cluster mode this is one test of a flag fixed at start, always
    // predicted; the checks are out of line so they add nothing else here.
    if (ctx.config.cluster_enabled && !cluster_serves(ctx, spec, argv)) return rejected;
    const Effects effects = effects_of(ctx, spec);
    refusal = check_replica(ctx, effects);
    if (refusal == Refusal::none) refusal = check_resources(ctx, effects);
    if (refusal != Refusal::none) {
        refuse(ctx, spec, refusal);
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
    } catch (const store::WrongType&) {
        // A key of the other filter kind, found before anything changed.
        ctx.out.buffer().resize(reply_mark);
        ctx.out.error(errors::kWrongType);
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

// Counts a command that ran (calls, time, whether it failed, the slow log)
// or was refused; `nanoseconds` is its time.
void record(Context& ctx, const Admitted& admitted, Args argv, std::uint64_t nanoseconds,
            core::CallOutcome outcome) {
    const CommandSpec* spec = admitted.spec;
    switch (admitted.admission) {
        case Admission::unknown:
            break;
        case Admission::rejected:
            ctx.stats.command_stats.record_rejected(spec->id);
            break;
        case Admission::run:
            ctx.stats.command_stats.record_call(spec->id, nanoseconds, outcome);
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
    // time also holds the command's parsing and checks. README
    // ("Monitoring") has what timing costs.
    const core::CommandClock& clock = core::CommandClock::get();
    const std::uint64_t now = clock.now();
    const std::uint64_t nanoseconds = clock.nanoseconds(now - clock_mark);
    clock_mark = now;
    const core::CallOutcome outcome = count_error_replies(ctx, errors_before)
                                          ? core::CallOutcome::failed
                                          : core::CallOutcome::succeeded;
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
    const core::CallOutcome outcome = count_error_replies(ctx, errors_before)
                                          ? core::CallOutcome::failed
                                          : core::CallOutcome::succeeded;
    record(ctx, admitted, argv, nanoseconds, outcome);
}

void dispatch(const Registry& registry, DispatchContext& ctx, Args argv) {
    std::uint64_t clock_mark = core::CommandClock::get().now();
    dispatch(registry, ctx, argv, clock_mark);
}

}  // namespace bloomery::command
