#pragma once
// What a connection uses of the server it belongs to, one reference per
// part: the command layer's view of the server (command::Services), the
// client bookkeeping it reports its memory and blocking to, the pool that
// tracks it, the persistence whose journal its replies wait for, and the
// replication source its feed registers with (if it becomes a replica's).
// The server builds one; it outlives every connection.

#include "bloomery/command/registry.hpp"
#include "bloomery/command/server.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/runtime_settings.hpp"
#include "bloomery/persist/manager.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::net {

class ClientBook;
class ReplicationSource;
class WorkerPool;

struct ConnectionEnvironment {
    const core::Config& config;
    // What CONFIG SET changes (the output limits, maxmemory-clients).
    core::RuntimeSettings& settings;
    store::Keyspace& keyspace;
    const command::Registry& registry;
    command::Slowlog& slowlog;
    command::Services services;
    ClientBook& clients;
    WorkerPool& pool;
    persist::Manager& persistence;
    ReplicationSource& replication;

    // The journal, or null when it is off.
    persist::Journal* journal() const { return persistence.journal(); }
};

}  // namespace bloomery::net
