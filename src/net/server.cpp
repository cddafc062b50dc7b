#include "bloomery/net/server.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/net/metrics_server.hpp"
#include "bloomery/net/prometheus.hpp"
#include "bloomery/net/replication.hpp"
#include "bloomery/net/tls.hpp"
#include "client_book.hpp"
#include "connection.hpp"
#include "connection_environment.hpp"
#include "migrator.hpp"
#include "persistence_adapter.hpp"
#include "replication_controller.hpp"
#include "server_statistics.hpp"
#include "worker_pool.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Redis counts only 127.0.0.1 and ::1 as local (127.0.0.2 is not); an IPv4
// client of a dual-stack socket shows as ::ffff:127.0.0.1 and is local too.
bool is_loopback_peer(const asio::ip::tcp::socket& socket) {
    error_code error;
    const asio::ip::address peer = socket.remote_endpoint(error).address();
    if (error) return false;
    if (peer.is_v4()) return peer.to_v4() == asio::ip::address_v4::loopback();
    const asio::ip::address_v6 v6 = peer.to_v6();
    if (v6.is_v4_mapped()) {
        return asio::ip::make_address_v4(asio::ip::v4_mapped, v6) ==
               asio::ip::address_v4::loopback();
    }
    return v6 == asio::ip::address_v6::loopback();
}

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

    operator command::ClientDirectory&() const { return clients; }
    operator command::ServerStats&() const { return stats; }
    operator command::Persistence&() const { return persistence; }
    operator command::Shutdown&() const { return shutdown; }
    operator command::Replication&() const { return replication; }
    operator command::ReplicaGate&() const { return gate; }
    operator command::Migration&() const { return migration; }
    command::PubSub& pubsub() const { return channels; }
};

}  // namespace

Server::Server(const core::Config& config, store::Keyspace& keyspace,
               const command::Registry& registry, persist::Manager& persistence,
               ReplicationSource& replication)
    : config_(config),
      keyspace_(keyspace),
      registry_(registry),
      persistence_(persistence),
      replication_source_(replication),
      persistence_commands_(std::make_unique<PersistenceAdapter>(persistence)),
      pool_(std::make_unique<WorkerPool>(config.threads, *persistence_commands_)),
      statistics_(std::make_unique<ServerStatistics>(keyspace, registry, *pool_)),
      clients_(std::make_unique<ClientBook>(config, *pool_)),
      replication_(std::make_unique<ReplicationController>(config, keyspace, persistence,
                                                           replication, main_context_)),
      slowlog_(config.slowlog_log_slower_than_us, config.slowlog_max_len),
      acceptor_(main_context_),
      tls_acceptor_(main_context_),
      signals_(main_context_, SIGINT, SIGTERM),
      cron_timer_(main_context_),
      migrator_(std::make_unique<Migrator>()),
      drain_timer_(main_context_) {
    const ServiceParts parts{*clients_, *statistics_,  *persistence_commands_,
                             *this,     *replication_, replication_->gate(),
                             pubsub_,   *migrator_};
    environment_.reset(new ConnectionEnvironment{config, keyspace, registry, slowlog_,
                                                 command::Services(parts), *clients_, *pool_,
                                                 replication});
    pool_->when_all_closed([this] {
        if (stopping_) asio::post(main_context_, [this] { stop_now(); });
    });
}

Server::~Server() {
    migrator_.reset();
    replication_->stop_links();
    if (metrics_) metrics_->stop();
    pool_->stop();
    if (shutdown_saver_.joinable()) shutdown_saver_.join();
}

bool Server::ready() const {
    return accepting_.load(std::memory_order_acquire) && !stopping_.load() &&
           replication_->synced();
}

std::uint64_t Server::total_changes() const {
    return statistics_->total_changes();
}

namespace {

void open_acceptor(asio::ip::tcp::acceptor& acceptor, const std::string& bind, std::uint16_t port) {
    try {
        const asio::ip::tcp::endpoint endpoint(asio::ip::make_address(bind), port);
        acceptor.open(endpoint.protocol());
        acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true));
        acceptor.bind(endpoint);
        acceptor.listen(511);  // Redis's tcp-backlog default
    } catch (const boost::system::system_error& e) {
        throw std::runtime_error("cannot listen on " + bind + ":" + std::to_string(port) + ": " +
                                 e.code().message());
    }
}

}  // namespace

