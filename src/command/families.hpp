#pragma once
// One registration function per command family, defined at the bottom of
// that family's file and called by build_default_registry().

namespace bloomery::command {
class Registry;
void register_bf_commands(Registry& registry);
void register_cf_commands(Registry& registry);
void register_keyspace_commands(Registry& registry);
void register_dump_commands(Registry& registry);
void register_connection_commands(Registry& registry);
void register_client_commands(Registry& registry);
void register_config_commands(Registry& registry);
void register_info_commands(Registry& registry);
void register_introspection_commands(Registry& registry);
void register_persistence_commands(Registry& registry);
void register_acl_commands(Registry& registry);
void register_replication_commands(Registry& registry);
void register_cluster_commands(Registry& registry);
void register_cluster_admin_commands(Registry& registry);
void register_slowlog_commands(Registry& registry);
void register_transaction_commands(Registry& registry);
void register_pubsub_commands(Registry& registry);
void register_memory_commands(Registry& registry);
void register_latency_commands(Registry& registry);
void register_debug_commands(Registry& registry);
}  // namespace bloomery::command
