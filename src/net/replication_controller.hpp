#pragma once
// Replication as the running server sees it (net/replication.hpp has the
// two sides themselves): which primary this server follows (REPLICAOF,
// --replicaof at start) and the links still stopping in the background, the
// flags that answer data commands on a replica, INFO replication and ROLE
// for both sides, and WAIT (the primary's ReplicationSource counts the
// acknowledgements). Implements the command layer's Replication; gate() is
// its ReplicaGate.

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include "bloomery/command/server.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/persist/manager.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::net {

class ReplicaLink;
class ReplicationSource;

class ReplicationController final : public command::Replication {
public:
    // WAIT's timers run on `timers` (the main thread's io_context). Links
    // to a primary are TLS with `link_tls` (--tls-replication; null: plain
    // TCP), which must outlive this controller.
    ReplicationController(const core::Config& config, store::Keyspace& keyspace,
                          persist::Manager& persistence, ReplicationSource& source,
                          boost::asio::io_context& timers, boost::asio::ssl::context* link_tls);
    ~ReplicationController() override;  // stop_links()
    ReplicationController(const ReplicationController&) = delete;
    ReplicationController& operator=(const ReplicationController&) = delete;

    // --replicaof: follows the primary it names, unless that is this server.
    // Once, when the server starts serving.
    void start();
    // Stops the link and every link still stopping: at exit, before the
    // final save (a link applies the primary's stream). Idempotent.
    void stop_links();
    // The kReplication* flags data commands are answered by (written by the
    // links and here, read before every command).
    command::ReplicaGate& gate() { return gate_; }
    // False while this server is a replica without a first copy of its
    // primary (/readyz). Thread-safe.
    bool synced() const {
        return (gate_.replication_flags.load(std::memory_order_relaxed) &
                command::kReplicationUnsynced) == 0;
    }

    // command::Replication; any thread.
    command::ReplicationInfo replication() override;
    void replicaof(std::string_view host, std::uint16_t port,
                   std::function<void(std::string)> done) override;
    void wait_for_replicas(std::int64_t count, std::int64_t timeout_ms,
                           std::function<void(std::int64_t)> done) override;

private:
    // Follows HOST:PORT (a new link; the one it replaces stops on the new
    // link's thread).
    void follow(std::string_view host, std::uint16_t port);
    // REPLICAOF NO ONE: the link stops on a thread of its own, then this
    // server is promoted and `done` answers.
    void promote(std::function<void(std::string)> done);

    const core::Config& config_;
    store::Keyspace& keyspace_;
    persist::Manager& persistence_;
    ReplicationSource& source_;
    boost::asio::io_context& timers_;
    boost::asio::ssl::context* link_tls_;
    command::ReplicaGate gate_;
    // Guards the three below. INFO, ROLE, CONFIG GET and /metrics take it
    // on any thread, so nothing waits for a link to stop while holding it.
    std::mutex link_mutex_;
    std::unique_ptr<ReplicaLink> link_;  // set while this server is a replica
    // Ready once the links REPLICAOF NO ONE took away have stopped (invalid:
    // none is stopping); a link started after waits for it on its thread.
    std::shared_future<void> links_stopped_;
    std::vector<std::thread> link_reapers_;  // REPLICAOF NO ONE's, joined at exit
};

}  // namespace bloomery::net