void Server::start_metrics() {
    if (config_.metrics_port == 0 || metrics_) return;
    metrics_ = std::make_unique<MetricsServer>(
        config_, [this] { return metrics_text(); }, [this] { return ready(); });
    metrics_->start();
    spdlog::info("metrics on http://{}:{}/metrics (/healthz, /readyz)",
                 config_.metrics_bind_address(), metrics_->port());
}

std::string Server::metrics_text() {
    return render_metrics(collect_metrics(environment_->services, registry_, keyspace_, config_,
                                          &slowlog_,
                                          ready() ? Readiness::ready : Readiness::not_ready));
}

void Server::listen() {
    if (config_.tls_port != 0) tls_context_ = make_tls_context(config_);
    if (config_.port != 0) open_acceptor(acceptor_, config_.bind, config_.port);
    if (config_.tls_port != 0) open_acceptor(tls_acceptor_, config_.bind, config_.tls_port);
}

int Server::run() {
    pool_->start();
    replication_->start();
    signals_.async_wait([this](const error_code& error, int signal) { on_signal(error, signal); });
    if (acceptor_.is_open()) accept_next(acceptor_, false);
    if (tls_acceptor_.is_open()) accept_next(tls_acceptor_, true);
    cron();
    accepting_.store(true, std::memory_order_release);
    main_context_.run();
    // The link applies the primary's stream: stop it before the last save.
    replication_->stop_links();
    // Stopped: every connection is closed, the workers are idle.
    pool_->stop();
    // A SHUTDOWN's save still running (a signal came meanwhile) ends first:
    // one save at a time. Its clients are gone.
    if (shutdown_saver_.joinable()) shutdown_saver_.join();
    shutdown_failed_.clear();
    persistence_.wait();
    if (save_on_exit_ && persistence_.saving_enabled()) {
        const persist::SaveResult saved = persistence_.save();
        if (saved.ok()) {
            spdlog::info("final snapshot saved");
        } else {
            spdlog::error("final snapshot failed: {}", saved.detail);
            exit_code_ = 1;
        }
    }
    persistence_.close_journal();
    // Last: /readyz answered 503 through the final save.
    if (metrics_) metrics_->stop();
    spdlog::info("bloomery is now ready to exit, bye bye");
    return exit_code_;
}

void Server::accept_next(asio::ip::tcp::acceptor& acceptor, bool tls) {
    Worker& worker = pool_->next_worker();
    acceptor.async_accept(worker.context, [this, &acceptor, tls, &worker](
                                              const error_code& error,
                                              asio::ip::tcp::socket socket) {
        if (error) {
            if (error == asio::error::operation_aborted || stopping_) return;
            // EMFILE and friends: log, back off briefly, keep accepting.
            spdlog::warn("accept failed: {}", error.message());
            auto timer =
                std::make_shared<asio::steady_timer>(main_context_, std::chrono::milliseconds(50));
            timer->async_wait(
                [this, &acceptor, tls, timer](const error_code&) { accept_next(acceptor, tls); });
            return;
        }
        // The slot is taken here, before the connection exists on its worker,
        // so a burst of connects cannot pass --maxclients between the check
        // and the count (200 connects at once with --maxclients 5 were served
        // 12 to 93 times when the worker counted them).
        ClientSlot slot = pool_->take_client_slot(config_.max_clients);
        if (!slot) {
            command::WorkerStats::bump(worker.stats.rejected_connections);
            error_code ignored;
            // A TLS client could not read a plaintext error: it is just closed.
            if (!tls) {
                static constexpr std::string_view kTooMany =
                    "-ERR max number of clients reached\r\n";
                asio::write(socket, asio::buffer(kTooMany), ignored);
            }
            socket.close(ignored);
        } else if (config_.protected_mode && registry_.acl().default_user().nopass() &&
                   !is_loopback_peer(socket)) {
            // Protected mode, as Redis: no password, so only local clients.
            // A TLS client could not read the plaintext text: it is just closed.
            command::WorkerStats::bump(worker.stats.rejected_connections);
            error_code ignored;
            if (!tls) {
                asio::write(socket, asio::buffer(command::errors::kProtectedModeDenied), ignored);
            }
            socket.close(ignored);
        } else {
            const std::int64_t id = next_client_id_.fetch_add(1);
            // The slot travels with the socket: if the worker stops before
            // this runs, destroying the handler gives it back.
            asio::post(worker.context, [this, &worker, id, tls, s = std::move(socket),
                                        slot = std::move(slot)]() mutable {
                command::WorkerStats::bump(worker.stats.connections_received);
                if (tls) {
                    make_tls_connection(*environment_, worker, std::move(s), id, *tls_context_,
                                        std::move(slot))
                        ->start();
                } else {
                    make_plain_connection(*environment_, worker, std::move(s), id, std::move(slot))
                        ->start();
                }
            });
        }
        accept_next(acceptor, tls);
    });
}

