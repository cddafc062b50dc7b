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
#include "bloomery/persist/journal_turn.hpp"
#include "bloomery/persist/manager.hpp"
#include "bloomery/store/keyspace.hpp"

namespace boost::asio::ssl {
class context;
}

namespace bloomery::net {

class Connection;
class Migrator;
class ReplicationSource;
class ReplicaLink;
class MetricsServer;

// One of --maxclients' slots. The acceptor takes it before a connection
// exists; the connection owns it and gives it back when it is destroyed,
// whichever way it ends. Move-only; an empty slot (default, or moved from)
// gives back nothing.
class ClientSlot {
public:
    ClientSlot() = default;
    ClientSlot(ClientSlot&& other) noexcept : taken_(std::exchange(other.taken_, nullptr)) {}
    ClientSlot& operator=(ClientSlot&& other) noexcept {
        if (this != &other) {
            release();
            taken_ = std::exchange(other.taken_, nullptr);
        }
        return *this;
    }
    ClientSlot(const ClientSlot&) = delete;
    ClientSlot& operator=(const ClientSlot&) = delete;
    ~ClientSlot() { release(); }

    // Takes a slot if fewer than `limit` of `taken` are held; empty if not.
    // Lock-free and atomic: however many threads try at once, `taken` never
    // exceeds `limit`. `taken` must outlive the slot.
    static ClientSlot acquire(std::atomic<std::size_t>& taken, std::size_t limit) {
        std::size_t now = taken.load(std::memory_order_relaxed);
        do {
            if (now >= limit) return {};
        } while (!taken.compare_exchange_weak(now, now + 1, std::memory_order_relaxed));
        return ClientSlot(taken);
    }
    explicit operator bool() const { return taken_ != nullptr; }

private:
    explicit ClientSlot(std::atomic<std::size_t>& taken) : taken_(&taken) {}
    void release() {
        if (taken_ != nullptr) taken_->fetch_sub(1, std::memory_order_relaxed);
        taken_ = nullptr;
    }

