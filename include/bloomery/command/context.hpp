#pragma once
// What a command handler sees: the keyspace, the configuration, its client's
// state, the reply writer, and those of the server's services
// (command/server.hpp) it names. Nothing here knows of Asio; the network
// layer implements the server's interfaces.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bloomery/command/server.hpp"
#include "bloomery/core/command_stats.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/error_stats.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/core/runtime_settings.hpp"
#include "bloomery/resp/writer.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::command {

using Args = std::span<const std::string_view>;
class AclUser;
class Slowlog;

// Per-thread counters: each worker thread owns one and is its only writer
// (load + store, no read-modify-write), so no cache line is shared by every
// command; INFO sums them with relaxed loads.
struct WorkerStats {
    std::atomic<std::uint64_t> commands{0};
    std::atomic<std::uint64_t> connections_received{0};
    std::atomic<std::uint64_t> rejected_connections{0};
    std::atomic<std::uint64_t> changes{0};  // writes that changed data (for save points)
    std::atomic<std::uint64_t> keyspace_hits{0};
    std::atomic<std::uint64_t> keyspace_misses{0};
    std::atomic<std::uint64_t> protocol_errors{0};
    std::atomic<std::uint64_t> net_input_bytes{0};
    std::atomic<std::uint64_t> net_output_bytes{0};
    std::atomic<std::uint64_t> net_repl_output_bytes{0};  // of net_output_bytes, to replicas
    std::atomic<std::uint64_t> reads_processed{0};        // socket reads completed
    std::atomic<std::uint64_t> writes_processed{0};       // socket writes completed
    std::atomic<std::uint64_t> error_replies{0};
    // Clients closed for their query buffer (client-query-buffer-limit) or
    // their replies waiting (client-output-buffer-limit).
    std::atomic<std::uint64_t> query_buffer_limit_disconnections{0};
    std::atomic<std::uint64_t> output_buffer_limit_disconnections{0};
    // Per command (INFO commandstats / latencystats, /metrics), by
    // CommandSpec::id; dispatch() records into it.
    core::CommandStatsTable command_stats;
    // Error replies by prefix (INFO errorstats): the connections of this
    // worker point their writers at it.
    core::ErrorStatsTable error_stats;

    static void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by = 1) {
        counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
    }
};

struct CommandSpec;

// One client's MULTI/EXEC state (transaction_commands.cpp). The owning
// worker thread is the only writer; CLIENT LIST reads the published sizes.
//
// Memory: the queue and the watched keys hold what the client sent, so
// together they are bounded by client-query-buffer-limit (and 4 GiB): a
// command that would pass it is refused at queue time (and the transaction
// then aborts), a WATCH past it is refused. What they hold is counted in
// used_memory with the query buffers.
// The most bytes a transaction's queue and watched keys may hold, whatever
// client-query-buffer-limit allows (the journal bounds one transaction's
// records; see persist/journal.hpp).
inline constexpr std::size_t kMaxTransactionQueueBytes = std::size_t{4} << 30;

struct TransactionState {
    struct Queued {
        const CommandSpec* spec;
        std::uint32_t first_argument;  // index into `arguments`
        std::uint32_t argument_count;
    };
    struct Watched {
        std::string key;
        store::Keyspace::WatchStamp stamp;
    };
    bool active = false;   // MULTI was called, EXEC or DISCARD not yet
    bool aborted = false;  // a command was refused while queued: EXEC answers EXECABORT
    // The queued commands' flags together (for EXEC's own checks).
    bool any_write = false;
    bool any_denyoom = false;
    bool any_keys = false;
    std::vector<Queued> commands;
    std::string argument_bytes;  // every queued argument, back to back
    std::vector<std::pair<std::size_t, std::size_t>> arguments;  // offset, size
    std::vector<Watched> watched;
    core::MemoryCharge charge{core::MemoryUse::query_buffers};
    // Published for CLIENT LIST: queued commands (-1 outside MULTI) and bytes held.
    std::atomic<std::int64_t> listed_commands{-1};
    std::atomic<std::uint64_t> listed_bytes{0};

