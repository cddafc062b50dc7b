// COMMAND (COUNT, INFO, DOCS, LIST, GETKEYS) answered from proto/commands.json,
// and MODULE LIST for tools that look for RedisBloom.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/glob.hpp"
#include "bloomery/command/registry.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

void write_string_set(Context& ctx, const nlohmann::json& values) {
    ctx.out.set(values.size());
    for (const auto& v : values) ctx.out.simple(v.get<std::string>());
}

// One step of a key spec: {"type": type, "spec": {<fields> pairs follow}}.
void begin_key_spec_step(Context& ctx, std::string_view step, std::string_view type,
                         std::size_t fields) {
    ctx.out.bulk(step);
    ctx.out.map(2);
    ctx.out.bulk("type");
    ctx.out.bulk(type);
    ctx.out.bulk("spec");
    ctx.out.map(fields);
}

void write_command_info(Context& ctx, const CommandSpec& spec) {
    ctx.out.array(10);
    ctx.out.bulk(spec.name);
    ctx.out.integer(spec.arity);
    ctx.out.set(spec.flags.size());
    for (const auto& flag : spec.flags) ctx.out.simple(flag);
    ctx.out.integer(spec.first_key);
    ctx.out.integer(spec.last_key);
    ctx.out.integer(spec.step);
    write_string_set(ctx, spec.doc.value("acl_categories", nlohmann::json::array()));
    ctx.out.set(0);  // tips
    // Key specs (Redis 7): one range spec covering first_key..last_key.
    if (spec.first_key > 0) {
        ctx.out.array(1);
        ctx.out.map(4);
        ctx.out.bulk("flags");
        ctx.out.set(1);
        ctx.out.simple(spec.write ? "RW" : "RO");
        begin_key_spec_step(ctx, "begin_search", "index", 1);
        ctx.out.bulk("index");
        ctx.out.integer(spec.first_key);
        begin_key_spec_step(ctx, "find_keys", "range", 3);
        ctx.out.bulk("lastkey");
        ctx.out.integer(spec.last_key < 0 ? spec.last_key : spec.last_key - spec.first_key);
        ctx.out.bulk("keystep");
        ctx.out.integer(spec.step);
        ctx.out.bulk("limit");
        ctx.out.integer(0);
        ctx.out.bulk("notes");
        ctx.out.bulk("");
    } else {
        ctx.out.array(0);
    }
    ctx.out.array(spec.subcommands.size());
    for (const auto& sub : spec.subcommands) write_command_info(ctx, *sub);
}

// A text of proto/commands.json as COMMAND DOCS shows it: `label`, then the
// text under `field` ("" if absent).
void write_doc_text(Context& ctx, std::string_view label, const nlohmann::json& doc,
                    const char* field) {
    ctx.out.bulk(label);
    ctx.out.bulk(doc.value(field, ""));
}

void write_doc_arguments(Context& ctx, const nlohmann::json& arguments) {
    ctx.out.array(arguments.size());
    for (const auto& arg : arguments) {
        std::size_t fields = 2;
        for (const char* key : {"token", "flags", "arguments"}) fields += arg.contains(key) ? 1 : 0;
        ctx.out.map(fields + 1);
        write_doc_text(ctx, "name", arg, "name");
        write_doc_text(ctx, "type", arg, "type");
        write_doc_text(ctx, "display_text", arg, "name");
        if (arg.contains("token")) {
            ctx.out.bulk("token");
            ctx.out.bulk(arg["token"].get<std::string>());
        }
        if (arg.contains("flags")) {
            ctx.out.bulk("flags");
            write_string_set(ctx, arg["flags"]);
        }
        if (arg.contains("arguments")) {
            ctx.out.bulk("arguments");
            write_doc_arguments(ctx, arg["arguments"]);
        }
    }
}

void write_command_docs(Context& ctx, const CommandSpec& spec) {
    const nlohmann::json& doc = spec.doc;
    const bool has_args = doc.contains("arguments") && !doc["arguments"].empty();
    const bool has_subs = !spec.subcommands.empty();
    ctx.out.map(4 + (has_args ? 1 : 0) + (has_subs ? 1 : 0));
    for (const char* field : {"summary", "since", "group", "complexity"}) {
        write_doc_text(ctx, field, doc, field);
    }
    if (has_args) {
        ctx.out.bulk("arguments");
        write_doc_arguments(ctx, doc["arguments"]);
    }
    if (has_subs) {
        ctx.out.bulk("subcommands");
        ctx.out.map(spec.subcommands.size());
        for (const auto& sub : spec.subcommands) {
            ctx.out.bulk(sub->name);
            write_command_docs(ctx, *sub);
        }
    }
}

void cmd_command(Context& ctx, Args) {
    const auto& all = ctx.registry.all();
    ctx.out.array(all.size());
    for (const CommandSpec* spec : all) write_command_info(ctx, *spec);
}

void cmd_command_count(Context& ctx, Args) {
    ctx.out.integer(static_cast<std::int64_t>(ctx.registry.all().size()));
}

// Finds "name" or "parent|sub".
const CommandSpec* lookup_full(const Registry& registry, std::string_view name) {
    const std::size_t bar = name.find('|');
    const CommandSpec* spec = registry.find(name.substr(0, bar));
    if (spec && bar != std::string_view::npos) return spec->find_subcommand(name.substr(bar + 1));
    return spec;
}

void cmd_command_info(Context& ctx, Args argv) {
    const Args names = ArgCursor(argv, 2).rest();
    if (names.empty()) {
        cmd_command(ctx, argv);
        return;
    }
    ctx.out.array(names.size());
    for (const std::string_view name : names) {
        const CommandSpec* spec = lookup_full(ctx.registry, name);
        if (spec) {
            write_command_info(ctx, *spec);
        } else {
            ctx.out.null_array();
        }
    }
}

