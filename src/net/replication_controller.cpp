// Replication as the running server sees it (replication_controller.hpp).

#include "replication_controller.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

#include "bloomery/net/replication.hpp"
#include "bloomery/persist/journal.hpp"

namespace bloomery::net {

namespace {

// A primary that becomes a replica: its data is its own history up to its
// journal's last change once the writes in progress are in it (no new one
// starts: the replica's flags are set). A replica promoted from that history
// at the same change continues it (ReplicationSource::can_continue).
ReplicaLink::Resumable own_history(persist::Manager& persistence, ReplicationSource& source) {
    persist::Journal* journal = persistence.journal();
    if (journal == nullptr || !source.history_shared()) return std::nullopt;
    // Keepalives appended after the last change (while it was cut off, say)
    // change nothing: the history is offered at that change.
    std::uint64_t changes = 0;
    const std::uint64_t at =
        journal->cut([&changes, journal] { changes = journal->changes_end(); });
    return ReplicationSource::History{source.replid(), changes, at};
}

}  // namespace

ReplicationController::ReplicationController(const core::Config& config, store::Keyspace& keyspace,
                                             persist::Manager& persistence,
                                             ReplicationSource& source,
                                             boost::asio::io_context& timers,
                                             boost::asio::ssl::context* link_tls)
    : config_(config),
      keyspace_(keyspace),
      persistence_(persistence),
      source_(source),
      timers_(timers),
      link_tls_(link_tls) {}

ReplicationController::~ReplicationController() {
    stop_links();
}

void ReplicationController::start() {
    if (config_.replicaof_host.empty()) return;
    if (core::replicaof_names_self(config_)) {
        // One argument list for every pod of a StatefulSet: pod 0, named
        // by --replicaof, serves as the primary (deploy/k8s).
        spdlog::info("--replicaof {} {} names this server: starting as the primary",
                     config_.replicaof_host, config_.replicaof_port);
        return;
    }
    follow(config_.replicaof_host, config_.replicaof_port);
}

void ReplicationController::stop_links() {
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

command::ReplicationInfo ReplicationController::replication() {
    command::ReplicationInfo info;
    {
        std::lock_guard lock(link_mutex_);
        if (link_) link_->fill_info(info);
    }
    source_.fill_info(info);
    return info;
}

void ReplicationController::replicaof(std::string_view host, std::uint16_t port,
                                      std::function<void(std::string)> done) {
    if (host.empty()) {
        promote(std::move(done));
        return;
    }
    follow(host, port);
    done({});
}

void ReplicationController::promote(std::function<void(std::string)> done) {
    // Keep the data, take writes, start a new history (replicas of this
    // server synchronize fully). The link must stop applying before writes
    // are taken, and stopping it can take as long as a snapshot load: a
    // thread of its own stops it, then promotes and answers.
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
            std::optional<ReplicationSource::History> held;
            if (link) {
                link->stop();
                held = link->history();
            }
            link.reset();
            {
                std::lock_guard inner(link_mutex_);
                if (!link_) {  // no REPLICAOF HOST PORT came meanwhile
                    // Keys past their deadline on this clock are erased
                    // from now on, each with a DEL for its own replicas.
                    keyspace_.set_deadlines(store::Deadlines::enforce);
                    // Every record applied is in this server's stream: it
                    // continues the old primary's history from here.
                    persist::Journal* journal = persistence_.journal();
                    if (held && journal != nullptr) {
                        held->own_offset = journal->position();
                    } else {
                        held.reset();
                    }
                    source_.renew_replid(std::move(held));
                    gate_.replication_flags.store(0);
                    spdlog::info("replication: promoted to primary (REPLICAOF NO ONE)");
                }
            }
            stopped->set_value();
            done({});
        });
}

void ReplicationController::follow(std::string_view host, std::uint16_t port) {
    std::lock_guard lock(link_mutex_);
    if (link_ && link_->host() == host && link_->port() == port) return;
    // Replicas of this server cannot follow it into another history.
    source_.close_feeds();
    // Before the link runs: no data command may see what is here now (nor
    // what the link replaced may still finish loading).
    if (link_) link_->retire();
    gate_.replication_flags.fetch_or(command::kReplicationReplica | command::kReplicationStale |
                                     command::kReplicationUnsynced);
    // The primary's DEL records decide when a key past its deadline goes;
    // until then reads do not see it (as Redis 7 replicas).
    keyspace_.set_deadlines(store::Deadlines::follow);
    // The link replaced, and any REPLICAOF NO ONE still stopping one, are
    // waited for on the new link's own thread, not on this one (a worker's).
    std::shared_ptr<ReplicaLink> replaced(std::move(link_));
    std::shared_future<void> before = links_stopped_;
    links_stopped_ = {};  // whoever replaces the new link stops it, and so waits for these
    auto stop_replaced = [this, replaced = std::move(replaced),
                          before]() mutable -> ReplicaLink::Resumable {
        if (before.valid()) before.wait();
        if (replaced) {
            // A replica that changes primary continues the old primary's
            // history if the new one was promoted from it.
            replaced->stop();
            ReplicaLink::Resumable held = replaced->history();
            replaced.reset();
            return held;
        }
        return own_history(persistence_, source_);
    };
    link_ =
        std::make_unique<ReplicaLink>(config_, keyspace_, persistence_, gate_, std::string(host),
                                      port, link_tls_, std::move(stop_replaced));
    link_->start();
    spdlog::info("replication: this server is now a replica of {}:{}{}", host, port,
                 link_tls_ != nullptr ? " over TLS" : "");
}

void ReplicationController::wait_for_replicas(std::int64_t count, std::int64_t timeout_ms,
                                              std::function<void(std::int64_t)> done) {
    source_.wait(count, timeout_ms, std::move(done), timers_);
}

}  // namespace bloomery::net
