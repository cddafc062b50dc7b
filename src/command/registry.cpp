// The command table as an object: what the families register, lookups by
// category, key positions. Building it from proto/commands.json is
// command_table.cpp; running a command, and the lookups by name it makes,
// dispatch.cpp.

#include "bloomery/command/registry.hpp"

#include "bloomery/core/ascii.hpp"
#include "families.hpp"

namespace bloomery::command {

void Registry::register_dispatch(std::string_view name, Handler handler) {
    handlers_[core::ascii_lower(name)] = handler;
}

void Registry::register_key_finder(std::string_view name, KeyFinder finder) {
    key_finders_[core::ascii_lower(name)] = finder;
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

std::vector<std::size_t> Registry::key_positions(const CommandSpec& spec, Args argv) {
    std::vector<std::size_t> keys;
    const KeyRange range = key_range(spec, argv);
    for (long i = range.first; i <= range.last; i += range.step) {
        keys.push_back(static_cast<std::size_t>(i));
    }
    return keys;
}

core::Status build_default_registry(Registry& registry) {
    register_bf_commands(registry);
    register_cf_commands(registry);
    register_keyspace_commands(registry);
    register_dump_commands(registry);
    register_connection_commands(registry);
    register_client_commands(registry);
    register_config_commands(registry);
    register_info_commands(registry);
    register_introspection_commands(registry);
    register_persistence_commands(registry);
    register_debug_commands(registry);
    register_acl_commands(registry);
    register_replication_commands(registry);
    register_cluster_commands(registry);
    register_slowlog_commands(registry);
    register_transaction_commands(registry);
    register_pubsub_commands(registry);
    register_memory_commands(registry);
    register_latency_commands(registry);
    return registry.build_from_embedded();
}

}  // namespace bloomery::command
