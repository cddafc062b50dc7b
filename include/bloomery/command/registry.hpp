#pragma once
// The command table. Names, arity, flags, key positions and documentation come
// from proto/commands.json (embedded at build time); handlers are registered
// in code by each command family. build() joins the two and fails if either
// side has an entry the other lacks, so the JSON cannot drift from the code.
//
// Thread safety: built once before the server starts; read-only afterwards.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "bloomery/command/context.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::command {

class Acl;
// How dispatch calls a command: with everything (register_handler makes one
// for each handler, giving it only the view its signature names).
using Handler = void (*)(DispatchContext&, Args);

// A handler's first parameter: Context& (no service of the server),
// With<uses::...>& (the services it names) or, for EXEC alone, which
// dispatches its queue, DispatchContext&.
template <class Fn>
struct HandlerView;
template <class View>
struct HandlerView<void (*)(View&, Args)> {
    using type = View;
};

// The argument positions of one call's keys: first, first + step, ... up to
// last (a position below the call's argument count). None when first > last.
struct KeyRange {
    long first = 1;
    long last = 0;
    long step = 1;
};
// Where the keys of a command with movable keys (flag "movablekeys", e.g.
// MIGRATE ... KEYS k1 k2) are in one call, found from its arguments (the
// call passed the arity check).
using KeyFinder = KeyRange (*)(Args argv);

struct CommandSpec {
    std::string name;  // lower case; "parent|sub" for subcommands
    int arity = 0;     // Redis convention: N exact, -N at least N (name included)
    std::vector<std::string> flags;
    int first_key = 0, last_key = 0, step = 0;
    bool write = false;     // has the "write" flag
    bool denyoom = false;   // has the "denyoom" flag: refused while used_memory > maxmemory
    bool no_auth = false;   // has the "no_auth" flag: runs before AUTH, for every user (acl.hpp)
    bool no_multi = false;  // has the "no_multi" flag: refused inside MULTI
    bool fast = false;      // has the "fast" flag: the latency monitor's "fast-command" event
    // Has the "asking" flag (RESTORE-ASKING): in cluster mode it is served
    // whatever slot its key is in, as if ASKING came first.
    bool asking = false;
    // Has the "movablekeys" flag: its keys are found by find_keys, and
    // first_key / last_key / step only describe its simplest form (COMMAND
    // INFO's legacy fields, as in Redis).
    KeyFinder find_keys = nullptr;
    // Runs at once inside MULTI instead of being queued: EXEC, DISCARD,
    // MULTI, WATCH, QUIT, RESET (as Redis's processCommand).
    bool transaction_control = false;
    // Touches keys it does not name (FLUSHALL, KEYS, SCAN, DBSIZE...): in the
    // @keyspace category with no key arguments. EXEC holds every shard for it.
    bool keyspace_wide = false;
    bool is_exec = false;
    // Runs while a RESP2 client is subscribed: (P)SUBSCRIBE, (P)UNSUBSCRIBE,
    // PING, QUIT, RESET.
    bool allowed_while_subscribed = false;
    std::uint64_t categories = 0;  // bit i set: in Registry::categories()[i]
    std::size_t id = 0;            // dense index over every command and subcommand (ACL bitsets)
    const CommandSpec* parent = nullptr;  // the container, for a subcommand
    nlohmann::json doc;                   // the JSON entry as written
    Handler handler = nullptr;
    std::vector<std::unique_ptr<CommandSpec>> subcommands;

    bool arity_ok(std::size_t argc) const {
        return arity >= 0 ? argc == static_cast<std::size_t>(arity)
                          : argc >= static_cast<std::size_t>(-arity);
    }
    const CommandSpec* find_subcommand(std::string_view name) const;
};

class Registry {
public:
    // Registers `Fn` (void(View&, Args), View as HandlerView says) for the
    // command or subcommand ("parent|sub") `name`.
    template <auto Fn>
    void register_handler(std::string_view name) {
        register_dispatch(name, &call_handler<Fn>);
    }
    // The key finder of a command flagged "movablekeys" in the table;
    // build() refuses one without the other.
    void register_key_finder(std::string_view name, KeyFinder finder);
    // Joins the handlers with `commands_json`; fails, saying which entry or
    // handler, on any mismatch or malformed entry.
    core::Status build(std::string_view commands_json);
    core::Status build_from_embedded();

    // Case-insensitive lookup of a top-level command; nullptr if unknown.
    const CommandSpec* find(std::string_view name) const;
    const std::vector<const CommandSpec*>& all() const { return ordered_; }

