// What the command layer asks of the server (command/server.hpp) beyond its
// clients and statistics: snapshots, SHUTDOWN, and replication (INFO, ROLE,
// REPLICAOF, WAIT).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "bloomery/net/replication.hpp"
#include "bloomery/net/server.hpp"
#include "connection.hpp"
#include "migrator.hpp"

namespace bloomery::net {

namespace asio = boost::asio;

void Server::save_async(std::function<void(persist::SaveResult)> done) {
    persistence_.save_async(std::move(done));
}
persist::SaveResult Server::bgsave() {
    return persistence_.bgsave();
}

persist::PersistenceInfo Server::persistence() {
    return persistence_.info();
}

void Server::begin_shutdown(const command::ShutdownOptions& options, std::function<void()> failed) {
    asio::post(main_context_, [this, options, failed = std::move(failed)]() mutable {
        shutdown_failed_.push_back(std::move(failed));
        if (stopping_) return;  // a stop is under way: the connection closes with it
        if (shutdown_saving_) {
            // Joins the SHUTDOWN already saving (revives it after an ABORT).
            if (shutdown_aborted_) {
                shutdown_aborted_ = false;
                shutdown_options_ = options;
            } else {
                shutdown_options_.now = shutdown_options_.now || options.now;
                shutdown_options_.force = shutdown_options_.force || options.force;
            }
            return;
        }
        const bool save =
            options.mode == command::ShutdownMode::save ||
            (options.mode == command::ShutdownMode::default_save && persistence_.saving_enabled());
        spdlog::info("SHUTDOWN requested by a client{}", save ? ": saving a final snapshot" : "");
        if (!save) {
            request_stop(false, options.now);
            return;
        }
        shutdown_saving_ = true;
        shutdown_aborted_ = false;
        shutdown_options_ = options;
        if (shutdown_saver_.joinable()) shutdown_saver_.join();  // an earlier one, over
        // A thread of its own: saving a large dataset takes seconds, and the
        // worker this came from serves its other clients meanwhile (SAVE does
        // likewise, on the persistence thread).
        shutdown_saver_ = std::thread([this] {
            persist::SaveResult saved;
            do {
                persistence_.wait();  // a background save first
                saved = persistence_.save();
            } while (saved.status == persist::SaveStatus::in_progress);
            asio::post(main_context_, [this, saved] { finish_shutdown_save(saved); });
        });
    });
}

void Server::finish_shutdown_save(const persist::SaveResult& saved) {
    shutdown_saving_ = false;
    if (stopping_) return;  // a signal's stop came meanwhile (and saves at the end)
    if (shutdown_aborted_) {
        spdlog::info("SHUTDOWN cancelled by SHUTDOWN ABORT; the final snapshot was saved anyway");
        return;  // its clients were answered by the ABORT
    }
    if (!saved.ok()) {
        if (!shutdown_options_.force) {
            spdlog::error("SHUTDOWN: snapshot failed, not exiting: {}", saved.detail);
            fail_shutdown();
            return;
        }
        spdlog::error("SHUTDOWN FORCE: snapshot failed, exiting anyway: {}", saved.detail);
    } else {
        spdlog::info("SHUTDOWN: final snapshot saved");
    }
    request_stop(false, shutdown_options_.now);
}

void Server::fail_shutdown() {
    std::vector<std::function<void()>> waiting;
    waiting.swap(shutdown_failed_);
    for (auto& failed : waiting) failed();
}

void Server::abort_shutdown(std::function<void(bool)> done) {
    asio::post(main_context_, [this, done = std::move(done)] {
        // Only while the SHUTDOWN saves: once the stop has begun, the client
        // that could ask is being disconnected.
        const bool cancel = shutdown_saving_ && !shutdown_aborted_ && !stopping_;
        if (cancel) {
            shutdown_aborted_ = true;
            spdlog::info("SHUTDOWN ABORT: the shutdown is cancelled");
            fail_shutdown();
        }
        done(cancel);
    });
}

command::ReplicationInfo Server::replication() {
    command::ReplicationInfo info;
    {
        std::lock_guard lock(link_mutex_);
        if (link_) link_->fill_info(info);
    }
    replication_.fill_info(info);
    return info;
}

void Server::replicaof(std::string_view host, std::uint16_t port,
                       std::function<void(std::string)> done) {
    if (!host.empty()) {
        follow(host, port);
        done({});
        return;
    }
    // REPLICAOF NO ONE: keep the data, take writes, start a new history
    // (replicas of this server synchronize fully). The link must stop
    // applying before writes are taken, and stopping it can take as long as
    // a snapshot load: a thread of its own stops it, then promotes and
    // answers.
    std::lock_guard lock(link_mutex_);
    const bool stopping_links =
        links_stopped_.valid() &&
        links_stopped_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
    if (!link_ && !stopping_links) {
        done({});  // a primary already
        return;
    }
    auto stopped = std::make_shared<std::promise<void>>();
    std::shared_future<void> before = links_stopped_;
    links_stopped_ = stopped->get_future().share();
    link_reapers_.emplace_back(
        [this, link = std::move(link_), before, stopped, done = std::move(done)]() mutable {
            if (before.valid()) before.wait();
            link.reset();
            {
                std::lock_guard inner(link_mutex_);
                if (!link_) {  // no REPLICAOF HOST PORT came meanwhile
                    // Keys past their deadline on this clock are erased
                    // from now on, each with a DEL for its own replicas.
                    keyspace_.set_deadlines(store::Deadlines::enforce);
                    replication_.renew_replid();
                    replication_flags.store(0);
                    spdlog::info("replication: promoted to primary (REPLICAOF NO ONE)");
                }
            }
            stopped->set_value();
            done({});
        });
}

void Server::follow(std::string_view host, std::uint16_t port) {
    std::lock_guard lock(link_mutex_);
    if (link_ && link_->host() == host && link_->port() == port) return;
    // Replicas of this server cannot follow it into another history.
    replication_.close_feeds();
    // Before the link runs: no data command may see what is here now (nor
    // what the link replaced may still finish loading).
    if (link_) link_->retire();
    replication_flags.fetch_or(command::kReplicationReplica | command::kReplicationStale |
                               command::kReplicationUnsynced);
    // The primary's DEL records decide when a key past its deadline goes;
    // until then reads do not see it (as Redis 7 replicas).
    keyspace_.set_deadlines(store::Deadlines::follow);
    // The link replaced, and any REPLICAOF NO ONE still stopping one, are
    // waited for on the new link's own thread, not on this one (a worker's).
    std::shared_ptr<ReplicaLink> replaced(std::move(link_));
    std::shared_future<void> before = links_stopped_;
    links_stopped_ = {};  // whoever replaces the new link stops it, and so waits for these
    link_ =
        std::make_unique<ReplicaLink>(config_, keyspace_, persistence_, *this, std::string(host),
                                      port, [replaced = std::move(replaced), before]() mutable {
                                          if (before.valid()) before.wait();
                                          replaced.reset();
                                      });
    link_->start();
    spdlog::info("replication: this server is now a replica of {}:{}", host, port);
}

void Server::migrate(command::MigrateRequest request,
                     std::function<void(command::MigrateResult)> done) {
    migrator_->migrate(std::move(request), std::move(done));
}

void Server::wait_for_replicas(std::int64_t count, std::int64_t timeout_ms,
                               std::function<void(std::int64_t)> done) {
    replication_.wait(count, timeout_ms, std::move(done), main_context_);
}

}  // namespace bloomery::net