void Server::on_signal(const error_code& error, int signal) {
    if (error) return;
    spdlog::info("received {}, scheduling shutdown", signal == SIGTERM ? "SIGTERM" : "SIGINT");
    request_stop(true);
}

void Server::request_stop(bool save_on_exit, bool now) {
    asio::post(main_context_, [this, save_on_exit, now] {
        if (stopping_.exchange(true)) return;
        save_on_exit_ = save_on_exit;
        error_code ignored;
        acceptor_.close(ignored);
        tls_acceptor_.close(ignored);
        signals_.cancel(ignored);
        cron_timer_.cancel();
        // Each connection closes on its own thread after the command it is
        // running; replies already computed are lost only if the peer is slow.
        // Replicas' feeds stay: once no client can write any more, the
        // replicas get up to --shutdown-timeout to acknowledge every write
        // (Redis 7 likewise), so that one promoted next holds every write a
        // client was answered for.
        clients_->close_connections(ClientBook::Reach::clients_only);
        const std::size_t replicas = replication_source_.replica_count();
        const std::int64_t wait_ms =
            now || replicas == 0 ? 0 : config_.shutdown_timeout_seconds * 1000;
        if (wait_ms > 0) {
            spdlog::info("waiting up to {} s for {} replica(s) to acknowledge every write",
                         config_.shutdown_timeout_seconds, replicas);
        }
        drain_for_replicas(store::now_ms() + wait_ms, false, 0);
    });
}

void Server::drain_for_replicas(std::int64_t deadline_ms, bool target_known, std::uint64_t target) {
    if (!target_known && !clients_->any_connection(ClientBook::Reach::clients_only)) {
        // No client is left to write: everything written is before this.
        persist::Journal* journal = persistence_.journal();
        target = journal != nullptr ? journal->position() : 0;
        target_known = true;
    }
    const std::size_t behind = target_known ? replication_source_.replicas_behind(target) : 1;
    if (behind != 0 && store::now_ms() < deadline_ms) {
        drain_timer_.expires_after(std::chrono::milliseconds(10));
        drain_timer_.async_wait([this, deadline_ms, target_known, target](const error_code& error) {
            if (!error) drain_for_replicas(deadline_ms, target_known, target);
        });
        return;
    }
    if (behind != 0 && replication_source_.replica_count() != 0) {
        spdlog::warn(
            "shutdown: {} replica(s) had not acknowledged offset {} within "
            "--shutdown-timeout; stopping anyway",
            behind, target);
    }
    clients_->close_connections(ClientBook::Reach::clients_and_replicas);
    if (pool_->open_connections() == 0) stop_now();
    // Do not wait forever for a stuck peer.
    auto deadline = std::make_shared<asio::steady_timer>(main_context_, std::chrono::seconds(5));
    deadline->async_wait([this, deadline](const error_code&) { stop_now(); });
}

void Server::stop_now() {
    main_context_.stop();
}

void Server::cron() {
    cron_timer_.expires_after(std::chrono::milliseconds(100));
    cron_timer_.async_wait([this](const error_code& error) {
        if (error || stopping_) return;
        store::tick_access_clock();
        const auto expire_began = std::chrono::steady_clock::now();
        keyspace_.active_expire_cycle();
        core::latency_add_sample_if_needed(
            core::kLatencyExpireCycle,
            static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - expire_began)
                                           .count()));
        persistence_.tick();
        replication_source_.cron();
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