    std::atomic<std::size_t>* taken_ = nullptr;
};

class Server final : public command::ClientDirectory,
                     public command::ServerStats,
                     public command::Persistence,
                     public command::Shutdown,
                     public command::Replication,
                     public command::ReplicaGate,
                     public command::Migration {
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
    std::uint64_t total_changes() const { return raw_totals().changes; }
    // /readyz: the listeners accept (run() has started), no stop has begun,
    // and a replica has its first copy of its primary. Thread-safe.
    bool ready() const {
        return accepting_.load(std::memory_order_acquire) && !stopping_.load() &&
               (replication_flags.load(std::memory_order_relaxed) &
                command::kReplicationUnsynced) == 0;
    }
    command::Slowlog& slowlog() { return slowlog_; }
    // The /metrics text (net/prometheus.hpp). Thread-safe.
    std::string metrics_text();

    // The command layer's interfaces (command/server.hpp).
    std::size_t connected_clients() override;
    std::int64_t blocked_clients() override {
        return blocked_clients_.load(std::memory_order_relaxed);
    }
    std::pair<std::size_t, std::size_t> largest_buffers() override;
    std::string client_list(std::span<const std::int64_t> ids) override;
    bool kill_client(std::int64_t id) override;
    bool kill_client(std::string_view address) override;
    std::uint64_t evicted_clients() override;
    void reset_evicted_clients() override;
    void evict_clients_over_limit() override;
    command::StatsTotals stats() override;
    void reset_stats() override;
    std::vector<core::CommandTotals> command_stats() override;
    std::vector<std::pair<std::string, std::uint64_t>> error_stats() override;
    void save_async(std::function<void(persist::SaveResult)> done) override;
    persist::SaveResult bgsave() override;
    persist::PersistenceInfo persistence() override;
    bool snapshot_failing() override { return persistence_.snapshot_failing(); }
    // The journal itself, for the network layer (commands see its health).
    persist::Journal* journal() override { return persistence_.journal(); }
    void begin_shutdown(const command::ShutdownOptions& options,
                        std::function<void()> failed) override;
    void abort_shutdown(std::function<void(bool)> done) override;
    std::int64_t start_time_ms() override { return start_time_ms_; }
    unsigned worker_threads() override { return static_cast<unsigned>(workers_.size()); }
    command::ReplicationInfo replication() override;
    void replicaof(std::string_view host, std::uint16_t port,
                   std::function<void(std::string)> done) override;
    void wait_for_replicas(std::int64_t count, std::int64_t timeout_ms,
                           std::function<void(std::int64_t)> done) override;
    ReplicationSource& replication_source() { return replication_; }
    // Pub/Sub's channels and subscribers (command/pubsub.hpp).
    command::PubSub& pubsub() { return pubsub_; }
    // MIGRATE's exchanges (net/migrator.hpp).
    void migrate(command::MigrateRequest request,
                 std::function<void(command::MigrateResult)> done) override;

    // Called by connections. A worker's thread ends each turn with the
    // journal's write-through (persist/journal_turn.hpp).
    struct Worker final : persist::JournalTurn {
        boost::asio::io_context context{1};
        command::WorkerStats stats;
        std::mutex connections_mutex;  // guards `connections` (changes on accept/close only)
        std::list<std::weak_ptr<Connection>> connections;
        Server* server = nullptr;
        // --appendfsync everysec and no: connections whose replies wait for
        // this worker's one journal write of the turn, and whether that
        // write is posted (worker thread only).
        std::vector<std::shared_ptr<Connection>> awaiting_journal;
        bool journal_turn_posted = false;
        std::thread thread;

        void schedule_write_through() override { post_journal_turn(*this); }
    };
    // Posts `worker`'s journal write for the end of its turn, behind the
    // completions already queued, unless it is posted (worker thread).
    static void post_journal_turn(Worker& worker);
    const core::Config& config() const { return config_; }
    store::Keyspace& keyspace() { return keyspace_; }
    const command::Registry& registry() const { return registry_; }
    std::list<std::weak_ptr<Connection>>::iterator track(Worker& worker,
                                                         std::shared_ptr<Connection> connection);
    void untrack(Worker& worker, std::list<std::weak_ptr<Connection>>::iterator position);
    // A connection starts or stops waiting for a deferred reply (WAIT, SAVE).
    // Blocking is rare, so one shared counter costs nothing per command.
    void client_blocked(std::int64_t by) {
        blocked_clients_.fetch_add(by, std::memory_order_relaxed);
    }
    // maxmemory-clients (client_eviction.cpp): a connection's memory grew
    // (an allocation of its buffers or arguments, at most once a command).
    // If the clients' buffers together may have reached the limit, closes
    // the clients holding most, largest first, until the others hold less;
    // never replicas or clients with CLIENT NO-EVICT on. Reads a few shared
    // counters and writes none unless it evicts. The connection's thread.
    void client_memory_grew();

private:
    void accept_next(boost::asio::ip::tcp::acceptor& acceptor, bool tls);
    void on_signal(const boost::system::error_code& error, int signal);
    // The cron's look at client-output-buffer-limit (soft limits, replicas).
    void check_output_limits(std::int64_t now_ms);
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
    // Follows HOST:PORT (a new link; the one it replaces stops on the new
    // link's thread).
    void follow(std::string_view host, std::uint16_t port);
    // Stops the link and every link still stopping (at exit), outside
    // link_mutex_.
    void stop_links();
    // Sums of the per-thread counters, without CONFIG RESETSTAT baselines.
    command::StatsTotals raw_totals() const;
    std::vector<core::CommandTotals> raw_command_stats() const;
    template <class Fn>
    void for_each_connection(Fn&& fn);
    // Asks every connection whose client matches to close; true if any did.
    template <class Match>
    bool close_clients_where(Match&& match);
    // The walk of client_memory_grew() and evict_clients_over_limit(), once
    // the counters say the clients may hold `held` >= `limit` bytes: by this
    // thread, or by the one walking already, which walks again for it.
    void evict_clients(std::uint64_t limit, std::uint64_t held);
    // One walk: closes the largest clients while all hold >= `limit`.
    void evict_largest_clients(std::uint64_t limit, std::uint64_t held);

    const core::Config& config_;
    store::Keyspace& keyspace_;
    const command::Registry& registry_;
    persist::Manager& persistence_;
    ReplicationSource& replication_;
    // Guards the three below. INFO, ROLE, CONFIG GET and /metrics take it
    // on any thread, so nothing waits for a link to stop while holding it.
    std::mutex link_mutex_;
    std::unique_ptr<ReplicaLink> link_;  // set while this server is a replica
    // Ready once the links REPLICAOF NO ONE took away have stopped (invalid:
    // none is stopping); a link started after waits for it on its thread.
    std::shared_future<void> links_stopped_;
    std::vector<std::thread> link_reapers_;  // REPLICAOF NO ONE's, joined at exit
    // Client slots taken (connected_clients, --maxclients). Declared before
    // workers_ so it outlives them: a connection still held by a worker's
    // io_context when that is destroyed gives its slot back here.
    std::atomic<std::size_t> client_slots_{0};
    // Outlives workers_ too: a connection leaves its channels when it closes.
    command::PubSub pubsub_;
    // Declared before main_context_ so they are destroyed after it: an accept
    // still pending there holds a socket of a worker's io_context.
    std::vector<std::unique_ptr<Worker>> workers_;
    boost::asio::io_context main_context_{1};
    boost::asio::ip::tcp::acceptor acceptor_;      // plaintext, open unless --port 0
    boost::asio::ip::tcp::acceptor tls_acceptor_;  // open if --tls-port is set
    std::unique_ptr<boost::asio::ssl::context> tls_context_;
    boost::asio::signal_set signals_;
    boost::asio::steady_timer cron_timer_;
    std::size_t next_worker_ = 0;
    std::atomic<std::int64_t> next_client_id_{1};
    // Connections tracked and not yet closed: a stop waits for none to remain.
    std::atomic<std::size_t> open_connections_{0};
    std::atomic<std::int64_t> blocked_clients_{0};  // blocked_clients()
    // maxmemory-clients: a walk is under way (one at a time); growth was
    // seen during one (it walks again); the counted bytes below which growth
    // needs no walk after one found nothing to close (see evict_clients);
    // clients closed, and the count at the last CONFIG RESETSTAT.
    std::atomic<bool> evicting_{false};
    std::atomic<bool> eviction_wanted_{false};
    std::atomic<std::uint64_t> eviction_recheck_at_{0};
    std::atomic<std::uint64_t> evicted_clients_{0};
    std::atomic<std::uint64_t> evicted_clients_base_{0};
    std::int64_t start_time_ms_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> accepting_{false};
    command::Slowlog slowlog_;
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
    // ops/sec: Redis-style samples of the command counter every 100 ms.
    static constexpr std::size_t kOpsSamples = 16;
    std::mutex ops_mutex_;
    std::uint64_t ops_samples_[kOpsSamples] = {};
    std::size_t ops_index_ = 0;
    std::uint64_t last_commands_ = 0;
    std::int64_t last_sample_ms_ = 0;
    command::StatsTotals stats_base_;  // CONFIG RESETSTAT baseline, guarded by ops_mutex_
    std::vector<core::CommandTotals> command_stats_base_;  // likewise
};

}  // namespace bloomery::net
