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

#include "bloomery/core/config.hpp"
#include "bloomery/core/hooks.hpp"
#include "bloomery/resp/writer.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::command {

using Args = std::span<const std::string_view>;
class AclUser;

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
    // Access control (acl.hpp). `user`: whom AUTH or HELLO AUTH made this
    // client, null for the default user; set by the owner thread, read by
    // CLIENT LIST from others (users live as long as the server).
    std::atomic<const AclUser*> user{nullptr};
    bool authenticated = false;  // AUTH succeeded at least once; owner thread only

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

class Registry;

struct Context {
    const Registry& registry;
    store::Keyspace& keyspace;
    const core::Config& config;
    core::ServerHooks& server;
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
