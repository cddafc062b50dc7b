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
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "bloomery/cluster/cluster_state.hpp"
#include "bloomery/cluster/etcd_map_backend.hpp"
#include "bloomery/core/config.hpp"

namespace bloomery::command {
class Replication;
}

namespace bloomery::net {

class ClusterFailover {
public:
    using Clock = std::chrono::steady_clock;

    ClusterFailover(const core::Config& config, cluster::ClusterState& state,
                    command::Replication& replication, cluster::EtcdMapBackend& backend,
                    std::unique_ptr<cluster::EtcdClient> client, std::string self_id);
    ~ClusterFailover();  // stop()
    ClusterFailover(const ClusterFailover&) = delete;
    ClusterFailover& operator=(const ClusterFailover&) = delete;

    void start();
    void stop();

    // CLUSTER FAILOVER on this replica; `done` once it is over. With the
    // handshake, the primary stops taking writes (the handover keys under
    // /bloomery/<cluster>/handover/), posts its offset, this replica applies
    // up to it and takes over; no write the primary acknowledged is lost.
    void manual(cluster::ClusterState::FailoverMode mode, cluster::ChangeDone done);
    // The backend's handover listener: a replica asks this node to hand over.
    void on_handover_event(const std::string& name, bool put);
    // Whether this primary stopped taking writes for a handover in progress
    // (the lease's renewals must not lift it).
    bool handing_over() const { return handing_over_.load(std::memory_order_acquire); }
    // The lease's deadline, to lift the fence with when a handover ends
    // without a takeover.
    void set_lease_deadline(std::function<Clock::time_point()> deadline) {
        lease_deadline_ = std::move(deadline);
    }
    // Failovers this node won, and elections it stood in.
    std::uint64_t won() const { return won_.load(std::memory_order_relaxed); }
    std::uint64_t elections() const { return elections_.load(std::memory_order_relaxed); }

private:
    void loop(const std::stop_token& stop);
    // One election for the failed primary at `primary` of `map`: true when
    // this node stood and another won or nobody could (wait before the next).
    void elect(const cluster::ClusterMap& map, std::uint16_t primary, const std::stop_token& stop);
    core::Status run_manual(cluster::ClusterState::FailoverMode mode, const std::stop_token& stop);
    core::Status hand_over_and_take(const std::string& primary, const std::stop_token& stop);
    core::Status take_over(const std::string& primary, cluster::EtcdMapBackend::Lease lease);
    // The primary's side: stop writes, post the offset; lift the fence when
    // no takeover came in time.
    void hand_over(const std::stop_token& stop);
    void end_handover_if_late();

    const core::Config& config_;
    cluster::ClusterState& state_;
    command::Replication& replication_;
    cluster::EtcdMapBackend& backend_;
    std::unique_ptr<cluster::EtcdClient> client_;
    const std::string self_id_;
    const std::string election_prefix_;
    const std::string handover_prefix_;
    std::string last_primary_;  // the loop thread's: the primary last elected for
    Clock::time_point next_try_{};
    std::function<Clock::time_point()> lease_deadline_;
    std::mutex mutex_;  // guards manual_ and handover_asked_
    std::condition_variable_any wake_;
    struct Manual {
        cluster::ClusterState::FailoverMode mode;
        cluster::ChangeDone done;
    };
    std::deque<Manual> manual_;
    bool handover_asked_ = false;
    std::atomic<bool> handing_over_{false};
    Clock::time_point handover_ends_{};  // the loop thread's
    std::atomic<std::uint64_t> won_{0};
    std::atomic<std::uint64_t> elections_{0};
    std::jthread thread_;
};

}  // namespace bloomery::net
