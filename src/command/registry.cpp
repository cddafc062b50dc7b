#include "bloomery/command/registry.hpp"

#include <algorithm>
#include <cctype>
#include <new>
#include <stdexcept>

#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/core/ascii.hpp"
#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/core/printable.hpp"
#include "bloomery/persist/journal_health.hpp"
#include "cluster_routing.hpp"
#include "families.hpp"

namespace bloomery::command {

extern const std::string_view kCommandsJson;

namespace {

bool parse_spec(const nlohmann::json& entry, const std::vector<std::string>& categories,
                CommandSpec& spec, std::string& error) {
    std::vector<std::string> spec_categories;
    try {
        spec.name = core::ascii_lower(entry.at("name").get<std::string>());
        spec.arity = entry.at("arity").get<int>();
        spec.flags = entry.at("flags").get<std::vector<std::string>>();
        spec.first_key = entry.at("first_key").get<int>();
        spec.last_key = entry.at("last_key").get<int>();
        spec.step = entry.at("step").get<int>();
        spec_categories =
            entry.value("acl_categories", nlohmann::json::array()).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& e) {
        error = "malformed command entry: " + std::string(e.what());
        return false;
    }
    if (spec.arity == 0) {
        error = "command '" + spec.name + "' has arity 0";
        return false;
    }
    spec.write = std::find(spec.flags.begin(), spec.flags.end(), "write") != spec.flags.end();
    spec.denyoom = std::find(spec.flags.begin(), spec.flags.end(), "denyoom") != spec.flags.end();
    spec.no_auth = std::find(spec.flags.begin(), spec.flags.end(), "no_auth") != spec.flags.end();
    spec.no_multi = std::find(spec.flags.begin(), spec.flags.end(), "no_multi") != spec.flags.end();
    for (std::string_view control : {"exec", "discard", "multi", "watch", "quit", "reset"}) {
        if (spec.name == control) spec.transaction_control = true;
    }
    spec.is_exec = spec.name == "exec";
    for (std::string_view allowed :
         {"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ping", "quit", "reset"}) {
        if (spec.name == allowed) spec.allowed_while_subscribed = true;
    }
    spec.keyspace_wide = spec.first_key <= 0 &&
                         std::find(spec_categories.begin(), spec_categories.end(), "@keyspace") !=
                             spec_categories.end();
    spec.fast = std::find(spec.flags.begin(), spec.flags.end(), "fast") != spec.flags.end();
    spec.asking = std::find(spec.flags.begin(), spec.flags.end(), "asking") != spec.flags.end();
    for (const std::string& category : spec_categories) {
        const auto it = category.empty() || category[0] != '@'
                            ? categories.end()
                            : std::find(categories.begin(), categories.end(),
                                        core::ascii_lower(std::string_view(category).substr(1)));
        if (it == categories.end()) {
            error = "command '" + spec.name + "' has ACL category '" + category +
                    "', which is not in the top-level \"acl_categories\"";
            return false;
        }
        spec.categories |= std::uint64_t{1} << (it - categories.begin());
    }
    spec.doc = entry;
    return true;
}

// The table's JSON, with its "commands" array.
bool parse_table(std::string_view commands_json, nlohmann::json& root, std::string& error) {
    try {
        root = nlohmann::json::parse(commands_json);
    } catch (const nlohmann::json::exception& e) {
        error = std::string("proto/commands.json does not parse: ") + e.what();
        return false;
    }
    if (!root.contains("commands") || !root["commands"].is_array()) {
        error = "proto/commands.json has no \"commands\" array";
        return false;
    }
    return true;
}

// The ACL categories, listed once; each command's "acl_categories" must name
// only these, so a typo cannot create a category no rule can reach.
bool read_categories(const nlohmann::json& root, std::vector<std::string>& categories,
                     std::string& error) {
    try {
        for (const auto& category : root.value("acl_categories", nlohmann::json::array())) {
            const std::string name = category.get<std::string>();
            if (name.size() < 2 || name[0] != '@') throw std::invalid_argument(name);
            categories.push_back(core::ascii_lower(std::string_view(name).substr(1)));
        }
    } catch (const std::exception& e) {
        error = std::string("proto/commands.json needs \"acl_categories\": [\"@name\", ...]: ") +
                e.what();
        return false;
    }
    if (categories.size() > 64) {
        error = "proto/commands.json has more than 64 ACL categories";
        return false;
    }
    return true;
}

}  // namespace

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

void Registry::register_dispatch(std::string_view name, Handler handler) {
    handlers_[core::ascii_lower(name)] = handler;
}

void Registry::register_key_finder(std::string_view name, KeyFinder finder) {
    key_finders_[core::ascii_lower(name)] = finder;
}

bool Registry::build_from_embedded(std::string& error) {
    return build(kCommandsJson, error);
}

bool Registry::build(std::string_view commands_json, std::string& error) {
    commands_.clear();
    ordered_.clear();
    categories_.clear();
    by_id_.clear();
    nlohmann::json root;
    if (!parse_table(commands_json, root, error) || !read_categories(root, categories_, error)) {
        return false;
    }
    std::unordered_map<std::string, bool> used;
    auto take_handler = [&](CommandSpec& spec, bool container) -> bool {
        auto it = handlers_.find(spec.name);
        if (it == handlers_.end()) {
            if (container) return true;  // dispatch goes to the subcommands
            error = "command '" + spec.name + "' in proto/commands.json has no handler";
            return false;
        }
        spec.handler = it->second;
        used[spec.name] = true;
        const bool movable =
            std::find(spec.flags.begin(), spec.flags.end(), "movablekeys") != spec.flags.end();
        const auto finder = key_finders_.find(spec.name);
        if (movable != (finder != key_finders_.end())) {
            error = "command '" + spec.name + "' " +
                    (movable ? "has the movablekeys flag and no key finder"
                             : "has a key finder and no movablekeys flag");
            return false;
        }
        if (movable) spec.find_keys = finder->second;
        return true;
    };
    for (const auto& entry : root["commands"]) {
        auto spec = std::make_unique<CommandSpec>();
        if (!parse_spec(entry, categories_, *spec, error)) return false;
        const bool container = entry.contains("subcommands");
        if (container) {
            for (const auto& sub_entry : entry["subcommands"]) {
                auto sub = std::make_unique<CommandSpec>();
                if (!parse_spec(sub_entry, categories_, *sub, error)) return false;
                sub->parent = spec.get();
                if (sub->name.rfind(spec->name + "|", 0) != 0) {
                    error = "subcommand '" + sub->name + "' is not named '" + spec->name + "|...'";
                    return false;
                }
                if (!take_handler(*sub, false)) return false;
                spec->subcommands.push_back(std::move(sub));
            }
        }
        if (!take_handler(*spec, container)) return false;
        if (commands_.count(spec->name)) {
            error = "command '" + spec->name + "' appears twice in proto/commands.json";
            return false;
        }
        spec->id = by_id_.size();
        by_id_.push_back(spec.get());
        for (const auto& sub : spec->subcommands) {
            sub->id = by_id_.size();
            by_id_.push_back(sub.get());
        }
        ordered_.push_back(spec.get());
        commands_.emplace(spec->name, std::move(spec));
    }
    if (by_id_.size() > core::kMaxCommandIds) {
        error = "proto/commands.json has " + std::to_string(by_id_.size()) +
                " commands and subcommands; per-command statistics hold at most " +
                std::to_string(core::kMaxCommandIds) + " (core/command_stats.hpp)";
        return false;
    }
    for (const auto& [name, handler] : handlers_) {
        if (!used.count(name)) {
            error = "handler '" + name + "' has no entry in proto/commands.json";
            return false;
        }
    }
    for (const auto& [name, finder] : key_finders_) {
        const auto it = commands_.find(name);
        if (it == commands_.end() || it->second->find_keys != finder) {
            error = "key finder '" + name + "' has no command in proto/commands.json";
            return false;
        }
    }
    acl_ = std::make_shared<const Acl>(*this);
    return true;
}

int Registry::category_index(std::string_view name) const {
    for (std::size_t i = 0; i < categories_.size(); ++i) {
        const std::string& category = categories_[i];
        if (core::iequals(category, name)) {  // categories are lower case
            return static_cast<int>(i);
        }
    }
    return -1;
}

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

std::vector<std::size_t> Registry::key_positions(const CommandSpec& spec, Args argv) {
    std::vector<std::size_t> keys;
    const KeyRange range = key_range(spec, argv);
    for (long i = range.first; i <= range.last; i += range.step) {
        keys.push_back(static_cast<std::size_t>(i));
    }
    return keys;
}

bool build_default_registry(Registry& registry, std::string& error) {
    register_bf_commands(registry);
    register_keyspace_commands(registry);
    register_dump_commands(registry);
    register_connection_commands(registry);
    register_client_commands(registry);
    register_config_commands(registry);
    register_info_commands(registry);
    register_introspection_commands(registry);
    register_persistence_commands(registry);
    register_acl_commands(registry);
    register_replication_commands(registry);
    register_cluster_commands(registry);
    register_slowlog_commands(registry);
    register_transaction_commands(registry);
    register_pubsub_commands(registry);
    register_memory_commands(registry);
    register_latency_commands(registry);
    return registry.build_from_embedded(error);
}

void reply_wrong_arity(Context& ctx, std::string_view command_name) {
    std::string message = "ERR wrong number of arguments for '";
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

// Unknown command: its name and the start of its arguments, bounded.
void reply_unknown_command(Context& ctx, Args argv) {
    std::string message = "ERR unknown command '";
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
    std::string message = "ERR unknown subcommand '";
    core::append_printable(message, sub, 128);
    message += "'. Try ";
    for (char c : spec.name) {
        message.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
    message += " HELP.";
    ctx.out.error(message);
}

// The command (or subcommand) argv names; replies and returns unknown or
// rejected if there is none.
Admission find_command(const Registry& registry, Context& ctx, Args argv,
                       const CommandSpec*& spec) {
    spec = registry.find(argv[0]);
    if (spec == nullptr) {
        reply_unknown_command(ctx, argv);
        return Admission::unknown;
    }
    if (!spec->subcommands.empty() && (argv.size() >= 2 || spec->handler == nullptr)) {
        if (argv.size() < 2) {
            reply_wrong_arity(ctx, spec->name);
            return Admission::rejected;
        }
        const CommandSpec* sub = spec->find_subcommand(argv[1]);
        if (sub == nullptr) {
            reply_unknown_subcommand(ctx, *spec, argv[1]);
            spec = nullptr;
            return Admission::unknown;
        }
        spec = sub;
    }
    return Admission::run;
}

// Access control, in Redis's order: after the name and arity checks, NOAUTH
// before any user's permissions. Allowed commands cost a flag test and a bit
// test; text is built only for a refusal.
bool access_allowed(const Acl& acl, Context& ctx, const CommandSpec& spec, Args argv) {
    if (!acl.is_authenticated(ctx.client) && !spec.no_auth) {
        ctx.out.error(errors::kNoAuth);
        return false;
    }
    const AclUser& user = acl.user_of(ctx.client);
    if (!user.may_run(spec)) {
        ctx.out.error("NOPERM User " + user.name() + " has no permissions to run the '" +
                      spec.name + "' command");
        return false;
    }
    if (!user.may_access_keys(spec, argv)) {
        ctx.out.error(errors::kNoPermKey);
        return false;
    }
    return true;
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
// for the data. One relaxed load when neither applies. Returns whether it
// refuses, the reason in `reason` (no string is built on the common path).
bool replica_refusal(const DispatchContext& ctx, const Effects& effects, std::string& reason) {
    const std::uint8_t replication =
        ctx.server.gate.replication_flags.load(std::memory_order_relaxed);
    if (replication == 0) return false;
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
    return !reason.empty();
}

// Redis's order: memory first, then the disk error. Reads and deletes (no
// denyoom flag) keep working past maxmemory.
bool resource_refusal(const DispatchContext& ctx, const Effects& effects, std::string& reason) {
    if (effects.denyoom && core::memory_would_exceed(ctx.config.maxmemory)) {
        reason = errors::kOom;
        return true;
    }
    if (!effects.write) return false;
    if (ctx.config.stop_writes_on_bgsave_error && ctx.server.persistence.snapshot_failing()) {
        reason = errors::kMisconf;
        return true;
    }
    // Unlike snapshots, a journal that cannot write always stops writes:
    // what it cannot record would be lost silently at the next crash.
    if (const persist::JournalHealth* journal = ctx.server.persistence.journal();
        journal && journal->failing()) {
        reason = errors::kMisconfJournal;
        core::append_printable(reason, journal->failure(), 400);
        return true;
    }
    return false;
}

// Writes a refusal. EXEC refused ends its transaction, with the reason
// ("EXECABORT Transaction discarded because of: ..."), as Redis does.
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

// Looks the command up and runs every check before its handler, writing the
// error of a refusal. `spec` is set for rejected and run (the subcommand for
// a container).
Admission admit(const Registry& registry, DispatchContext& ctx, Args argv,
                const CommandSpec*& spec) {
    if (const Admission found = find_command(registry, ctx, argv, spec); found != Admission::run) {
        return found;
    }
    ctx.client.last_command.store(spec->name.c_str(), std::memory_order_relaxed);
    if (!spec->arity_ok(argv.size())) {
        reply_wrong_arity(ctx, spec->name);
        return Admission::rejected;
    }
    if (!access_allowed(registry.acl(), ctx, *spec, argv)) return Admission::rejected;
    if (spec->no_multi && ctx.client.transaction.active) {
        ctx.out.error(errors::kNotInTransaction);
        return Admission::rejected;
    }
    // A subscribed RESP2 client reads messages on this connection: only
    // what keeps it subscribed runs (RESP3 pushes mix with replies).
    if (!spec->allowed_while_subscribed && ctx.client.subscriptions.count() != 0 &&
        ctx.out.protocol() == 2) {
        std::string message = "ERR Can't execute '";
        message += spec->name;
        message +=
            "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in "
            "this context";
        ctx.out.error(message);
        return Admission::rejected;
    }
    // Cluster redirection, where Redis checks it: after access control,
    // before the memory and disk checks (a key this node does not serve is
    // redirected, not refused for this node's memory or disk). Without
    // cluster mode this is one test of a flag fixed at start, always
    // predicted; cluster_admits is out of line so it adds nothing else here.
    if (ctx.config.cluster_enabled) {
        if (spec->is_exec && ctx.client.transaction.active) {
            if (!cluster_admits_transaction(ctx)) {
                ctx.client.transaction.discard();
                return Admission::rejected;
            }
        } else if (!cluster_admits(*spec, ctx, argv)) {
            return Admission::rejected;
        }
    }
    const Effects effects = effects_of(ctx, *spec);
    if (std::string refusal;
        replica_refusal(ctx, effects, refusal) || resource_refusal(ctx, effects, refusal)) {
        refuse(ctx, *spec, refusal);
        return Admission::rejected;
    }
    return Admission::run;
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

}  // namespace

namespace {

// Counts a command that ran (calls, time, whether it failed, the slow log)
// or was refused; `nanoseconds` is its time.
void record(Context& ctx, const CommandSpec* spec, Admission admission, Args argv,
            std::uint64_t nanoseconds, bool failed) {
    switch (admission) {
        case Admission::unknown:
            break;
        case Admission::rejected:
            ctx.stats.command_stats.record_rejected(spec->id);
            break;
        case Admission::run:
            ctx.stats.command_stats.record_call(
                spec->id, nanoseconds,
                failed ? core::CallOutcome::failed : core::CallOutcome::succeeded);
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
    const CommandSpec* spec = nullptr;
    Admission admission = admit(registry, ctx, argv, spec);
    TransactionState& transaction = ctx.client.transaction;
    bool queued = false;
    if (transaction.active && admission != Admission::run) {
        // Refused while queueing: EXEC will answer EXECABORT (an EXEC
        // refused has ended the transaction already).
        transaction.aborted = true;
    } else if (transaction.active && !spec->transaction_control) {
        // Queued, not run: counted when EXEC runs it (a queue over its bound
        // counts as refused).
        queued = queue(ctx, *spec, argv);
        if (!queued) admission = Admission::rejected;
    } else if (admission == Admission::run) {
        run_handler(*spec, ctx, argv);
    }
    // One clock read per command, at its end (see CommandClock for why not
    // clock_gettime). Redis times the handler alone, with two reads; this
    // time also holds the command's parsing and checks, a few tens of ns for
    // a small command. README ("Monitoring") has what timing costs.
    const core::CommandClock& clock = core::CommandClock::get();
    const std::uint64_t now = clock.now();
    const std::uint64_t nanoseconds = clock.nanoseconds(now - clock_mark);
    clock_mark = now;
    if (!queued) {
        record(ctx, spec, admission, argv, nanoseconds, ctx.out.errors_written() != errors_before);
    }
    const std::uint64_t errors = ctx.out.errors_written() - errors_before;
    if (errors != 0) WorkerStats::bump(ctx.stats.error_replies, errors);
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
    Admission admission = Admission::run;
    if (!user.may_run(spec)) {
        ctx.out.error(std::string(errors::kNoPermChanged) +
                      "no permission to execute the command or subcommand");
        admission = Admission::rejected;
    } else if (!user.may_access_keys(spec, argv)) {
        ctx.out.error(std::string(errors::kNoPermChanged) +
                      "no permission to touch the specified keys");
        admission = Admission::rejected;
    } else {
        run_handler(spec, ctx, argv);
    }
    const std::uint64_t nanoseconds = clock.nanoseconds(clock.now() - began);
    record(ctx, &spec, admission, argv, nanoseconds, ctx.out.errors_written() != errors_before);
    const std::uint64_t errors = ctx.out.errors_written() - errors_before;
    if (errors != 0) WorkerStats::bump(ctx.stats.error_replies, errors);
}

void dispatch(const Registry& registry, DispatchContext& ctx, Args argv) {
    std::uint64_t clock_mark = core::CommandClock::get().now();
    dispatch(registry, ctx, argv, clock_mark);
}

}  // namespace bloomery::command
