#pragma once
// Failover without a person, for a cluster kept in etcd. A primary's right
// to its slots rests on its liveness lease (cluster/etcd_liveness.hpp); once
// the lease lapses, every node's map marks it failed. Its replicas then
// elect one of themselves through etcd: each that has a copy of the
// primary's stream writes the offset it has applied under
// /bloomery/<cluster>/election/<primary id>/<its id>, and once every replica
// still up has written (or a short window passed), the one with the highest
// offset (ties: the lowest id) takes over in one transaction that also
// requires the primary's liveness key to be absent
// (EtcdMapBackend::take_over). The others, and the old primary when it
// returns, follow it as the map says (ClusterNode). Every write WAIT saw
// acknowledged by a replica still up is on the replica elected.
//
// Threads: one of its own, checking the map ten times a second.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "bloomery/cluster/cluster_state.hpp"
#include "bloomery/core/config.hpp"

namespace bloomery::cluster {
class EtcdClient;
class EtcdMapBackend;
}  // namespace bloomery::cluster

namespace bloomery::command {
class Replication;
}

namespace bloomery::net {

class ClusterFailover {
public:
    ClusterFailover(const core::Config& config, cluster::ClusterState& state,
                    command::Replication& replication, cluster::EtcdMapBackend& backend,
                    std::unique_ptr<cluster::EtcdClient> client, std::string self_id);
    ~ClusterFailover();  // stop()
    ClusterFailover(const ClusterFailover&) = delete;
    ClusterFailover& operator=(const ClusterFailover&) = delete;

    void start();
    void stop();
    // Failovers this node won, and elections it stood in.
    std::uint64_t won() const { return won_.load(std::memory_order_relaxed); }
    std::uint64_t elections() const { return elections_.load(std::memory_order_relaxed); }

private:
    using Clock = std::chrono::steady_clock;
    void loop(const std::stop_token& stop);
    // One election for the failed primary at `primary` of `map`: true when
    // this node stood and another won or nobody could (wait before the next).
    void elect(const cluster::ClusterMap& map, std::uint16_t primary, const std::stop_token& stop);

    const core::Config& config_;
    cluster::ClusterState& state_;
    command::Replication& replication_;
    cluster::EtcdMapBackend& backend_;
    std::unique_ptr<cluster::EtcdClient> client_;
    const std::string self_id_;
    const std::string election_prefix_;
    std::string last_primary_;  // the loop thread's: the primary last elected for
    Clock::time_point next_try_{};
    std::atomic<std::uint64_t> won_{0};
    std::atomic<std::uint64_t> elections_{0};
    std::jthread thread_;
};

}  // namespace bloomery::net
