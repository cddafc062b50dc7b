#pragma once
// The cluster map kept in etcd: map_codec.hpp's document under the key
// "/bloomery/<cluster name>/map". Every change a node makes is one etcd
// transaction that compares the map's revision it read: of two nodes
// changing the map at once, one succeeds and the other reads the new map
// and applies its edit there (with its checks: a slot the first node took
// is busy for the second), so no two nodes can both be given a slot. Every
// change any node makes reaches every node through a watch of that key,
// and is published to its ClusterState in revision order.
//
// A node the map does not name serves a map of itself alone (as a Redis
// node nobody has met): its registration, the key "nodes/<id>", a map
// document naming it alone, with what was done to it before it was met
// (ADDSLOTS, SET-CONFIG-EPOCH: what redis-cli --cluster create does first).
// Registrations also tell CLUSTER MEET which node is at an address. MEET
// (meet()) makes both nodes members in one transaction, founding the map
// when there is none, and takes each one's registered slots and epoch into
// it; RESET (leave()) takes this node out of the map.
//
// With Liveness::track, the nodes whose key under alive/ (etcd_liveness.hpp)
// is missing are marked failed in the view published, as Redis marks a node
// it cannot reach "fail"; the same watch (of the cluster's whole prefix)
// brings both.
//
// Threads: commits run one at a time on a thread of their own, so callers
// never wait for etcd; the watch runs on another. start() and stop() are
// called by the owner, from one thread.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "bloomery/cluster/cluster_state.hpp"
#include "bloomery/cluster/etcd.hpp"

namespace bloomery::cluster {

class EtcdMapBackend final : public MapBackend {
public:
    enum class Liveness { ignore, track };
    EtcdMapBackend(std::unique_ptr<EtcdClient> client, std::string_view cluster_name, MapNode self,
                   ClusterState& state, Liveness liveness = Liveness::ignore);
    ~EtcdMapBackend() override;
    EtcdMapBackend(const EtcdMapBackend&) = delete;
    EtcdMapBackend& operator=(const EtcdMapBackend&) = delete;

    // Reads the map, publishes this node's view of it and starts the
    // commit and watch threads; an error (nothing started) if etcd cannot
    // be read or holds a map that is not one.
    core::Status start();
    // Ends both threads; queued commits are answered with an error.
    void stop();

    void commit(MapEdit edit, ChangeDone done) override;
    void meet(std::string host, std::uint16_t port, ChangeDone done) override;
    void leave(ChangeDone done) override;
    // Adds this node to the stored map (founding it if there is none).
    void join(ChangeDone done);
    // Failover: this replica takes `primary`'s place (take_over() of
    // cluster_membership.hpp), in a transaction that also requires the
    // primary's liveness key to be gone, so a primary still holding its
    // lease is never replaced.
    // With Lease::ignore (CLUSTER FAILOVER), whether the primary is up or
    // not: the caller made sure it handed over, or accepts the risk.
    enum class Lease { must_be_gone, ignore };
    void take_over(std::string primary, Lease lease, ChangeDone done);
    // Called on the watching thread with every change of a key under
    // "handover/" (CLUSTER FAILOVER's handshake), after the key's name
    // past that prefix and whether it was put (false: deleted). Set before
    // start(); keep it short.
    using HandoverListener = std::function<void(const std::string& name, bool put)>;
    void set_handover_listener(HandoverListener listener) {
        handover_listener_ = std::move(listener);
    }
    static std::string handover_prefix(std::string_view cluster_name) {
        return cluster_prefix(cluster_name) + "handover/";
    }
    // Reads the map again and publishes it (after this node's lease was
    // renewed from lapsed: what changed meanwhile is seen before writes).
    core::Status refresh() { return reload(); }

    // The etcd revision of the map last published (0: none yet).
    std::int64_t published_revision() const;
    static std::string map_key(std::string_view cluster_name);
    static std::string cluster_prefix(std::string_view cluster_name);

private:
    struct Request {
        enum class Kind { edit, join, meet, leave, enroll, take_over };
        Kind kind = Kind::edit;
        MapEdit edit;
        ChangeDone done;
        std::string host;  // meet; take_over: the primary's id
        std::uint16_t port = 0;
        bool forced = false;  // take_over with Lease::ignore
    };
    // What a change read: the map and a registration, each with its
    // revision (0: absent), at one revision of the store.
    struct Stored {
        std::string document;
        std::int64_t revision = 0;
    };
    static Request request_of(Request::Kind kind, ChangeDone done);
    // Waits a moment before a change is tried again; false when stopping.
    bool pause_unless_stopping();
    void enqueue(Request request);
    void commit_loop(const std::stop_token& stop);
    core::Status run(const Request& request);
    // One try of each kind: true when committed, false when another change
    // won the race (read again), an error otherwise (etcd_map_changes.cpp).
    core::Result<bool> try_edit(const MapEdit& edit);
    core::Result<bool> try_meet(const std::string& host, std::uint16_t port);
    core::Result<bool> try_leave();
    core::Result<bool> try_enroll();
    core::Result<bool> try_take_over(const std::string& primary, bool forced);
    core::Result<std::vector<Stored>> read_keys(const std::vector<std::string>& keys);
    core::Result<std::string> registered_at(const std::string& host, std::uint16_t port);
    // This node's view from a registration (empty: nothing done to it yet).
    core::Result<ClusterMap> lone_view(std::string_view registration) const;
    std::string registration_key(std::string_view id) const;
    static core::Error store_error(const std::string& what);
    // Puts `writes` if `reads` are unchanged; publishes what it wrote.
    core::Result<bool> commit_txn(const std::vector<std::pair<std::string, Stored>>& reads,
                                  std::vector<EtcdOp> writes);
    void watch_loop(const std::stop_token& stop);
    core::Status reload();
    void on_events(const std::vector<EtcdEvent>& events, std::int64_t revision);
    // Takes `document` (empty: no map) as the map at `revision`, unless a
    // later one was taken already, and publishes the view.
    void publish(std::string_view document, std::int64_t revision);
    void publish_registration(std::string_view document, std::int64_t revision);
    // Publishes the view of document_ with alive_ (mutex_ held).
    void republish();
    ClusterMap lone() const;  // this node's registered view (mutex_ held)

    std::unique_ptr<EtcdClient> client_;
    const std::string prefix_;
    const std::string key_;
    const std::string alive_prefix_;
    const std::string nodes_prefix_;
    const std::string own_key_;  // this node's registration
    const std::string handover_prefix_;
    HandoverListener handover_listener_;
    const Liveness liveness_;
    const MapNode self_;
    ClusterState& state_;

    mutable std::mutex mutex_;  // guards what follows, to stopping_
    std::string document_;      // the map last taken
    std::string registration_;  // this node's, last taken
    std::int64_t registration_revision_ = 0;
    std::set<std::string, std::less<>> alive_;  // ids of the nodes with an alive/ key
    std::int64_t watched_revision_ = 0;         // the watch resumes after it
    std::condition_variable_any wake_;
    std::deque<Request> queue_;
    std::int64_t published_revision_ = 0;
    bool stopping_ = false;
    std::jthread committer_;
    std::jthread watcher_;
};

}  // namespace bloomery::cluster
