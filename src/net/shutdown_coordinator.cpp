// How the server stops (shutdown_coordinator.hpp).

#include "shutdown_coordinator.hpp"

#include <spdlog/spdlog.h>
#include <csignal>

#include <chrono>
#include <memory>

#include <boost/asio/post.hpp>

#include "bloomery/net/replication.hpp"
#include "bloomery/persist/journal.hpp"
#include "client_book.hpp"
#include "worker_pool.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

ShutdownCoordinator::ShutdownCoordinator(const core::Config& config, asio::io_context& main,
                                         persist::Manager& persistence,
                                         ReplicationSource& replication, ClientBook& clients,
                                         WorkerPool& pool, std::function<void()> close_listeners)
    : config_(config),
      main_(main),
      persistence_(persistence),
      replication_(replication),
      clients_(clients),
      pool_(pool),
      close_listeners_(std::move(close_listeners)),
      signals_(main, SIGINT, SIGTERM),
      drain_timer_(main) {
    // The last connection of a stop gone: nothing is left to drain.
    pool_.when_all_closed([this] {
        if (stopping()) asio::post(main_, [this] { end_main_loop(); });
    });
}

ShutdownCoordinator::~ShutdownCoordinator() {
    if (saver_.joinable()) saver_.join();
}

void ShutdownCoordinator::watch_signals() {
    signals_.async_wait([this](const error_code& error, int signal) {
        if (error) return;
        spdlog::info("received {}, scheduling shutdown", signal == SIGTERM ? "SIGTERM" : "SIGINT");
        begin_stop({});
    });
}

int ShutdownCoordinator::finish() {
    // A SHUTDOWN's save still running (a signal came meanwhile) ends first:
    // one save at a time. Its clients are gone.
    if (saver_.joinable()) saver_.join();
    kept_running_.clear();
    persistence_.wait();
    if (final_save_ == StopOptions::FinalSave::none || !persistence_.saving_enabled()) return 0;
    const persist::SaveResult saved = persistence_.save();
    if (!saved.ok()) {
        spdlog::error("final snapshot failed: {}", saved.detail);
        return 1;
    }
    spdlog::info("final snapshot saved");
    return 0;
}

void ShutdownCoordinator::begin_shutdown(const command::ShutdownOptions& options,
                                         std::function<void()> failed) {
    asio::post(main_, [this, options, failed = std::move(failed)]() mutable {
        kept_running_.push_back(std::move(failed));
        switch (state_.load()) {
            case State::stopping:
            case State::stopped:
                return;  // a stop is under way: the connection closes with it
            case State::saving:
                // Joins the SHUTDOWN already saving.
                options_.now = options_.now || options.now;
                options_.force = options_.force || options.force;
                return;
            case State::save_cancelled:
                // Revives the SHUTDOWN that was saving, with these options.
                state_ = State::saving;
                options_ = options;
                return;
            case State::running:
                break;
        }
        const bool save =
            options.mode == command::ShutdownMode::save ||
            (options.mode == command::ShutdownMode::default_save && persistence_.saving_enabled());
        spdlog::info("SHUTDOWN requested by a client{}", save ? ": saving a final snapshot" : "");
        if (save) {
            start_saving(options);
        } else {
            begin_stop({StopOptions::FinalSave::none,
                        options.now ? StopOptions::ReplicaWait::none
                                    : StopOptions::ReplicaWait::up_to_timeout});
        }
    });
}

void ShutdownCoordinator::abort_shutdown(std::function<void(bool)> done) {
    asio::post(main_, [this, done = std::move(done)] {
        // Only while the SHUTDOWN saves: once the stop has begun, the client
        // that could ask is being disconnected.
        const bool cancel = state_.load() == State::saving;
        if (cancel) {
            state_ = State::save_cancelled;
            spdlog::info("SHUTDOWN ABORT: the shutdown is cancelled");
            answer_kept_running();
        }
        done(cancel);
    });
}

void ShutdownCoordinator::start_saving(const command::ShutdownOptions& options) {
    state_ = State::saving;
    options_ = options;
    if (saver_.joinable()) saver_.join();  // an earlier one, over
    // A thread of its own: saving a large dataset takes seconds, and the
    // worker this came from serves its other clients meanwhile (SAVE does
    // likewise, on the persistence thread).
    saver_ = std::thread([this] {
        persist::SaveResult saved;
        do {
            persistence_.wait();  // a background save first
            saved = persistence_.save();
        } while (saved.status == persist::SaveStatus::in_progress);
        asio::post(main_, [this, saved] { on_save_done(saved); });
    });
}

