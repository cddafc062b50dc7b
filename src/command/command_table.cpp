// Building the command table: proto/commands.json (embedded at build time)
// joined with the handlers and key finders the families registered. Every
// mismatch between the two is an error, so the JSON cannot drift from the
// code.

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

#include "bloomery/command/acl.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/ascii.hpp"
#include "bloomery/core/command_stats.hpp"

namespace bloomery::command {

extern const std::string_view kCommandsJson;

namespace {

bool has_flag(const CommandSpec& spec, std::string_view flag) {
    return std::find(spec.flags.begin(), spec.flags.end(), flag) != spec.flags.end();
}

bool named_one_of(const CommandSpec& spec, std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), spec.name) != names.end();
}

// What dispatch reads of a spec, derived once from its name, flags and
// categories (`spec_categories` as the entry lists them, with their '@').
void derive_behaviour(CommandSpec& spec, const std::vector<std::string>& spec_categories) {
    spec.write = has_flag(spec, "write");
    spec.denyoom = has_flag(spec, "denyoom");
    spec.no_auth = has_flag(spec, "no_auth");
    spec.no_multi = has_flag(spec, "no_multi");
    spec.fast = has_flag(spec, "fast");
    spec.asking = has_flag(spec, "asking");
    spec.transaction_control =
        named_one_of(spec, {"exec", "discard", "multi", "watch", "quit", "reset"});
    spec.is_exec = spec.name == "exec";
    spec.allowed_while_subscribed = named_one_of(
        spec, {"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ping", "quit", "reset"});
    spec.keyspace_wide = spec.first_key <= 0 &&
                         std::find(spec_categories.begin(), spec_categories.end(), "@keyspace") !=
                             spec_categories.end();
}

// The spec's categories as bits over the table's list; every one must be
// listed there.
core::Status set_categories(CommandSpec& spec, const std::vector<std::string>& spec_categories,
                            const std::vector<std::string>& categories) {
    for (const std::string& category : spec_categories) {
        const auto it = category.empty() || category[0] != '@'
                            ? categories.end()
                            : std::find(categories.begin(), categories.end(),
                                        core::ascii_lower(std::string_view(category).substr(1)));
        if (it == categories.end()) {
            return core::Error{"command '" + spec.name + "' has ACL category '" + category +
                               "', which is not in the top-level \"acl_categories\""};
        }
        spec.categories |= std::uint64_t{1} << (it - categories.begin());
    }
    return {};
}

// One entry of the table, without its handler or subcommands.
core::Result<std::unique_ptr<CommandSpec>> parse_spec(const nlohmann::json& entry,
                                                      const std::vector<std::string>& categories) {
    auto spec = std::make_unique<CommandSpec>();
    std::vector<std::string> spec_categories;
    try {
        spec->name = core::ascii_lower(entry.at("name").get<std::string>());
        spec->arity = entry.at("arity").get<int>();
        spec->flags = entry.at("flags").get<std::vector<std::string>>();
        spec->first_key = entry.at("first_key").get<int>();
        spec->last_key = entry.at("last_key").get<int>();
        spec->step = entry.at("step").get<int>();
        spec_categories =
            entry.value("acl_categories", nlohmann::json::array()).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& e) {
        return core::Error{"malformed command entry: " + std::string(e.what())};
    }
    if (spec->arity == 0) return core::Error{"command '" + spec->name + "' has arity 0"};
    derive_behaviour(*spec, spec_categories);
    if (core::Status listed = set_categories(*spec, spec_categories, categories); !listed) {
        return listed.failure();
    }
    spec->doc = entry;
    return spec;
}

// The table's JSON, with its "commands" array.
core::Result<nlohmann::json> parse_table(std::string_view commands_json) {
    nlohmann::json root;
    try {
        root = nlohmann::json::parse(commands_json);
    } catch (const nlohmann::json::exception& e) {
        return core::Error{std::string("proto/commands.json does not parse: ") + e.what()};
    }
    if (!root.contains("commands") || !root["commands"].is_array()) {
        return core::Error{"proto/commands.json has no \"commands\" array"};
    }
    return root;
}

// The ACL categories, listed once; each command's "acl_categories" must name
// only these, so a typo cannot create a category no rule can reach.
core::Result<std::vector<std::string>> read_categories(const nlohmann::json& root) {
    std::vector<std::string> categories;
    try {
        for (const auto& category : root.value("acl_categories", nlohmann::json::array())) {
            const std::string name = category.get<std::string>();
            if (name.size() < 2 || name[0] != '@') throw std::invalid_argument(name);
            categories.push_back(core::ascii_lower(std::string_view(name).substr(1)));
        }
    } catch (const std::exception& e) {
        return core::Error{
            std::string(R"(proto/commands.json needs "acl_categories": ["@name", ...]: )") +
            e.what()};
    }
    if (categories.size() > 64) {
        return core::Error{"proto/commands.json has more than 64 ACL categories"};
    }
    return categories;
}

}  // namespace

