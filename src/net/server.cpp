// The server's parts wired together, and the main thread (server.hpp).

#include "bloomery/net/server.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

#include "acceptor.hpp"
#include "bloomery/cluster/topology.hpp"
#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/net/metrics_server.hpp"
#include "bloomery/net/prometheus.hpp"
#include "bloomery/net/replication.hpp"
#include "bloomery/net/tls.hpp"
#include "client_book.hpp"
#include "cluster_node.hpp"
#include "connection_environment.hpp"
#include "migrator.hpp"
#include "persistence_adapter.hpp"
#include "replication_controller.hpp"
#include "server_statistics.hpp"
#include "shutdown_coordinator.hpp"
#include "worker_pool.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// command::Services is built from one object implementing every interface;
// here different parts implement them, and this names which answers for
// which.
struct ServiceParts {
    command::ClientDirectory& clients;
    command::ServerStats& stats;
    command::Persistence& persistence;
    command::Shutdown& shutdown;
    command::Replication& replication;
    command::ReplicaGate& gate;
    command::PubSub& channels;
    command::Migration& migration;
    cluster::ClusterState& cluster;

    operator command::ClientDirectory&() const { return clients; }
    operator command::ServerStats&() const { return stats; }
    operator command::Persistence&() const { return persistence; }
    operator command::Shutdown&() const { return shutdown; }
    operator command::Replication&() const { return replication; }
    operator command::ReplicaGate&() const { return gate; }
    operator command::Migration&() const { return migration; }
    command::PubSub& pubsub() const { return channels; }
    cluster::ClusterState& cluster_state() const { return cluster; }
};

std::unique_ptr<cluster::ClusterState> initial_cluster_state(const core::Config& config) {
    if (!config.cluster_enabled || !config.cluster)
        return std::make_unique<cluster::ClusterState>();
    return std::make_unique<cluster::ClusterState>(
        cluster::ClusterMap::from_topology(*config.cluster));
}

}  // namespace

Server::Server(const core::Config& config, core::RuntimeSettings& settings,
               store::Keyspace& keyspace, const command::Registry& registry,
               persist::Manager& persistence, ReplicationSource& replication)
    : config_(config),
      settings_(settings),
      keyspace_(keyspace),
      registry_(registry),
      persistence_(persistence),
      replication_source_(replication),
      cluster_(initial_cluster_state(config)),
      slowlog_(settings),
      persistence_commands_(std::make_unique<PersistenceAdapter>(persistence)),
      pool_(std::make_unique<WorkerPool>(config.threads, persistence)),
      statistics_(std::make_unique<ServerStatistics>(keyspace, registry, *pool_)),
      clients_(std::make_unique<ClientBook>(config, settings, *pool_)),
      // Its files were checked before the start (startup_checks.hpp).
      link_tls_(tls_links_wanted(config) ? make_tls_client_context(config) : nullptr),
      replication_(std::make_unique<ReplicationController>(
          config, keyspace, persistence, replication, main_context_,
          config.tls_replication ? link_tls_.get() : nullptr)),
      cluster_node_(config.cluster_in_etcd()
                        ? std::make_unique<ClusterNode>(config, *cluster_, *replication_)
                        : nullptr),
      migrator_(std::make_unique<Migrator>(config.tls_cluster ? link_tls_.get() : nullptr)),
      cron_timer_(main_context_) {
    // A stop closes the listeners and ends the cron.
    auto close_listeners = [this] {
        acceptor_->close();
        cron_timer_.cancel();
    };
    shutdown_ =
        std::make_unique<ShutdownCoordinator>(config, main_context_, persistence, replication,
                                              *clients_, *pool_, std::move(close_listeners));
    const ServiceParts parts{.clients = *clients_,
                             .stats = *statistics_,
                             .persistence = *persistence_commands_,
                             .shutdown = *shutdown_,
                             .replication = *replication_,
                             .gate = replication_->gate(),
                             .channels = pubsub_,
                             .migration = *migrator_,
                             .cluster = *cluster_};
    environment_ = std::make_unique<ConnectionEnvironment>(
        ConnectionEnvironment{.config = config,
                              .settings = settings,
                              .keyspace = keyspace,
                              .registry = registry,
                              .slowlog = slowlog_,
                              .services = command::Services(parts),
                              .clients = *clients_,
                              .pool = *pool_,
                              .persistence = persistence,
                              .replication = replication});
    acceptor_ = std::make_unique<Acceptor>(*environment_, main_context_);
}

