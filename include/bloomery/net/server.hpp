#pragma once
// The server: the network layer's parts, wired together, and the main
// thread that runs the listeners and a 100 ms cron (active expiry, save
// points, replication keepalives, ops/sec samples, client limits). Each part
// (src/net/) implements the command layer's interfaces that are its
// business (command/server.hpp):
//
//   WorkerPool             the worker threads, client slots, tracked connections
//   Acceptor               the listeners, admission, round-robin hand-off
//   ClientBook             ClientDirectory: CLIENT LIST/KILL, eviction, limits
//   ServerStatistics       ServerStats: counters, ops/sec, CONFIG RESETSTAT
//   PersistenceAdapter     Persistence, over persist::Manager
//   ShutdownCoordinator    Shutdown: signals, SHUTDOWN, the drain, the final save
//   ReplicationController  Replication and ReplicaGate: REPLICAOF, WAIT, INFO
//   Migrator               Migration: MIGRATE's exchanges
//   ClusterNode            a cluster kept in etcd: the map, the lease, the role
//
// Connections reach them through one ConnectionEnvironment.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bloomery/command/pubsub.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/runtime_settings.hpp"
#include "bloomery/net/fpr_sweep.hpp"
#include "bloomery/persist/manager.hpp"
#include "bloomery/store/keyspace.hpp"

namespace boost::asio::ssl {
class context;
}

namespace bloomery::net {

class Acceptor;
class ClientBook;
class ClusterNode;
struct ConnectionEnvironment;
class MetricsServer;
class Migrator;
class PersistenceAdapter;
class ReplicationController;
class ReplicationSource;
class ServerStatistics;
class ShutdownCoordinator;
class WorkerPool;

class Server {
public:
    // `replication` feeds replicas (made before the journal is loaded, so the
    // journal's writer can wake feeds: see main.cpp).
    // `settings` holds what CONFIG SET changes, made from `config`.
    Server(const core::Config& config, core::RuntimeSettings& settings, store::Keyspace& keyspace,
           const command::Registry& registry, persist::Manager& persistence,
           ReplicationSource& replication);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Starts the monitoring HTTP listener if --metrics-port is set (before
    // the data is loaded, so /healthz answers and /readyz says 503 while it
    // loads). Throws std::runtime_error naming the address on failure.
    void start_metrics();
    // Builds the TLS context if --tls-port is set, binds and listens, and
    // with --cluster-etcd starts reaching etcd. Throws std::runtime_error
    // naming the address or the file on failure ("cannot listen on
    // ADDR:PORT: ..." for a port that cannot be bound).
    void listen();
    // Runs until a signal (SIGTERM/SIGINT) or SHUTDOWN; returns the exit code.
    int run();
    // Writes so far (never reset), for save points. Lock-free.
    std::uint64_t total_changes() const;

private:
    // /readyz: the listeners accept (run() has started), no stop has begun,
    // and a replica has its first copy of its primary. Thread-safe.
    bool ready() const;
    // The /metrics text (net/prometheus.hpp). Thread-safe.
    std::string metrics_text();
    void cron();

    const core::Config& config_;
    core::RuntimeSettings& settings_;
    store::Keyspace& keyspace_;
    const command::Registry& registry_;
    persist::Manager& persistence_;
    ReplicationSource& replication_source_;
    // Outlive the workers: a connection leaves its channels when it closes,
    // and holds the environment until it is destroyed.
    command::PubSub pubsub_;
    // The cluster map commands route by (outside cluster mode, unused).
    std::unique_ptr<cluster::ClusterState> cluster_;
    command::Slowlog slowlog_;
    FalsePositiveSweep fpr_sweep_;  // a slice of the keyspace per /metrics scrape
    std::unique_ptr<PersistenceAdapter> persistence_commands_;
    std::unique_ptr<ConnectionEnvironment> environment_;  // made once every part exists
    // Declared before main_context_ so that it is destroyed after it: an
    // accept still pending there holds a socket of a worker's io_context.
    std::unique_ptr<WorkerPool> pool_;
    boost::asio::io_context main_context_{1};
    std::unique_ptr<ServerStatistics> statistics_;
    std::unique_ptr<ClientBook> clients_;
    // The links this server opens (--tls-replication, --tls-cluster);
    // null when neither is TLS. Outlives the replication links and the
    // migrator, which use it.
    std::unique_ptr<boost::asio::ssl::context> link_tls_;
    std::unique_ptr<ReplicationController> replication_;
    // With --cluster-etcd: the map's backend and this node's lease; it
    // makes this node a replica or a primary through replication_.
    std::unique_ptr<ClusterNode> cluster_node_;
    // Stopped first on the way out (~Server), while the workers its
    // pending replies go to still exist.
    std::unique_ptr<Migrator> migrator_;
    std::unique_ptr<Acceptor> acceptor_;
    std::unique_ptr<ShutdownCoordinator> shutdown_;
    boost::asio::steady_timer cron_timer_;
    std::unique_ptr<MetricsServer> metrics_;
};

}  // namespace bloomery::net
