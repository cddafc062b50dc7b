#pragma once
// A node's lease in etcd: the key /bloomery/<cluster>/alive/<node id>, held
// under a lease of the node timeout and renewed three times per lease. The
// key says the node is up (every node's map marks a node without one
// "fail"); a primary's right to acknowledge writes rests on it.
//
// Fencing: deadline() is the instant (this machine's steady clock) until
// which the lease cannot have lapsed in etcd: the time the last renewal
// that etcd answered was sent, plus the lease's time to live, less a margin
// for the two clocks' rates drifting apart (kLeaseDriftMargin of the time
// to live, at least kLeaseMinimumMargin). etcd starts a lease's countdown
// again only when it receives the renewal, after it was sent, so etcd's
// own expiry is never earlier. A node that cannot renew (etcd unreachable,
// the process paused) passes its deadline before any other node can see
// its key gone.
//
// Threads: renewals run on a thread of their own; every member may be
// called from any thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "bloomery/cluster/etcd.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::cluster {

inline constexpr double kLeaseDriftMargin = 0.1;
inline constexpr std::chrono::milliseconds kLeaseMinimumMargin{100};

class EtcdLiveness {
public:
    using Clock = std::chrono::steady_clock;

    // `node_timeout` becomes the lease's time to live in whole seconds
    // (rounded up; etcd may grant more, which is then used).
    EtcdLiveness(std::unique_ptr<EtcdClient> client, std::string_view cluster_name,
                 const std::string& node_id, std::chrono::milliseconds node_timeout);
    ~EtcdLiveness();
    EtcdLiveness(const EtcdLiveness&) = delete;
    EtcdLiveness& operator=(const EtcdLiveness&) = delete;

    // Called on the renewing thread (and in start()) with each new
    // deadline, and whether it comes from a new lease (the old one lapsed:
    // the node was cut off longer than its time to live). Set before start().
    using Listener = std::function<void(Clock::time_point deadline, bool new_lease)>;
    void set_listener(Listener listener) { listener_ = std::move(listener); }

    // Takes a lease, writes the key under it and starts renewing; an error
    // (nothing started) if etcd cannot be reached.
    core::Status start();
    // Stops renewing. With Release::revoke the lease ends at once (the node
    // is seen down at once); with Release::keep it lapses by itself.
    enum class Release { revoke, keep };
    void stop(Release release = Release::revoke);

    Clock::time_point deadline() const {
        return Clock::time_point(Clock::duration(deadline_.load(std::memory_order_acquire)));
    }
    bool held(Clock::time_point now = Clock::now()) const { return now < deadline(); }
    std::uint64_t renewals() const { return renewals_.load(std::memory_order_relaxed); }
    std::uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }

    static std::string alive_prefix(std::string_view cluster_name);

private:
    core::Status take_lease();
    void renew_loop(const std::stop_token& stop);
    void extend(Clock::time_point sent, std::int64_t ttl_seconds, bool new_lease);

    std::unique_ptr<EtcdClient> client_;
    const std::string key_;
    const std::int64_t ttl_seconds_;
    std::int64_t lease_ = 0;        // the renewing thread's, once started
    std::int64_t granted_ttl_ = 0;  // seconds
    std::atomic<Clock::rep> deadline_{0};
    std::atomic<std::uint64_t> renewals_{0};
    std::atomic<std::uint64_t> failures_{0};
    Listener listener_;
    std::jthread renewer_;
};

}  // namespace bloomery::cluster