    // Bytes the queue and the watched keys hold (what `charge` counts).
    std::size_t bytes() const;
    // Republishes the counts and the charge after a change.
    void publish();
    // Ends the transaction, if any (DISCARD, EXEC, RESET, a closed
    // connection): the queue and the watched keys go.
    void discard();
};

class Subscriber;

// One client's Pub/Sub subscriptions (pubsub_commands.cpp). The owning
// worker thread is the only writer; CLIENT LIST and CLIENT KILL read the
// published counts. The names a client subscribes to are bounded, with its
// queue, by client-query-buffer-limit, and counted in used_memory.
struct SubscriptionState {
    std::unordered_set<std::string> channels;
    std::unordered_set<std::string> patterns;
    std::atomic<std::size_t> channel_count{0};
    std::atomic<std::size_t> pattern_count{0};
    core::MemoryCharge charge{core::MemoryUse::query_buffers};
    // Set once by the connection, before its first command: what the
    // registry delivers to.
    std::weak_ptr<Subscriber> self;

    std::size_t count() const { return channels.size() + patterns.size(); }
    std::size_t bytes() const;
    void publish();
};

// A connection's state. The owning worker thread is the only writer; other
// threads (CLIENT LIST, INFO) read it, so what they read is atomic or
// guarded by `mutex`.
struct ClientState {
    std::int64_t id = 0;
    std::string address;        // "ip:port" of the peer; fixed after accept
    std::string local_address;  // "ip:port" of our side; fixed after accept
    std::int64_t created_ms = 0;
    std::atomic<std::int64_t> last_interaction_ms{0};
    std::atomic<const char*> last_command{nullptr};  // a CommandSpec's name
    std::atomic<int> protocol{2};
    bool close_after_reply = false;    // QUIT, SHUTDOWN; owner thread only
    std::atomic<bool> blocked{false};  // waiting for a deferred reply (CLIENT LIST flag b)
    // Buffer sizes in bytes, published by the connection for CLIENT LIST.
    std::atomic<std::size_t> query_buffer_used{0};  // received, not yet run
    std::atomic<std::size_t> query_buffer_capacity{0};
    std::atomic<std::size_t> output_buffer_used{0};  // replies not yet written
    std::atomic<std::size_t> output_buffer_capacity{0};
    // Since when (ms) the replies not yet written have stayed above the
    // soft client-output-buffer-limit of the client's class, 0 while they
    // are not: written by the connection, read by the server's cron.
    std::atomic<std::int64_t> output_soft_limit_since_ms{0};
    // maxmemory-clients (net/server.hpp). What the client holds, in bytes:
    // query buffer, arguments, replies, transaction and subscriptions
    // (CLIENT LIST tot-mem), published by the connection when it changes.
    std::atomic<std::uint64_t> memory_bytes{0};
    std::atomic<bool> no_evict{false};  // CLIENT NO-EVICT on (CLIENT LIST flag e)
    std::atomic<bool> evicted{false};   // chosen to be closed for maxmemory-clients
    // Access control (acl.hpp). `user`: whom AUTH or HELLO AUTH made this
    // client, null for the default user; set by the owner thread, read by
    // CLIENT LIST from others (users live as long as the server).
    std::atomic<const AclUser*> user{nullptr};
    bool authenticated = false;  // AUTH succeeded at least once; owner thread only
    // Cluster mode (cluster_routing.cpp), owner thread only. READONLY: a
    // replica serves this client's reads of its primary's slots (READWRITE
    // clears it). ASKING: the next command (or transaction) may use a slot
    // this node is importing.
    bool cluster_readonly = false;
    bool cluster_asking = false;
    // MULTI, EXEC, DISCARD, WATCH (transaction_commands.cpp).
    TransactionState transaction;
    // SUBSCRIBE, PSUBSCRIBE (pubsub_commands.cpp).
    SubscriptionState subscriptions;

