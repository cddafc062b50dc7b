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
#include "connection.hpp"
#include "migrator.hpp"

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

}  // namespace

Server::Server(const core::Config& config, store::Keyspace& keyspace,
               const command::Registry& registry, persist::Manager& persistence,
               ReplicationSource& replication)
    : config_(config),
      keyspace_(keyspace),
      registry_(registry),
      persistence_(persistence),
      replication_(replication),
      acceptor_(main_context_),
      tls_acceptor_(main_context_),
      signals_(main_context_, SIGINT, SIGTERM),
      cron_timer_(main_context_),
      start_time_ms_(store::now_ms()),
      slowlog_(config.slowlog_log_slower_than_us, config.slowlog_max_len),
      drain_timer_(main_context_) {
    const unsigned threads = std::max(1u, config.threads);
    for (unsigned i = 0; i < threads; ++i) {
        workers_.push_back(std::make_unique<Worker>());
        workers_.back()->server = this;
    }
    migrator_ = std::make_unique<Migrator>();
}

Server::~Server() {
    migrator_.reset();
    stop_links();
    if (metrics_) metrics_->stop();
    for (auto& worker : workers_) {
        worker->context.stop();
        if (worker->thread.joinable()) worker->thread.join();
    }
    if (shutdown_saver_.joinable()) shutdown_saver_.join();
}

void Server::stop_links() {
    std::unique_ptr<ReplicaLink> link;
    std::vector<std::thread> reapers;
    {
        std::lock_guard lock(link_mutex_);
        link = std::move(link_);
        reapers.swap(link_reapers_);
    }
    link.reset();
    for (std::thread& reaper : reapers) reaper.join();
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
    return render_metrics(
        collect_metrics(*this, registry_, keyspace_, config_, &slowlog_, ready()));
}

void Server::listen() {
    if (config_.tls_port != 0) tls_context_ = make_tls_context(config_);
    if (config_.port != 0) open_acceptor(acceptor_, config_.bind, config_.port);
    if (config_.tls_port != 0) open_acceptor(tls_acceptor_, config_.bind, config_.tls_port);
}

int Server::run() {
    for (auto& worker : workers_) {
        Worker* w = worker.get();
        w->thread = std::thread([w] {
            auto guard = asio::make_work_guard(w->context);
            // Records this worker appends are written at the end of its
            // turn, before the replies that wait for them.
            persist::Journal::set_thread_turn(w);
            w->context.run();
            persist::Journal::set_thread_turn(nullptr);
        });
    }
    if (!config_.replicaof_host.empty()) {
        if (core::replicaof_names_self(config_)) {
            // One argument list for every pod of a StatefulSet: pod 0, named
            // by --replicaof, serves as the primary (deploy/k8s).
            spdlog::info("--replicaof {} {} names this server: starting as the primary",
                         config_.replicaof_host, config_.replicaof_port);
        } else {
            follow(config_.replicaof_host, config_.replicaof_port);
        }
    }
    signals_.async_wait([this](const error_code& error, int signal) { on_signal(error, signal); });
    if (acceptor_.is_open()) accept_next(acceptor_, false);
    if (tls_acceptor_.is_open()) accept_next(tls_acceptor_, true);
    cron();
    accepting_.store(true, std::memory_order_release);
    main_context_.run();
    // The link applies the primary's stream: stop it before the last save.
    stop_links();
    // Stopped: every connection is closed, the workers are idle.
    for (auto& worker : workers_) {
        worker->context.stop();
        if (worker->thread.joinable()) worker->thread.join();
    }
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
    Worker& worker = *workers_[next_worker_];
    next_worker_ = (next_worker_ + 1) % workers_.size();
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
        ClientSlot slot = ClientSlot::acquire(client_slots_, config_.max_clients);
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
                    make_tls_connection(*this, worker, std::move(s), id, *tls_context_,
                                        std::move(slot))
                        ->start();
                } else {
                    make_plain_connection(*this, worker, std::move(s), id, std::move(slot))
                        ->start();
                }
            });
        }
        accept_next(acceptor, tls);
    });
}

std::list<std::weak_ptr<Connection>>::iterator Server::track(
    Worker& worker, std::shared_ptr<Connection> connection) {
    open_connections_.fetch_add(1);
    std::lock_guard lock(worker.connections_mutex);
    worker.connections.push_front(connection);
    return worker.connections.begin();
}

void Server::untrack(Worker& worker, std::list<std::weak_ptr<Connection>>::iterator position) {
    {
        std::lock_guard lock(worker.connections_mutex);
        worker.connections.erase(position);
    }
    if (open_connections_.fetch_sub(1) == 1 && stopping_) {
        asio::post(main_context_, [this] { stop_now(); });
    }
}

template <class Fn>
void Server::for_each_connection(Fn&& fn) {
    for (auto& worker : workers_) {
        std::vector<std::shared_ptr<Connection>> live;
        {
            std::lock_guard lock(worker->connections_mutex);
            for (auto& weak : worker->connections) {
                if (auto connection = weak.lock()) live.push_back(std::move(connection));
            }
        }
        for (auto& connection : live) fn(*connection);
    }
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
        for_each_connection([](Connection& connection) {
            if (!connection.client().is_replica.load(std::memory_order_relaxed)) {
                connection.request_close();
            }
        });
        const std::size_t replicas = replication_.replica_count();
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
    bool clients_left = false;
    for_each_connection([&clients_left](Connection& connection) {
        if (!connection.client().is_replica.load(std::memory_order_relaxed)) clients_left = true;
    });
    if (!clients_left && !target_known) {
        // No client is left to write: everything written is before this.
        persist::Journal* journal = persistence_.journal();
        target = journal != nullptr ? journal->position() : 0;
        target_known = true;
    }
    const std::size_t behind = target_known ? replication_.replicas_behind(target) : 1;
    if (behind != 0 && store::now_ms() < deadline_ms) {
        drain_timer_.expires_after(std::chrono::milliseconds(10));
        drain_timer_.async_wait([this, deadline_ms, target_known, target](const error_code& error) {
            if (!error) drain_for_replicas(deadline_ms, target_known, target);
        });
        return;
    }
    if (behind != 0 && replication_.replica_count() != 0) {
        spdlog::warn(
            "shutdown: {} replica(s) had not acknowledged offset {} within "
            "--shutdown-timeout; stopping anyway",
            behind, target);
    }
    for_each_connection([](Connection& connection) { connection.request_close(); });
    if (open_connections_.load() == 0) stop_now();
    // Do not wait forever for a stuck peer.
    auto deadline = std::make_shared<asio::steady_timer>(main_context_, std::chrono::seconds(5));
    deadline->async_wait([this, deadline](const error_code&) { stop_now(); });
}