    // Key positions of a full argv, per the spec (for COMMAND GETKEYS).
    static std::vector<std::size_t> key_positions(const CommandSpec& spec, Args argv);

    // ACL categories without the '@', in the order of proto/commands.json's
    // "acl_categories" (ACL CAT's order); every command's categories are among them.
    const std::vector<std::string>& categories() const { return categories_; }
    // Index of a category name (case-insensitive, without '@'); -1 if unknown.
    int category_index(std::string_view name) const;
    // Every command and subcommand, indexed by CommandSpec::id.
    const std::vector<const CommandSpec*>& by_id() const { return by_id_; }

    // Who may run what (acl.hpp). build() installs an open one (the default
    // user, no password, every command); the server replaces it once at
    // start, before any client connects, and it is read-only afterwards.
    const Acl& acl() const { return *acl_; }
    void set_acl(std::shared_ptr<const Acl> acl) { acl_ = std::move(acl); }

private:
    template <auto Fn>
    static void call_handler(DispatchContext& ctx, Args argv) {
        using View = typename HandlerView<decltype(Fn)>::type;
        if constexpr (std::is_same_v<View, DispatchContext> || std::is_same_v<View, Context>) {
            Fn(ctx, argv);
        } else {
            View view(ctx);
            Fn(view, argv);
        }
    }
    void register_dispatch(std::string_view name, Handler handler);

    // build()'s steps (command_table.cpp). Whether an entry must have a
    // handler: a container without one dispatches to its subcommands.
    enum class HandlerNeed { required, optional };
    core::Status attach_handler(CommandSpec& spec, HandlerNeed need,
                                std::unordered_set<std::string>& used) const;
    // One entry and its subcommands, with their handlers (their names go
    // into `used`).
    core::Result<std::unique_ptr<CommandSpec>> make_command(
        const nlohmann::json& entry, std::unordered_set<std::string>& used) const;
    void add_command(std::unique_ptr<CommandSpec> spec);
    // Every handler and key finder registered has its entry.
    core::Status check_registrations_used(const std::unordered_set<std::string>& used) const;

    struct StringHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const noexcept {
            return std::hash<std::string_view>{}(s);
        }
    };
    std::unordered_map<std::string, Handler> handlers_;
    std::unordered_map<std::string, KeyFinder> key_finders_;
    std::unordered_map<std::string, std::unique_ptr<CommandSpec>, StringHash, std::equal_to<>>
        commands_;
    std::vector<const CommandSpec*> ordered_;
    std::vector<std::string> categories_;
    std::vector<const CommandSpec*> by_id_;
    std::shared_ptr<const Acl> acl_;
};

// The keys of one call of `spec` (the call passed the arity check): what
// access control checks and cluster mode routes by. Inline: it runs before
// every command of a key-limited user and every command in cluster mode.
inline KeyRange key_range(const CommandSpec& spec, Args argv) {
    if (spec.find_keys != nullptr) return spec.find_keys(argv);
    if (spec.first_key <= 0 || spec.step <= 0) return {};
    const long argc = static_cast<long>(argv.size());
    const long last = spec.last_key < 0 ? argc + spec.last_key : spec.last_key;
    return {spec.first_key, last < argc ? last : argc - 1, spec.step};
}

// Registers every family's handlers (each *_commands.cpp has its
// registrations at the bottom) and builds from the embedded proto/commands.json.
core::Status build_default_registry(Registry& registry);

// Replies "ERR wrong number of arguments for 'NAME' command", for handlers
// whose commands have an upper bound the arity in the table cannot express.
void reply_wrong_arity(Context& ctx, std::string_view command_name);

// Runs one command: lookup, arity, dispatch, error replies for unknown
// commands and wrong arity. argv[0] is the name. Counts it in ctx.stats
// (calls, time, rejected or failed, latency) and logs it in ctx.slowlog if
// it was slow.
//
// `clock_mark` (core::CommandClock ticks) is when work on this command
// began: when its connection started on its batch of input, or the end of
// the command before it in that batch. The command's time runs from there to
// the end of its handler, its parsing and checks included, and dispatch moves
// the mark to that end: one clock read per command.
void dispatch(const Registry& registry, DispatchContext& ctx, Args argv, std::uint64_t& clock_mark);
// The same, timing from now (two clock reads).
void dispatch(const Registry& registry, DispatchContext& ctx, Args argv);

// Runs one command EXEC took from its client's queue (checked when it was
// queued): its ACL is checked again, since rules may have changed, then its
// handler runs, counted and logged as dispatch() does.
void run_queued(const Registry& registry, DispatchContext& ctx, const CommandSpec& spec, Args argv);

}  // namespace bloomery::command
