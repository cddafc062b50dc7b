// SHUTDOWN (command/server.hpp: Shutdown).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "bloomery/net/replication.hpp"
#include "bloomery/net/server.hpp"
#include "connection.hpp"
#include "migrator.hpp"

namespace bloomery::net {

namespace asio = boost::asio;

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

}  // namespace bloomery::net
