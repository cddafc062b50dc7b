#pragma once
// What a command handler sees: the keyspace, the configuration, its client's
// state, the reply writer and the server's hooks. Nothing here knows of Asio;
// the network layer implements ServerHooks.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "bloomery/net/config.hpp"
#include "bloomery/resp/writer.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::command {

using Args = std::span<const std::string_view>;

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
    std::atomic<std::uint64_t> error_replies{0};

    static void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by = 1) {
        counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
    }
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
    bool close_after_reply = false;  // QUIT, SHUTDOWN; owner thread only

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

enum class ShutdownMode { default_save, save, nosave };

struct PersistenceInfo {
    bool enabled = false;  // a save spec is configured
    bool bgsave_in_progress = false;
    std::uint64_t changes_since_last_save = 0;
    std::int64_t last_save_time = 0;  // unix seconds
    bool last_bgsave_ok = true;
    std::int64_t last_bgsave_time_sec = -1;
    std::int64_t current_bgsave_time_sec = -1;
    std::uint64_t saves = 0;
    std::uint64_t last_save_bytes = 0;
    std::uint64_t last_save_keys = 0;
    std::string last_error;
    bool loading = false;
    std::uint64_t loaded_keys = 0;
    double load_seconds = 0;
};

struct StatsTotals {
    std::uint64_t commands = 0;
    std::uint64_t connections_received = 0;
    std::uint64_t rejected_connections = 0;
    std::uint64_t changes = 0;
    std::uint64_t keyspace_hits = 0;
    std::uint64_t keyspace_misses = 0;
    std::uint64_t expired_keys = 0;
    std::uint64_t protocol_errors = 0;
    std::uint64_t net_input_bytes = 0;
    std::uint64_t net_output_bytes = 0;
    std::uint64_t error_replies = 0;
    double instantaneous_ops_per_sec = 0;
};

// Implemented by the network layer (and by fakes in unit tests).
class ServerHooks {
public:
    virtual ~ServerHooks() = default;
    virtual std::size_t connected_clients() = 0;
    // One line per client in CLIENT LIST format; only the clients whose id is
    // in `ids` unless it is empty.
    virtual std::string client_list(std::span<const std::int64_t> ids) = 0;
    // Asks the connection with this id (or "ip:port") to close; false if none.
    virtual bool kill_client(std::int64_t id) = 0;
    virtual bool kill_client(std::string_view address) = 0;
    virtual StatsTotals stats() = 0;
    virtual void reset_stats() = 0;
    // Persistence. save() blocks until durable; bgsave() returns at once.
    virtual bool save(std::string& error) = 0;
    virtual bool bgsave(std::string& error) = 0;
    virtual PersistenceInfo persistence() = 0;
    // Starts a clean shutdown. Returns false with error if a required final
    // save failed (the server then keeps running, as Redis does).
    virtual bool shutdown(ShutdownMode mode, std::string& error) = 0;
    virtual std::int64_t start_time_ms() = 0;
    virtual unsigned worker_threads() = 0;
};

class Registry;

struct Context {
    const Registry& registry;
    store::Keyspace& keyspace;
    const net::Config& config;
    ServerHooks& server;
    ClientState& client;
    WorkerStats& stats;
    resp::Writer& out;
};

}  // namespace bloomery::command

namespace bloomery::command {
// One CLIENT LIST line (without the trailing newline) for a client, with its
// query/output buffer sizes supplied by the network layer.
std::string format_client_line(const ClientState& client, std::int64_t now_ms,
                               std::size_t query_buffer_bytes, std::size_t output_buffer_bytes);
}  // namespace bloomery::command