void Server::post_journal_turn(Worker& worker) {
    if (worker.journal_turn_posted) return;
    worker.journal_turn_posted = true;
    asio::post(worker.context, [&worker] { Connection::end_journal_turn(worker); });
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
        replication_.cron();
        // ops/sec sampling
        const std::int64_t now = store::now_ms();
        std::uint64_t commands = 0;
        for (auto& worker : workers_)
            commands += worker->stats.commands.load(std::memory_order_relaxed);
        {
            std::lock_guard lock(ops_mutex_);
            if (last_sample_ms_ != 0 && now > last_sample_ms_) {
                ops_samples_[ops_index_] = (commands - last_commands_) * 1000 /
                                           static_cast<std::uint64_t>(now - last_sample_ms_);
                ops_index_ = (ops_index_ + 1) % kOpsSamples;
            }
            last_commands_ = commands;
            last_sample_ms_ = now;
        }
        check_output_limits(now);
        // maxmemory-clients also when no client grows: after CONFIG SET
        // lowered it, or past a walk that found the clients under it.
        evict_clients_over_limit();
        if (config_.timeout_seconds > 0) {
            const std::int64_t limit = config_.timeout_seconds * 1000;
            for_each_connection([&](Connection& connection) {
                // Like Redis, a client waiting for a deferred reply is not
                // idle, and replicas are never timed out here (--repl-timeout).
                if (connection.client().blocked.load(std::memory_order_relaxed) ||
                    connection.client().is_replica.load(std::memory_order_relaxed)) {
                    return;
                }
                const auto last =
                    connection.client().last_interaction_ms.load(std::memory_order_relaxed);
                if (now - last > limit) connection.request_close();
            });
        }
        cron();
    });
}

void Server::check_output_limits(std::int64_t now_ms) {
    // As Redis's clientsCron: a client whose replies stay above the soft
    // limit is closed once its seconds have passed even if nothing more is
    // added (a client that stopped reading). A replica's feed always gets a
    // look: what it has still to send grows with every write, not with what
    // the feed itself does. Nothing is walked when neither can apply.
    const core::OutputBufferLimit normal =
        config_.client_output_buffer_limits.get(core::ClientClass::normal);
    const core::OutputBufferLimit pubsub =
        config_.client_output_buffer_limits.get(core::ClientClass::pubsub);
    if (normal.soft_bytes == 0 && pubsub.soft_bytes == 0 && replication_.replica_count() == 0) {
        return;
    }
    for_each_connection([&](Connection& connection) {
        const command::ClientState& client = connection.client();
        if (client.is_replica.load(std::memory_order_relaxed)) {
            connection.check_output_limit();
            return;
        }
        const bool subscribed =
            client.subscriptions.channel_count.load(std::memory_order_relaxed) +
                client.subscriptions.pattern_count.load(std::memory_order_relaxed) !=
            0;
        const core::OutputBufferLimit& limit = subscribed ? pubsub : normal;
        if (limit.soft_bytes == 0) return;
        const std::int64_t since =
            client.output_soft_limit_since_ms.load(std::memory_order_relaxed);
        if (since != 0 && now_ms - since > limit.soft_seconds * 1000) {
            connection.check_output_limit();
        }
    });
}

std::pair<std::size_t, std::size_t> Server::largest_buffers() {
    std::pair<std::size_t, std::size_t> largest{0, 0};
    for_each_connection([&](Connection& connection) {
        const command::ClientState& client = connection.client();
        if (client.is_replica.load(std::memory_order_relaxed)) return;
        largest.first =
            std::max(largest.first, client.query_buffer_used.load(std::memory_order_relaxed));
        largest.second =
            std::max(largest.second, client.output_buffer_used.load(std::memory_order_relaxed));
    });
    return largest;
}

std::size_t Server::connected_clients() {
    return client_slots_.load(std::memory_order_relaxed);
}

std::string Server::client_list(std::span<const std::int64_t> ids) {
    std::string out;
    for_each_connection([&](Connection& connection) {
        if (!ids.empty() &&
            std::find(ids.begin(), ids.end(), connection.client().id) == ids.end()) {
            return;
        }
        out += connection.describe();
        out += '\n';
    });
    return out;
}

template <class Match>
bool Server::close_clients_where(Match&& match) {
    bool found = false;
    for_each_connection([&](Connection& connection) {
        if (match(connection.client())) {
            connection.request_close();
            found = true;
        }
    });
    return found;
}

bool Server::kill_client(std::int64_t id) {
    return close_clients_where([&](const command::ClientState& c) { return c.id == id; });
}

bool Server::kill_client(std::string_view address) {
    return close_clients_where([&](const command::ClientState& c) { return c.address == address; });
}

}  // namespace bloomery::net