    // Replication (a replica connected to this primary). REPLCONF
    // listening-port sets the port; PSYNC sets psync_requested, and the
    // connection turns into the replica's feed once that command's batch of
    // replies is written. The acknowledged offset is written by the owner
    // thread (REPLCONF ACK) and read by INFO and WAIT.
    std::atomic<std::uint16_t> replica_listening_port{0};
    bool psync_requested = false;  // owner thread only
    std::string psync_replid;      // owner thread only
    std::int64_t psync_offset = -1;
    std::atomic<bool> is_replica{false};  // a feed: CLIENT LIST flag S
    std::atomic<std::uint64_t> replica_ack_offset{0};
    std::atomic<std::int64_t> replica_ack_ms{0};

    std::string name() const {
        std::lock_guard lock(mutex);
        return name_;
    }
    void set_name(std::string_view name) {
        std::lock_guard lock(mutex);
        name_ = name;
    }
    void set_library(std::string_view lib_name, std::string_view lib_version) {
        std::lock_guard lock(mutex);
        if (!lib_name.empty()) lib_name_ = lib_name;
        if (!lib_version.empty()) lib_version_ = lib_version;
    }

    mutable std::mutex mutex;  // guards the strings below
    std::string name_;
    std::string lib_name_;
    std::string lib_version_;
};

// ---- Deferred replies ("blocked clients") ----
//
// A handler that cannot answer before it returns (SAVE waits for the
// persistence thread; a journaled write will wait for its fsync) takes a
// DeferredReply from its Context and completes it later. The contract:
//
// - Context::defer_reply() is called at most once per command, by its handler,
//   on the connection's thread. From then on the handler writes nothing to
//   ctx.out.
// - Until the reply is completed the connection runs no further command of
//   that client: pipelined commands already received wait, so replies stay in
//   order, and nothing more is read from it. The worker thread keeps serving
//   every other connection.
// - complete(write_reply) may be called from any thread, also before the
//   handler returns. The first call wins; later calls do nothing. write_reply
//   runs later on the connection's own thread with its resp::Writer; error
//   replies it writes count in total_error_replies. It must not touch the
//   Context or the command's arguments (both are gone by then): capture what
//   it needs by value.
// - If the client is gone meanwhile (disconnected, CLIENT KILL, server
//   stopping), write_reply is destroyed without running. Completing is always
//   safe: the handle may outlive the connection.
// - If every copy of the handle is destroyed without complete(), the client
//   gets kNoReply (an error) instead of waiting forever.

using ReplyWriter = std::function<void(resp::Writer&)>;

// Where a deferred reply goes; implemented by the network layer (and by fakes
// in unit tests). deliver() is called exactly once, from any thread.
class ReplySink {
public:
    virtual ~ReplySink() = default;
    virtual void deliver(ReplyWriter write_reply) = 0;
};

// The handle a handler completes. Copyable (so it fits in a std::function);
// every copy refers to the same reply.
class DeferredReply {
public:
    DeferredReply() = default;  // empty: complete() does nothing
    explicit DeferredReply(std::shared_ptr<ReplySink> sink);
    void complete(ReplyWriter write_reply) const;
    explicit operator bool() const { return state_ != nullptr; }

private:
    struct State;
    std::shared_ptr<State> state_;
};

// Implemented by whatever runs commands for a client (a connection): suspends
// the client until the returned sink is delivered to. Called on its thread.
class ClientSuspender {
public:
    virtual ~ClientSuspender() = default;
    virtual std::shared_ptr<ReplySink> suspend() = 0;
};

class Registry;

