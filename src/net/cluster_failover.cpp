#include "cluster_failover.hpp"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "bloomery/cluster/etcd.hpp"
#include "bloomery/cluster/etcd_map_backend.hpp"
#include "bloomery/command/server.hpp"
#include "bloomery/core/parse_int64.hpp"

namespace bloomery::net {
namespace {

constexpr auto kTick = std::chrono::milliseconds(100);
// How long candidates wait for every replica still up to stand.
constexpr auto kElectionWindow = std::chrono::milliseconds(500);
constexpr auto kPoll = std::chrono::milliseconds(25);

void pause(const std::stop_token& stop, std::chrono::milliseconds period) {
    std::mutex mutex;
    std::unique_lock lock(mutex);
    std::condition_variable_any().wait_for(lock, stop, period, [] { return false; });
}

}  // namespace

ClusterFailover::ClusterFailover(const core::Config& config, cluster::ClusterState& state,
                                 command::Replication& replication,
                                 cluster::EtcdMapBackend& backend,
                                 std::unique_ptr<cluster::EtcdClient> client, std::string self_id)
    : config_(config),
      state_(state),
      replication_(replication),
      backend_(backend),
      client_(std::move(client)),
      self_id_(std::move(self_id)),
      election_prefix_(cluster::EtcdMapBackend::cluster_prefix(config.cluster_name) + "election/") {
}

ClusterFailover::~ClusterFailover() {
    stop();
}

void ClusterFailover::start() {
    thread_ = std::jthread([this](const std::stop_token& stop) { loop(stop); });
}

void ClusterFailover::stop() {
    if (!thread_.joinable()) return;
    thread_.request_stop();
    client_->cancel();
    thread_.join();
}

void ClusterFailover::loop(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
        pause(stop, kTick);
        const std::shared_ptr<const cluster::ClusterMap> map = state_.snapshot();
        if (map->self().is_primary()) continue;
        const std::uint16_t primary = map->primary_of(map->self_index());
        if (primary == cluster::kNoNode || !map->node(primary).failed) continue;
        const std::string& id = map->node(primary).id;
        if (id == last_primary_ && Clock::now() < next_try_) continue;
        last_primary_ = id;
        elect(*map, primary, stop);
    }
}

void ClusterFailover::elect(const cluster::ClusterMap& map, std::uint16_t primary,
                            const std::stop_token& stop) {
    const std::string primary_id = map.node(primary).id;
    const std::string prefix = election_prefix_ + primary_id + "/";
    // Tried again after a node timeout if nothing changed meanwhile (the
    // winner may have died too).
    next_try_ = Clock::now() + std::chrono::milliseconds(config_.cluster_node_timeout_ms);
    const command::ReplicationInfo info = replication_.replication();
    // A replica that never had a copy of the primary's stream does not stand.
    if (!info.replid.empty() && info.offset > 0) {
        if (!client_->put(prefix + self_id_, std::to_string(info.offset))) return;
        elections_.fetch_add(1, std::memory_order_relaxed);
    }
    std::set<std::string> voters;
    for (const std::uint16_t replica : map.replicas_of(primary)) {
        if (!map.node(replica).failed) voters.insert(map.node(replica).id);
    }
    std::map<std::string, std::uint64_t> offsets;
    const Clock::time_point window = Clock::now() + kElectionWindow;
    while (!stop.stop_requested()) {
        const core::Result<cluster::EtcdRange> stood = client_->get_prefix(prefix);
        if (!stood) return;
        offsets.clear();
        for (const cluster::EtcdKeyValue& kv : stood->kvs) {
            const std::string id = kv.key.substr(prefix.size());
            std::uint64_t offset = 0;
            if (voters.contains(id) && core::parse_digits(kv.value, 19, offset)) {
                offsets[id] = offset;
            }
        }
        if (offsets.size() == voters.size() || Clock::now() >= window) break;
        pause(stop, kPoll);
    }
    const auto best = std::max_element(offsets.begin(), offsets.end(), [](auto& a, auto& b) {
        return a.second < b.second || (a.second == b.second && a.first > b.first);
    });
    if (best == offsets.end() || best->first != self_id_) return;
    std::promise<core::Status> outcome;
    backend_.take_over(primary_id,
                       [&outcome](core::Status status) { outcome.set_value(std::move(status)); });
    const core::Status taken = outcome.get_future().get();
    if (!taken) {
        spdlog::warn("cluster: failover of {} not done: {}", primary_id, taken.error());
        next_try_ = Clock::now() + kTick * 10;
        return;
    }
    won_.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("cluster: primary {} failed; this node took its slots over at offset {}",
                 primary_id, best->second);
    cluster::EtcdTxn cleanup;
    cleanup.success.push_back(cluster::EtcdOp::erase_prefix(prefix));
    (void)client_->txn(cleanup);
}

}  // namespace bloomery::net
