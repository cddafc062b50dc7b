#pragma once
// How the server stops: SIGTERM and SIGINT, SHUTDOWN [NOSAVE|SAVE] [NOW]
// [FORCE] and SHUTDOWN ABORT, the final save, and the drain that gives
// replicas time to acknowledge every write. A state machine on the main
// thread; each transition is made in one place:
//
//   running --SHUTDOWN that saves---------------> saving
//   running --SHUTDOWN that does not, a signal--> stopping
//   saving  --SHUTDOWN-------------------------> saving     (NOW, FORCE added)
//   saving  --SHUTDOWN ABORT-------------------> save_cancelled
//   saving  --saved, or failed with FORCE------> stopping
//   saving  --failed---------------------------> running    (its clients told)
//   save_cancelled --SHUTDOWN------------------> saving     (the same save, new options)
//   save_cancelled --save over-----------------> running
//   saving, save_cancelled --a signal----------> stopping   (the save's end is ignored)
//   stopping --drained, or at the deadline-----> stopped    (the main loop ends)
//
// A stop closes the listeners and every client; replicas' feeds stay until
// the replicas acknowledged every write, up to --shutdown-timeout (not with
// NOW); then every connection closes and the main loop ends. The final save
// (finish()) comes once the workers have stopped.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bloomery/command/server.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/persist/manager.hpp"

namespace bloomery::net {

class ClientBook;
class ReplicationSource;
class WorkerPool;

class ShutdownCoordinator final : public command::Shutdown {
public:
    enum class State {
        running,         // serving; no SHUTDOWN under way
        saving,          // SHUTDOWN's save runs (off the main thread); the stop follows it
        save_cancelled,  // SHUTDOWN ABORT came during that save: it runs on, no stop follows
        stopping,        // listeners closed, clients closing, replicas draining
        stopped,         // the main loop is ending
    };

    // What a stop does beyond closing every connection.
    struct StopOptions {
        // Whether finish() saves (when saving is configured).
        enum class FinalSave { if_configured, none };
        FinalSave final_save = FinalSave::if_configured;
        // Whether replicas get --shutdown-timeout to acknowledge every write.
        enum class ReplicaWait { up_to_timeout, none };
        ReplicaWait replica_wait = ReplicaWait::up_to_timeout;
    };

    // Stops `main` (the main thread's loop) in the end. `close_listeners`
    // closes the listeners and the cron when a stop begins (main thread).
    // Catches SIGTERM and SIGINT from now on; they are acted on once the
    // main loop runs.
    ShutdownCoordinator(const core::Config& config, boost::asio::io_context& main,
                        persist::Manager& persistence, ReplicationSource& replication,
                        ClientBook& clients, WorkerPool& pool,
                        std::function<void()> close_listeners);
    ~ShutdownCoordinator() override;  // waits for a SHUTDOWN's save still running
    ShutdownCoordinator(const ShutdownCoordinator&) = delete;
    ShutdownCoordinator& operator=(const ShutdownCoordinator&) = delete;

    // A signal stops the server from now on. Main thread, before its loop.
    void watch_signals();
    // True from the moment a stop begins. Thread-safe.
    bool stopping() const {
        const State state = state_.load();
        return state == State::stopping || state == State::stopped;
    }
    // Once the main loop and the workers have stopped: the final save if the
    // stop asked for one and saving is configured. The exit code: 1 if that
    // save failed, else 0. Main thread.
    int finish();

    // command::Shutdown; any thread.
    void begin_shutdown(const command::ShutdownOptions& options,
                        std::function<void()> failed) override;
    void abort_shutdown(std::function<void(bool)> done) override;

private:
    // The transitions (main thread).
    // running -> saving: SHUTDOWN's save starts on a thread of its own.
    void start_saving(const command::ShutdownOptions& options);
    // saving or save_cancelled -> stopping or running: that save is over.
    void on_save_done(const persist::SaveResult& saved);
    // running, saving or save_cancelled -> stopping.
    void begin_stop(const StopOptions& options);
    // stopping -> stopped.
    void end_main_loop();

    // The last step of a stop: waits (every 10 ms, until `deadline_ms`) for
    // the client connections to be gone and then for the replicas to
    // acknowledge the journal's position at that moment (`target`, once
    // known), then closes what is left.
    void drain_for_replicas(std::int64_t deadline_ms, std::optional<std::uint64_t> target);
    // Answers every SHUTDOWN waiting that the server keeps running.
    void answer_kept_running();

    const core::Config& config_;
    boost::asio::io_context& main_;
    persist::Manager& persistence_;
    ReplicationSource& replication_;
    ClientBook& clients_;
    WorkerPool& pool_;
    std::function<void()> close_listeners_;
    // Written on the main thread only; read anywhere (stopping()).
    std::atomic<State> state_{State::running};
    StopOptions::FinalSave final_save_ = StopOptions::FinalSave::if_configured;
    // The SHUTDOWN being saved for, and its clients (and those of any that
    // joined it), answered only if the server keeps running.
    command::ShutdownOptions options_;
    std::vector<std::function<void()>> kept_running_;
    std::thread saver_;  // SHUTDOWN's save, off every worker
    boost::asio::signal_set signals_;
    boost::asio::steady_timer drain_timer_;
};

}  // namespace bloomery::net