// What every command handler sees: the keyspace, the configuration, its
// client, the reply writer. None of the server's services (command/
// server.hpp): a handler that needs some names them (With below).
struct Context {
    const Registry& registry;
    store::Keyspace& keyspace;
    const core::Config& config;
    // What CONFIG SET changes while the server runs (the rest of `config`
    // is fixed at start).
    core::RuntimeSettings& settings;
    ClientState& client;
    WorkerStats& stats;
    resp::Writer& out;
    ClientSuspender* suspender = nullptr;  // null: this context cannot defer replies
    // Where commands slower than --slowlog-log-slower-than are recorded
    // (slowlog.hpp); null: nowhere (SLOWLOG then shows an empty log).
    Slowlog* slowlog = nullptr;
    // Commands that would wait for something (WAIT) answer at once instead:
    // inside EXEC, as Redis's CLIENT_DENY_BLOCKING.
    bool deny_blocking = false;

    // See "Deferred replies" above. Empty if the context has no suspender.
    DeferredReply defer_reply() const {
        return suspender != nullptr ? DeferredReply(suspender->suspend()) : DeferredReply();
    }
};

// What the connection builds for each batch and dispatch() runs commands
// with: the Context and every service of the server. Only dispatch, the
// checks before a command and EXEC (which dispatches its queue) see it
// whole; handlers get a Context or a With<...>.
struct DispatchContext : Context {
    DispatchContext(const Registry& registry_, store::Keyspace& keyspace_,
                    const core::Config& config_, core::RuntimeSettings& settings_, Services server_,
                    ClientState& client_, WorkerStats& stats_, resp::Writer& out_,
                    ClientSuspender* suspender_ = nullptr, Slowlog* slowlog_ = nullptr)
        : Context{registry_, keyspace_, config_,    settings_, client_,
                  stats_,    out_,      suspender_, slowlog_},
          server(server_) {}

    Services server;
};

// The services a handler may name, one each: With<uses::Clients, ...>
// gives it `ctx.server.clients` and nothing else of the server.
namespace uses {
struct Clients {
    explicit Clients(const Services& s) : clients(s.clients) {}
    ClientDirectory& clients;
};
struct Stats {
    explicit Stats(const Services& s) : stats(s.stats) {}
    ServerStats& stats;
};
struct Persistence {
    explicit Persistence(const Services& s) : persistence(s.persistence) {}
    command::Persistence& persistence;
};
struct Shutdown {
    explicit Shutdown(const Services& s) : shutdown(s.shutdown) {}
    command::Shutdown& shutdown;
};
struct Replication {
    explicit Replication(const Services& s) : replication(s.replication) {}
    command::Replication& replication;
};
struct Gate {
    explicit Gate(const Services& s) : gate(s.gate) {}
    ReplicaGate& gate;
};
struct PubSub {
    explicit PubSub(const Services& s) : pubsub(s.pubsub) {}
    command::PubSub& pubsub;
};
struct Migration {
    explicit Migration(const Services& s) : migration(s.migration) {}
    command::Migration& migration;
};
struct Cluster {
    explicit Cluster(const Services& s) : cluster(s.cluster) {}
    cluster::ClusterState& cluster;
};
}  // namespace uses

// A handler's view of the server: its Context and exactly the services it
// names. `void cmd_role(With<uses::Replication>& ctx, Args argv)` may use
// ctx.server.replication; naming anything else of the server does not
// compile. Registry::register_handler builds the view from the
// DispatchContext per call: a few references copied, no allocation.
template <class... Uses>
struct With : Context {
    struct Server : Uses... {
        explicit Server(const Services& services) : Uses(services)... {}
    };
    explicit With(const DispatchContext& ctx) : Context(ctx), server(ctx.server) {}

    Server server;
};

}  // namespace bloomery::command

namespace bloomery::command {
// One CLIENT LIST line (without the trailing newline) for a client. Buffer
// fields come from the sizes its connection published: qbuf = bytes received
// and not yet run, qbuf-free = the rest of the query buffer's capacity, obl =
// reply bytes not yet written, omem = the output buffer's capacity, tot-mem =
// both capacities.
std::string format_client_line(const ClientState& client, std::int64_t now_ms);
}  // namespace bloomery::command
