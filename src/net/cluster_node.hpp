#pragma once
// A node of a cluster whose map is kept in etcd (--cluster-etcd): its id,
// kept in --dir (--cluster-config-file), the map backend and the liveness
// lease in etcd (cluster/etcd_map_backend.hpp, etcd_liveness.hpp), and the
// role the map gives it: a node the map makes a replica follows its
// primary's address, one it makes a primary takes writes
// (ReplicationController, as REPLICAOF does).
//
// etcd need not be up when the node starts: it serves the map of itself
// alone, which serves no slot, and reaches etcd from a thread of its own,
// trying again every second until it can.
//
// Threads: start() and stop() from the main thread; the role follows the
// map on the thread that publishes it.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "bloomery/cluster/cluster_state.hpp"
#include "bloomery/core/config.hpp"

namespace bloomery::cluster {
class EtcdMapBackend;
class EtcdLiveness;
}  // namespace bloomery::cluster

namespace bloomery::command {
class Replication;
}

namespace bloomery::net {

class ClusterFailover;

// This node's id, read from --cluster-config-file in --dir, or made (40
// random hex digits) and written there on the first start. Throws
// std::runtime_error naming the file when it can be neither read nor made.
std::string cluster_node_id(const core::Config& config);

class ClusterNode {
public:
    ClusterNode(const core::Config& config, cluster::ClusterState& state,
                command::Replication& replication);
    ~ClusterNode();  // stop()
    ClusterNode(const ClusterNode&) = delete;
    ClusterNode& operator=(const ClusterNode&) = delete;

    // Reads (or makes) the node id, publishes this node alone, and starts
    // reaching etcd. Throws std::runtime_error on a bad id file or etcd
    // settings.
    void start();
    // Revokes the liveness lease (the node is seen down at once) and stops
    // the backend. Idempotent.
    void stop();

    // For /metrics and INFO: whether the map in etcd has been read, and
    // the liveness lease's renewals and failures.
    bool connected() const;
    std::uint64_t lease_renewals() const;
    std::uint64_t lease_failures() const;
    std::uint64_t role_changes() const;
    std::uint64_t failovers_won() const;

private:
    void connect_loop(const std::stop_token& stop);
    // Calls `attempt` every second until it succeeds (true) or `stop` (false).
    template <class Attempt>
    bool keep_trying(const std::stop_token& stop, Attempt attempt);
    void follow(const cluster::ClusterMap& map);
    void on_lease(std::chrono::steady_clock::time_point deadline, bool new_lease);

    const core::Config& config_;
    cluster::ClusterState& state_;
    command::Replication& replication_;
    cluster::MapNode self_;
    std::unique_ptr<cluster::EtcdMapBackend> backend_;
    std::unique_ptr<cluster::EtcdLiveness> liveness_;
    std::unique_ptr<ClusterFailover> failover_;
    bool map_fresh_ = false;            // the liveness thread's
    std::atomic<bool> started_{false};  // the parts above exist (start() made them)
    mutable std::mutex mutex_;          // guards what follows
    std::condition_variable_any wake_;
    bool connected_ = false;
    std::string following_;  // "host:port" of the primary followed; empty: a primary
    std::uint64_t role_changes_ = 0;
    std::jthread connector_;
};

}  // namespace bloomery::net
