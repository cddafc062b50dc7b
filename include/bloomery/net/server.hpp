#pragma once
// The TCP server: one io_context per worker thread, acceptors (plaintext
// --port, TLS --tls-port, either may be off) on the main thread handing each
// new connection to the next worker round-robin, and a 100 ms cron (active
// expiry, save points, ops/sec sampling) on the main thread. Implements the
// command layer's view of the server (command/server.hpp).

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio.hpp>

#include "bloomery/command/context.hpp"
#include "bloomery/command/pubsub.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/persist/manager.hpp"
#include "bloomery/store/keyspace.hpp"

namespace boost::asio::ssl {
class context;
}

namespace bloomery::net {

class ClientBook;
struct ConnectionEnvironment;
class MetricsServer;
class Migrator;
class PersistenceAdapter;
class ReplicationController;
class ReplicationSource;
class ServerStatistics;
class WorkerPool;

class Server final : public command::Shutdown {
public:
    // `replication` feeds replicas (made before the journal is loaded, so the
    // journal's writer can wake feeds: see main.cpp).
    Server(const core::Config& config, store::Keyspace& keyspace, const command::Registry& registry,
           persist::Manager& persistence, ReplicationSource& replication);
    ~Server() override;

    // Starts the monitoring HTTP listener if --metrics-port is set (before
    // the data is loaded, so /healthz answers and /readyz says 503 while it
    // loads). Throws std::runtime_error naming the address on failure.
    void start_metrics();
    // Builds the TLS context if --tls-port is set, binds and listens. Throws
    // std::runtime_error naming the address or the TLS file on failure
    // ("cannot listen on ADDR:PORT: ..." for a port that cannot be bound).
    void listen();
    // Runs until a signal (SIGTERM/SIGINT) or SHUTDOWN; returns the exit code.
    int run();
    // Thread-safe: starts a clean stop (used by SHUTDOWN and signals). The
    // listeners close and every client connection closes; replicas' feeds
    // stay open until the replicas acknowledged every write, for up to
    // --shutdown-timeout (not with `now`); then the server stops, saving at
    // the end if `save_on_exit` and saving is configured.
    void request_stop(bool save_on_exit, bool now = false);
    // Writes so far (never reset), for save points. Lock-free.
    std::uint64_t total_changes() const;
    // /readyz: the listeners accept (run() has started), no stop has begun,
    // and a replica has its first copy of its primary. Thread-safe.
    bool ready() const;
    // The /metrics text (net/prometheus.hpp). Thread-safe.
    std::string metrics_text();

    // The command layer's interfaces (command/server.hpp) not yet given to
    // a part of their own.
    void begin_shutdown(const command::ShutdownOptions& options,
                        std::function<void()> failed) override;
    void abort_shutdown(std::function<void(bool)> done) override;

private:
    void accept_next(boost::asio::ip::tcp::acceptor& acceptor, bool tls);
    void on_signal(const boost::system::error_code& error, int signal);
    void cron();
    void stop_now();
    // The last step of a stop: waits (every 10 ms, until `deadline_ms`) for
    // the client connections to be gone and then for the replicas to
    // acknowledge the journal's position at that moment, then closes what is
    // left. Main thread.
    void drain_for_replicas(std::int64_t deadline_ms, bool target_known, std::uint64_t target);
    // SHUTDOWN's final save is over (on the main thread): stops, or answers
    // its clients that it failed.
    void finish_shutdown_save(const persist::SaveResult& saved);
    // Answers every SHUTDOWN waiting that the server keeps running.
    void fail_shutdown();

    const core::Config& config_;
    store::Keyspace& keyspace_;
    const command::Registry& registry_;
    persist::Manager& persistence_;
    ReplicationSource& replication_source_;
    std::unique_ptr<PersistenceAdapter> persistence_commands_;
    // Outlive the workers: a connection leaves its channels when it closes,
    // and holds the environment until it is destroyed.
    command::PubSub pubsub_;
    std::unique_ptr<ConnectionEnvironment> environment_;  // made once every part exists
    // Declared before main_context_ so they are destroyed after it: an accept
    // still pending there holds a socket of a worker's io_context.
    std::unique_ptr<WorkerPool> pool_;
    boost::asio::io_context main_context_{1};
    std::unique_ptr<ServerStatistics> statistics_;
    std::unique_ptr<ClientBook> clients_;
    std::unique_ptr<ReplicationController> replication_;
    command::Slowlog slowlog_;
    boost::asio::ip::tcp::acceptor acceptor_;      // plaintext, open unless --port 0
    boost::asio::ip::tcp::acceptor tls_acceptor_;  // open if --tls-port is set
    std::unique_ptr<boost::asio::ssl::context> tls_context_;
    boost::asio::signal_set signals_;
    boost::asio::steady_timer cron_timer_;
    std::atomic<std::int64_t> next_client_id_{1};
    std::atomic<bool> stopping_{false};
    std::atomic<bool> accepting_{false};
    std::unique_ptr<MetricsServer> metrics_;
    // Stopped first on the way out (~Server), while the workers its
    // pending replies go to still exist.
    std::unique_ptr<Migrator> migrator_;
    std::atomic<bool> save_on_exit_{true};
    // SHUTDOWN (main thread only): its final save runs on shutdown_saver_,
    // off every worker; the SHUTDOWN clients wait for it in shutdown_failed_
    // (answered only if the server keeps running).
    bool shutdown_saving_ = false;
    bool shutdown_aborted_ = false;  // SHUTDOWN ABORT came during the save
    command::ShutdownOptions shutdown_options_;
    std::vector<std::function<void()>> shutdown_failed_;
    std::thread shutdown_saver_;
    boost::asio::steady_timer drain_timer_;
    int exit_code_ = 0;
};

}  // namespace bloomery::net