Server::~Server() {
    if (cluster_node_) cluster_node_->stop();
    migrator_.reset();
    replication_->stop_links();
    if (metrics_) metrics_->stop();
    pool_->stop();
}

bool Server::ready() const {
    return acceptor_->started() && !shutdown_->stopping() && replication_->synced();
}

std::uint64_t Server::total_changes() const {
    return statistics_->total_changes();
}

void Server::start_metrics() {
    if (config_.metrics_port == 0 || metrics_) return;
    metrics_ = std::make_unique<MetricsServer>(
        config_, [this] { return metrics_text(); }, [this] { return ready(); });
    metrics_->start();
    spdlog::info("metrics on http://{}:{}/metrics (/healthz, /readyz)",
                 config_.metrics_bind_address(), metrics_->port());
}

std::string Server::metrics_text() {
    MetricsSnapshot snapshot =
        collect_metrics(environment_->services, registry_, keyspace_, config_, &slowlog_,
                        ready() ? Readiness::ready : Readiness::not_ready);
    snapshot.false_positives = fpr_sweep_.step(keyspace_);
    if (const ClusterNode* node = cluster_node_.get()) {
        snapshot.cluster.etcd_connected = node->connected();
        snapshot.cluster.lease_renewals = node->lease_renewals();
        snapshot.cluster.lease_failures = node->lease_failures();
        snapshot.cluster.role_changes = node->role_changes();
        snapshot.cluster.failovers = node->failovers_won();
    }
    return render_metrics(snapshot);
}

void Server::listen() {
    acceptor_->listen();
    if (cluster_node_) cluster_node_->start();
}

int Server::run() {
    pool_->start();
    replication_->start();
    shutdown_->watch_signals();
    cron();
    acceptor_->start();
    main_context_.run();
    // Seen down at once by the other nodes (its lease revoked).
    if (cluster_node_) cluster_node_->stop();
    // The link applies the primary's stream: stop it before the last save.
    replication_->stop_links();
    // Stopped: every connection is closed, the workers are idle.
    pool_->stop();
    const int exit_code = shutdown_->finish();
    persistence_.close_journal();
    // Last: /readyz answered 503 through the final save.
    if (metrics_) metrics_->stop();
    spdlog::info("bloomery is now ready to exit, bye bye");
    return exit_code;
}

void Server::cron() {
    cron_timer_.expires_after(std::chrono::milliseconds(100));
    cron_timer_.async_wait([this](const error_code& error) {
        if (error || shutdown_->stopping()) return;
        store::tick_access_clock();
        core::memory_note_peak();
        const auto expire_began = std::chrono::steady_clock::now();
        keyspace_.active_expire_cycle();
        core::latency_add_sample_if_needed(
            core::kLatencyExpireCycle,
            static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - expire_began)
                                           .count()));
        persistence_.tick();
        replication_source_.cron();
        replication_->gate().good_replicas.store(
            replication_source_.good_replicas(settings_.min_replicas_max_lag_seconds()),
            std::memory_order_relaxed);
        const std::int64_t now = store::now_ms();
        statistics_->sample_ops(now);
        clients_->check_output_limits(now, replication_source_.replica_count());
        // maxmemory-clients also when no client grows: after CONFIG SET
        // lowered it, or past a walk that found the clients under it.
        clients_->evict_clients_over_limit();
        clients_->close_idle_clients(now);
        cron();
    });
}

}  // namespace bloomery::net
