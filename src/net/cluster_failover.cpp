#include "cluster_failover.hpp"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <optional>
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
// How long CLUSTER FAILOVER's handshake may take before it gives up.
constexpr auto kHandoverTimeout = std::chrono::seconds(5);

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
      election_prefix_(cluster::EtcdMapBackend::cluster_prefix(config.cluster_name) + "election/"),
      handover_prefix_(cluster::EtcdMapBackend::handover_prefix(config.cluster_name)) {}

ClusterFailover::~ClusterFailover() {
    stop();
}

void ClusterFailover::start() {
    thread_ = std::jthread([this](const std::stop_token& stop) { loop(stop); });
}

void ClusterFailover::stop() {
    if (thread_.joinable()) {
        thread_.request_stop();
        client_->cancel();
        thread_.join();
    }
    std::deque<Manual> left;
    {
        std::lock_guard lock(mutex_);
        left.swap(manual_);
    }
    for (Manual& manual : left) manual.done(core::Error{"ERR the server is stopping"});
}

void ClusterFailover::manual(cluster::ClusterState::FailoverMode mode, cluster::ChangeDone done) {
    {
        std::lock_guard lock(mutex_);
        if (thread_.joinable()) {
            manual_.push_back(Manual{mode, std::move(done)});
            wake_.notify_all();
            return;
        }
    }
    done(core::Error{"ERR this node has not reached etcd yet; try again"});
}

void ClusterFailover::on_handover_event(const std::string& name, bool put) {
    if (!put || name != self_id_) return;  // "<primary id>" asks; "<id>/offset" answers
    std::lock_guard lock(mutex_);
    handover_asked_ = true;
    wake_.notify_all();
}

core::Status ClusterFailover::take_over(const std::string& primary,
                                        cluster::EtcdMapBackend::Lease lease) {
    std::promise<core::Status> outcome;
    backend_.take_over(primary, lease,
                       [&outcome](core::Status status) { outcome.set_value(std::move(status)); });
    return outcome.get_future().get();
}

// Redis's checks and texts, then the takeover.
core::Status ClusterFailover::run_manual(cluster::ClusterState::FailoverMode mode,
                                         const std::stop_token& stop) {
    const std::shared_ptr<const cluster::ClusterMap> map = state_.snapshot();
    if (map->self().is_primary()) {
        return core::Error{"ERR You should send CLUSTER FAILOVER to a replica"};
    }
    const std::uint16_t primary = map->primary_of(map->self_index());
    if (primary == cluster::kNoNode) {
        return core::Error{"ERR I'm a replica but my master is unknown to me"};
    }
    const std::string primary_id = map->node(primary).id;
    if (mode != cluster::ClusterState::FailoverMode::handshake) {
        return take_over(primary_id, cluster::EtcdMapBackend::Lease::ignore);
    }
    if (map->node(primary).failed) {
        return core::Error{"ERR Master is down or failed, please use CLUSTER FAILOVER FORCE"};
    }
    core::Status taken = hand_over_and_take(primary_id, stop);
    cluster::EtcdTxn cleanup;
    cleanup.success.push_back(cluster::EtcdOp::erase_prefix(handover_prefix_ + primary_id));
    (void)client_->txn(cleanup);
    return taken;
}

// Asks the primary to hand over, waits for the offset it posts once it
// stopped taking writes, applies up to it, then takes over.
core::Status ClusterFailover::hand_over_and_take(const std::string& primary,
                                                 const std::stop_token& stop) {
    const std::string asked = handover_prefix_ + primary;
    // An offset left by an earlier handshake must not be taken for this one's.
    cluster::EtcdTxn ask;
    ask.success.push_back(cluster::EtcdOp::erase(asked + "/offset"));
    ask.success.push_back(cluster::EtcdOp::put(asked, self_id_));
    if (auto asked_now = client_->txn(ask); !asked_now) {
        return core::Error{"ERR the cluster's store (etcd) cannot be reached: " +
                           asked_now.error()};
    }
    const Clock::time_point deadline = Clock::now() + kHandoverTimeout;
    std::optional<std::uint64_t> target;
    while (!stop.stop_requested() && Clock::now() < deadline) {
        if (!target) {
            const core::Result<cluster::EtcdRange> posted = client_->get(asked + "/offset");
            std::uint64_t offset = 0;
            if (posted && !posted->kvs.empty() &&
                core::parse_digits(posted->kvs.front().value, 19, offset)) {
                target = offset;
            }
        }
        if (target && replication_.replication().offset >= *target) {
            return take_over(primary, cluster::EtcdMapBackend::Lease::ignore);
        }
        pause(stop, kPoll);
    }
    return core::Error{
        "ERR the primary did not hand over in time; CLUSTER FAILOVER FORCE takes over without "
        "it"};
}

// The primary's side of the handshake: no write from now on, then the
// offset of the last one, once it stopped moving.
void ClusterFailover::hand_over(const std::stop_token& stop) {
    if (!state_.snapshot()->self().is_primary()) return;
    handing_over_.store(true, std::memory_order_release);
    state_.set_writable_until(Clock::time_point{});
    handover_ends_ = Clock::now() + kHandoverTimeout + kHandoverTimeout / 2;
    std::uint64_t offset = replication_.replication().offset;
    for (int i = 0; i < 50 && !stop.stop_requested(); ++i) {
        pause(stop, kPoll);
        const std::uint64_t now = replication_.replication().offset;
        if (now == offset) break;
        offset = now;
    }
    (void)client_->put(handover_prefix_ + self_id_ + "/offset", std::to_string(offset));
    spdlog::info("cluster: handing over to a replica at offset {}; writes refused meanwhile",
                 offset);
}

// A handover that ended without this node losing its slots (the replica
// gave up) lifts the fence; one that moved them ends at once (a replica
// takes no writes; made a primary again, its lease lets it).
void ClusterFailover::end_handover_if_late() {
    if (!handing_over_.load(std::memory_order_acquire)) return;
    // Handed over: a replica now, nothing to lift.
    if (!state_.snapshot()->self().is_primary()) {
        handing_over_.store(false, std::memory_order_release);
        return;
    }
    if (Clock::now() < handover_ends_) return;
    handing_over_.store(false, std::memory_order_release);
    if (state_.snapshot()->self().is_primary() && lease_deadline_) {
        state_.set_writable_until(lease_deadline_());
        spdlog::warn("cluster: no replica took over in time; taking writes again");
    }
}

void ClusterFailover::loop(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
        std::optional<Manual> manual;
        bool asked = false;
        {
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, stop, kTick,
                           [this] { return !manual_.empty() || handover_asked_; });
            if (!manual_.empty()) {
                manual.emplace(std::move(manual_.front()));
                manual_.pop_front();
            }
            asked = std::exchange(handover_asked_, false);
        }
        if (stop.stop_requested()) {
            if (manual) manual->done(core::Error{"ERR the server is stopping"});
            return;
        }
        if (asked) hand_over(stop);
        end_handover_if_late();
        if (manual) manual->done(run_manual(manual->mode, stop));
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
    const core::Status taken = take_over(primary_id, cluster::EtcdMapBackend::Lease::must_be_gone);
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