core::Status Registry::build_from_embedded() {
    return build(kCommandsJson);
}

core::Status Registry::attach_handler(CommandSpec& spec, HandlerNeed need,
                                      std::unordered_set<std::string>& used) const {
    const auto it = handlers_.find(spec.name);
    if (it == handlers_.end()) {
        if (need == HandlerNeed::optional) return {};  // dispatch goes to the subcommands
        return core::Error{"command '" + spec.name + "' in proto/commands.json has no handler"};
    }
    spec.handler = it->second;
    used.insert(spec.name);
    const bool movable = has_flag(spec, "movablekeys");
    const auto finder = key_finders_.find(spec.name);
    if (movable != (finder != key_finders_.end())) {
        return core::Error{"command '" + spec.name + "' " +
                           (movable ? "has the movablekeys flag and no key finder"
                                    : "has a key finder and no movablekeys flag")};
    }
    if (movable) spec.find_keys = finder->second;
    return {};
}

core::Result<std::unique_ptr<CommandSpec>> Registry::make_command(
    const nlohmann::json& entry, std::unordered_set<std::string>& used) const {
    auto spec = parse_spec(entry, categories_);
    if (!spec) return spec.failure();
    CommandSpec& command = **spec;
    const bool container = entry.contains("subcommands");
    if (container) {
        for (const auto& sub_entry : entry["subcommands"]) {
            auto sub = parse_spec(sub_entry, categories_);
            if (!sub) return sub.failure();
            (*sub)->parent = &command;
            if ((*sub)->name.rfind(command.name + "|", 0) != 0) {
                return core::Error{"subcommand '" + (*sub)->name + "' is not named '" +
                                   command.name + "|...'"};
            }
            if (core::Status attached = attach_handler(**sub, HandlerNeed::required, used);
                !attached) {
                return attached.failure();
            }
            command.subcommands.push_back(std::move(*sub));
        }
    }
    const HandlerNeed need = container ? HandlerNeed::optional : HandlerNeed::required;
    if (core::Status attached = attach_handler(command, need, used); !attached) {
        return attached.failure();
    }
    return spec;
}

void Registry::add_command(std::unique_ptr<CommandSpec> spec) {
    spec->id = by_id_.size();
    by_id_.push_back(spec.get());
    for (const auto& sub : spec->subcommands) {
        sub->id = by_id_.size();
        by_id_.push_back(sub.get());
    }
    ordered_.push_back(spec.get());
    commands_.emplace(spec->name, std::move(spec));
}

core::Status Registry::check_registrations_used(const std::unordered_set<std::string>& used) const {
    for (const auto& [name, handler] : handlers_) {
        if (!used.count(name)) {
            return core::Error{"handler '" + name + "' has no entry in proto/commands.json"};
        }
    }
    for (const auto& [name, finder] : key_finders_) {
        const auto it = commands_.find(name);
        if (it == commands_.end() || it->second->find_keys != finder) {
            return core::Error{"key finder '" + name + "' has no command in proto/commands.json"};
        }
    }
    return {};
}

core::Status Registry::build(std::string_view commands_json) {
    commands_.clear();
    ordered_.clear();
    categories_.clear();
    by_id_.clear();
    const core::Result<nlohmann::json> root = parse_table(commands_json);
    if (!root) return root.failure();
    core::Result<std::vector<std::string>> categories = read_categories(*root);
    if (!categories) return categories.failure();
    categories_ = std::move(*categories);
    std::unordered_set<std::string> used;
    for (const auto& entry : (*root)["commands"]) {
        core::Result<std::unique_ptr<CommandSpec>> spec = make_command(entry, used);
        if (!spec) return spec.failure();
        if (commands_.count((*spec)->name)) {
            return core::Error{"command '" + (*spec)->name +
                               "' appears twice in proto/commands.json"};
        }
        add_command(std::move(*spec));
    }
    if (by_id_.size() > core::kMaxCommandIds) {
        return core::Error{"proto/commands.json has " + std::to_string(by_id_.size()) +
                           " commands and subcommands; per-command statistics hold at most " +
                           std::to_string(core::kMaxCommandIds) + " (core/command_stats.hpp)"};
    }
    if (core::Status all_used = check_registrations_used(used); !all_used) return all_used;
    acl_ = std::make_shared<const Acl>(*this);
    return {};
}

}  // namespace bloomery::command