void ShutdownCoordinator::on_save_done(const persist::SaveResult& saved) {
    switch (state_.load()) {
        case State::running:  // not saving: nothing waits for this
        case State::stopping:
        case State::stopped:
            return;  // a signal's stop came meanwhile (and saves at the end)
        case State::save_cancelled:
            spdlog::info(
                "SHUTDOWN cancelled by SHUTDOWN ABORT; the final snapshot was saved anyway");
            state_ = State::running;
            return;  // its clients were answered by the ABORT
        case State::saving:
            break;
    }
    if (!saved.ok()) {
        if (!options_.force) {
            spdlog::error("SHUTDOWN: snapshot failed, not exiting: {}", saved.detail);
            state_ = State::running;
            answer_kept_running();
            return;
        }
        spdlog::error("SHUTDOWN FORCE: snapshot failed, exiting anyway: {}", saved.detail);
    } else {
        spdlog::info("SHUTDOWN: final snapshot saved");
    }
    begin_stop({StopOptions::FinalSave::none, options_.now
                                                  ? StopOptions::ReplicaWait::none
                                                  : StopOptions::ReplicaWait::up_to_timeout});
}

void ShutdownCoordinator::begin_stop(const StopOptions& options) {
    if (stopping()) return;
    state_ = State::stopping;
    final_save_ = options.final_save;
    error_code ignored;
    signals_.cancel(ignored);
    close_listeners_();
    // Each connection closes on its own thread after the command it is
    // running; replies already computed are lost only if the peer is slow.
    // Replicas' feeds stay: once no client can write any more, the
    // replicas get up to --shutdown-timeout to acknowledge every write
    // (Redis 7 likewise), so that one promoted next holds every write a
    // client was answered for.
    clients_.close_connections(ClientBook::Reach::clients_only);
    const std::size_t replicas = replication_.replica_count();
    const std::int64_t wait_ms =
        options.replica_wait == StopOptions::ReplicaWait::none || replicas == 0
            ? 0
            : config_.shutdown_timeout_seconds * 1000;
    if (wait_ms > 0) {
        spdlog::info("waiting up to {} s for {} replica(s) to acknowledge every write",
                     config_.shutdown_timeout_seconds, replicas);
    }
    drain_for_replicas(store::now_ms() + wait_ms, std::nullopt);
}

void ShutdownCoordinator::drain_for_replicas(std::int64_t deadline_ms,
                                             std::optional<std::uint64_t> target) {
    if (!target && !clients_.any_connection(ClientBook::Reach::clients_only)) {
        // No client is left to write: everything written is before this.
        persist::Journal* journal = persistence_.journal();
        target = journal != nullptr ? journal->position() : 0;
    }
    const std::size_t behind = target ? replication_.replicas_behind(*target) : 1;
    if (behind != 0 && store::now_ms() < deadline_ms) {
        drain_timer_.expires_after(std::chrono::milliseconds(10));
        drain_timer_.async_wait([this, deadline_ms, target](const error_code& error) {
            if (!error) drain_for_replicas(deadline_ms, target);
        });
        return;
    }
    if (behind != 0 && replication_.replica_count() != 0) {
        spdlog::warn(
            "shutdown: {} replica(s) had not acknowledged offset {} within "
            "--shutdown-timeout; stopping anyway",
            behind, target.value_or(0));
    }
    clients_.close_connections(ClientBook::Reach::clients_and_replicas);
    if (pool_.open_connections() == 0) end_main_loop();
    // Do not wait forever for a stuck peer.
    auto deadline = std::make_shared<asio::steady_timer>(main_, std::chrono::seconds(5));
    deadline->async_wait([this, deadline](const error_code&) { end_main_loop(); });
}

void ShutdownCoordinator::end_main_loop() {
    state_ = State::stopped;
    main_.stop();
}

void ShutdownCoordinator::answer_kept_running() {
    std::vector<std::function<void()>> waiting;
    waiting.swap(kept_running_);
    for (auto& failed : waiting) failed();
}

}  // namespace bloomery::net
