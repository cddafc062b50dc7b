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
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "bloomery/command/context.hpp"

namespace bloomery::command {

using Handler = void (*)(Context&, Args);

struct CommandSpec {
    std::string name;  // lower case; "parent|sub" for subcommands
    int arity = 0;     // Redis convention: N exact, -N at least N (name included)
    std::vector<std::string> flags;
    int first_key = 0, last_key = 0, step = 0;
    bool write = false;    // has the "write" flag
    bool denyoom = false;  // has the "denyoom" flag: refused while used_memory > maxmemory
    nlohmann::json doc;    // the JSON entry as written
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
    void register_handler(std::string_view name, Handler handler);
    // Joins the handlers with `commands_json`; returns false with a message on
    // any mismatch or malformed entry.
    bool build(std::string_view commands_json, std::string& error);
    bool build_from_embedded(std::string& error);

    // Case-insensitive lookup of a top-level command; nullptr if unknown.
    const CommandSpec* find(std::string_view name) const;
    const std::vector<const CommandSpec*>& all() const { return ordered_; }

    // Key positions of a full argv, per the spec (for COMMAND GETKEYS).
    static std::vector<std::size_t> key_positions(const CommandSpec& spec, std::size_t argc);

private:
    struct StringHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const noexcept {
            return std::hash<std::string_view>{}(s);
        }
    };
    std::unordered_map<std::string, Handler> handlers_;
    std::unordered_map<std::string, std::unique_ptr<CommandSpec>, StringHash, std::equal_to<>>
        commands_;
    std::vector<const CommandSpec*> ordered_;
};

// Registers every family's handlers (each *_commands.cpp has its
// registrations at the bottom) and builds from the embedded proto/commands.json.
bool build_default_registry(Registry& registry, std::string& error);

// Replies "ERR wrong number of arguments for 'NAME' command", for handlers
// whose commands have an upper bound the arity in the table cannot express.
void reply_wrong_arity(Context& ctx, std::string_view command_name);

// Runs one command: lookup, arity, dispatch, error replies for unknown
// commands and wrong arity. argv[0] is the name.
void dispatch(const Registry& registry, Context& ctx, Args argv);

}  // namespace bloomery::command
