#pragma once
// The cluster map a node serves from (cluster_map.hpp), and the one way to
// change it. Every command in cluster mode reads the map; a change (CLUSTER
// SETSLOT, ADDSLOTS, ...) is an edit from the current map to the next,
// committed by the backend that keeps the map: this node's memory for the
// static map of --cluster-slots, etcd for a cluster that keeps its topology
// there. Readers see either the map before a change or the one after,
// never a mix.
//
// Thread safety: every member may be called from any thread. view() takes
// no lock and writes no shared memory while the map is unchanged (one
// atomic load per call); after a change, each thread takes the lock once.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "bloomery/cluster/cluster_map.hpp"
#include "bloomery/cluster/write_holds.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::cluster {

// An edit: the next map from the current one, or the error to answer (Redis's
// text, "ERR ..." included) with nothing changed.
using MapEdit = std::function<core::Result<ClusterMap>(const ClusterMap&)>;
// Called once with the outcome of a change, from any thread.
using ChangeDone = std::function<void(core::Status)>;

// Where changes are committed when the map is kept outside this node.
class MapBackend {
public:
    virtual ~MapBackend() = default;
    // Applies `edit` to the map as the backend keeps it and, once that is
    // committed, publishes the result to `state` and calls `done`; or calls
    // `done` with the edit's error or the backend's.
    virtual void commit(MapEdit edit, ChangeDone done) = 0;
    // CLUSTER MEET: this node and the node at host:port become members of
    // one map.
    virtual void meet(std::string host, std::uint16_t port, ChangeDone done) = 0;
    // CLUSTER RESET: this node leaves the map and forgets its own slots.
    virtual void leave(ChangeDone done) = 0;
};

// What ClusterState answers MEET and RESET with when there is no backend.
inline constexpr std::string_view kNeedsBackend =
    "ERR this node serves the static map of --cluster-slots; a cluster whose nodes meet, "
    "leave and fail over keeps its map in etcd (--cluster-etcd)";

class ClusterState {
public:
    // A node alone, with no id and no slot: outside cluster mode.
    ClusterState();
    explicit ClusterState(ClusterMap initial);
    ClusterState(const ClusterState&) = delete;
    ClusterState& operator=(const ClusterState&) = delete;

    // The map last published. The reference stays valid on the calling
    // thread until that thread calls view() again (on any ClusterState).
    const ClusterMap& view() const;
    // The map last published, for holding longer than view() allows.
    std::shared_ptr<const ClusterMap> snapshot() const;
    // Replaces the map; readers see it from their next view().
    void publish(ClusterMap next);
    // Increases with every publish (unique across all ClusterStates).
    std::uint64_t version() const { return version_.load(std::memory_order_acquire); }

    // Commits `edit` through the backend, if one is set, else on this
    // node's map at once; `done` says how it went.
    void change(MapEdit edit, ChangeDone done);
    // CLUSTER FAILOVER on a replica: handshake (the primary stops taking
    // writes, this replica catches up, then takes over), force or takeover
    // (at once). Run by the handler the node sets (without one:
    // kNeedsBackend).
    enum class FailoverMode { handshake, force, takeover };
    using FailoverHandler = std::function<void(FailoverMode, ChangeDone)>;
    void set_failover_handler(FailoverHandler handler) { failover_handler_ = std::move(handler); }
    void failover(FailoverMode mode, ChangeDone done);

    // MEET and RESET through the backend (without one: kNeedsBackend).
    void meet(std::string host, std::uint16_t port, ChangeDone done);
    void leave(ChangeDone done);
    // Called with every map published from here on, on the publishing
    // thread, after readers can see it (set before the server takes
    // commands; the server follows the primary the map names).
    using Listener = std::function<void(const ClusterMap&)>;
    void set_listener(Listener listener) { listener_ = std::move(listener); }

    // Fencing: a primary whose right to take writes rests on a lease (a
    // map kept in etcd) takes them only until the lease's deadline
    // (cluster/etcd_liveness.hpp); writes routed here after it answer
    // -CLUSTERDOWN. Unfenced (the static map) by default. One relaxed load
    // while unfenced; one clock read more while fenced.
    bool writes_allowed() const {
        const std::int64_t until = writable_until_.load(std::memory_order_acquire);
        return until == kUnfenced ||
               std::chrono::steady_clock::now().time_since_epoch().count() < until;
    }
    void set_writable_until(std::chrono::steady_clock::time_point until) {
        writable_until_.store(until.time_since_epoch().count(), std::memory_order_release);
    }

    // Sets the backend changes go through (null: this node's memory). Call
    // before the server takes commands.
    void set_backend(MapBackend* backend) { backend_ = backend; }
    // Whether changes go through a backend (and may complete later).
    bool has_backend() const { return backend_ != nullptr; }

    // Keys whose writes wait while MIGRATE sends them (write_holds.hpp).
    WriteHolds& write_holds() { return write_holds_; }

private:
    mutable std::mutex mutex_;  // guards current_, orders publishes and local changes
    std::shared_ptr<const ClusterMap> current_;
    std::atomic<std::uint64_t> version_{0};
    MapBackend* backend_ = nullptr;
    Listener listener_;
    FailoverHandler failover_handler_;
    static constexpr std::int64_t kUnfenced = std::numeric_limits<std::int64_t>::max();
    std::atomic<std::int64_t> writable_until_{kUnfenced};  // steady clock ticks
    WriteHolds write_holds_;
};

}  // namespace bloomery::cluster