void cmd_command_docs(Context& ctx, Args argv) {
    const Args names = ArgCursor(argv, 2).rest();
    std::vector<const CommandSpec*> specs;
    if (names.empty()) {
        specs = ctx.registry.all();
    } else {
        for (const std::string_view name : names) {
            if (const CommandSpec* spec = lookup_full(ctx.registry, name)) specs.push_back(spec);
        }
    }
    ctx.out.map(specs.size());
    for (const CommandSpec* spec : specs) {
        ctx.out.bulk(spec->name);
        write_command_docs(ctx, *spec);
    }
}

// COMMAND LIST's filter: none, or FILTERBY MODULE name (no command is a
// module's here), ACLCAT category or PATTERN glob (an empty category or
// glob filters nothing).
struct CommandListFilter {
    enum class By { nothing, module, category, pattern };
    By by = By::nothing;
    std::string_view value;
};

core::Result<CommandListFilter> parse_command_list_filter(Args argv) {
    ArgCursor args(argv, 2);
    if (!args.has_next()) return CommandListFilter{};
    if (args.remaining() != 3 || !args.eat("FILTERBY")) return refuse(errors::kSyntax);
    constexpr CommandListFilter::By kBy[] = {CommandListFilter::By::module,
                                             CommandListFilter::By::category,
                                             CommandListFilter::By::pattern};
    const std::optional<std::size_t> by = args.eat_one_of({"MODULE", "ACLCAT", "PATTERN"});
    if (!by) return refuse(errors::kSyntax);
    return CommandListFilter{kBy[*by], args.next()};
}

// Whether `spec` is in ACL category `category` (named without its '@').
bool in_category(const CommandSpec& spec, std::string_view category) {
    for (const auto& cat : spec.doc.value("acl_categories", nlohmann::json::array())) {
        const std::string c = cat.get<std::string>();
        if (iequals(std::string_view(c).substr(c.empty() ? 0 : 1), category)) return true;
    }
    return false;
}

void cmd_command_list(Context& ctx, Args argv) {
    const core::Result<CommandListFilter> filter = parse_command_list_filter(argv);
    if (!filter) {
        ctx.out.error(filter.error());
        return;
    }
    std::vector<std::string_view> names;
    auto consider = [&](const CommandSpec& spec) {
        switch (filter->by) {
            case CommandListFilter::By::module:
                return;  // no modules: every command is built in
            case CommandListFilter::By::category:
                if (!filter->value.empty() && !in_category(spec, filter->value)) return;
                break;
            case CommandListFilter::By::pattern:
                if (!filter->value.empty() &&
                    !glob_match(filter->value, spec.name, GlobCase::insensitive))
                    return;
                break;
            case CommandListFilter::By::nothing:
                break;
        }
        names.push_back(spec.name);
    };
    for (const CommandSpec* spec : ctx.registry.all()) {
        consider(*spec);
        for (const auto& sub : spec->subcommands) consider(*sub);
    }
    ctx.out.array(names.size());
    for (std::string_view name : names) ctx.out.bulk(name);
}

void cmd_command_getkeys(Context& ctx, Args argv) {
    const Args target = argv.subspan(2);
    const CommandSpec* spec = ctx.registry.find(target[0]);
    if (spec == nullptr) {
        ctx.out.error(errors::kGetkeysUnknownCommand);
        return;
    }
    if (!spec->arity_ok(target.size())) {
        ctx.out.error(errors::kGetkeysWrongArity);
        return;
    }
    const auto keys = Registry::key_positions(*spec, target);
    if (keys.empty()) {
        ctx.out.error(errors::kGetkeysNoKeys);
        return;
    }
    ctx.out.array(keys.size());
    for (std::size_t position : keys) ctx.out.bulk(target[position]);
}

void cmd_command_help(Context& ctx, Args) {
    reply_help(ctx, {"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                     "(no subcommand)", "    Return details about all commands.", "COUNT",
                     "    Return the total number of commands.", "INFO [<command-name> ...]",
                     "    Return details about the given commands, or all.",
                     "DOCS [<command-name> ...]", "    Return documentation of the given commands.",
                     "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
                     "    Return a list of command names.", "GETKEYS <full-command>",
                     "    Return the keys of a full command.", "HELP", "    Print this help."});
}

// ---- MODULE ----

// Tools such as RedisInsight look for RedisBloom ("bf") in MODULE LIST before
// they offer Bloom commands; bloomery has them built in, at the RedisBloom
// version whose BF.* behaviour it follows (kRedisBloomVersion).
void cmd_module_list(Context& ctx, Args) {
    ctx.out.array(1);
    write_module_entry(ctx);
}

void cmd_module_help(Context& ctx, Args) {
    reply_help(ctx, {"MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "LIST",
                     "    Return a list of loaded modules.", "HELP", "    Print this help."});
}
}  // namespace

void register_introspection_commands(Registry& registry) {
    registry.register_handler<cmd_command>("command");
    registry.register_handler<cmd_command_count>("command|count");
    registry.register_handler<cmd_command_info>("command|info");
    registry.register_handler<cmd_command_docs>("command|docs");
    registry.register_handler<cmd_command_list>("command|list");
    registry.register_handler<cmd_command_getkeys>("command|getkeys");
    registry.register_handler<cmd_command_help>("command|help");
    registry.register_handler<cmd_module_list>("module|list");
    registry.register_handler<cmd_module_help>("module|help");
}

}  // namespace bloomery::command
