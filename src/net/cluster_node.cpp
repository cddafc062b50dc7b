#include "cluster_node.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

#include "bloomery/cluster/etcd.hpp"
#include "bloomery/cluster/etcd_liveness.hpp"
#include "bloomery/cluster/etcd_map_backend.hpp"
#include "bloomery/cluster/map_codec.hpp"
#include "bloomery/cluster/topology.hpp"
#include "bloomery/command/server.hpp"
#include "bloomery/core/file_io.hpp"
#include "cluster_failover.hpp"

namespace bloomery::net {
namespace {

constexpr auto kConnectRetry = std::chrono::seconds(1);
// A node that cannot reach etcd says so at its first try, then once a minute.
constexpr int kRetriesBetweenWarnings = 60;

std::string random_node_id() {
    std::random_device device;
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id;
    for (int i = 0; i < 5; ++i) {  // 20 bytes, 40 digits
        const std::uint32_t word = device();
        for (int shift = 0; shift < 32; shift += 8) {
            id += kHex[(word >> (shift + 4)) & 0xf];
            id += kHex[(word >> shift) & 0xf];
        }
    }
    return id;
}

// Writes "id <id>" through a temporary file, fsynced and renamed, so that a
// crash leaves the old file or the new one.
void write_node_id(const core::Config& config, const std::string& id) {
    const std::string path = config.cluster_config_path();
    const std::string temporary = path + ".tmp";
    const std::string text = "# bloomery cluster node (--cluster-config-file)\nid " + id + "\n";
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const bool written =
        fd >= 0 && core::write_all(fd, text.data(), text.size()) == 0 && ::fsync(fd) == 0;
    const int error = errno;
    if (fd >= 0) ::close(fd);
    if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
        throw std::runtime_error("cannot write the node id to " + path + ": " +
                                 std::strerror(written ? errno : error));
    }
    if (core::Status synced = core::fsync_directory(config.dir); !synced) {
        throw std::runtime_error("cannot write the node id to " + path + ": " + synced.error());
    }
}

}  // namespace

std::string cluster_node_id(const core::Config& config) {
    const std::string path = config.cluster_config_path();
    std::ifstream in(path);
    if (!in) {
        if (errno != ENOENT) {
            throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
        }
        std::string id = random_node_id();
        write_node_id(config, id);
        spdlog::info("cluster: this node's id is {} (new, kept in {})", id, path);
        return id;
    }
    std::string word;
    while (in >> word) {
        if (word == "id" && in >> word && cluster::is_node_id(word)) return word;
    }
    throw std::runtime_error(path +
                             " holds no node id (a line \"id <40 hex digits>\"); move it "
                             "away to start as a new node");
}

ClusterNode::ClusterNode(const core::Config& config, cluster::ClusterState& state,
                         command::Replication& replication)
    : config_(config), state_(state), replication_(replication) {}

ClusterNode::~ClusterNode() {
    stop();
}

void ClusterNode::start() {
    const core::Result<cluster::NodeAddress> address =
        cluster::parse_node_address(config_.cluster_announce);
    if (!address) throw std::runtime_error("--cluster-announce: " + address.error());
    self_.id = cluster_node_id(config_);
    self_.host = address->host;
    self_.port = address->port;
    self_.address = self_.host + ":" + std::to_string(self_.port);
    const cluster::EtcdSettings settings = cluster::etcd_settings_of(config_);
    // Each its own: a lease renewal never waits behind a change or an election.
    auto map_client = cluster::EtcdClient::create(settings);
    auto lease_client = cluster::EtcdClient::create(settings);
    auto election_client = cluster::EtcdClient::create(settings);
    for (const auto* client : {&map_client, &lease_client, &election_client}) {
        if (!*client) throw std::runtime_error("--cluster-etcd: " + client->error());
    }
    // No write is taken before this node holds its lease.
    state_.set_writable_until(std::chrono::steady_clock::time_point{});
    state_.publish(cluster::ClusterMap::lone(self_));
    state_.set_listener([this](const cluster::ClusterMap&) { follow(*state_.snapshot()); });
    backend_ = std::make_unique<cluster::EtcdMapBackend>(std::move(*map_client),
                                                         config_.cluster_name, self_, state_,
                                                         cluster::EtcdMapBackend::Liveness::track);
    liveness_ = std::make_unique<cluster::EtcdLiveness>(
        std::move(*lease_client), config_.cluster_name, self_.id,
        std::chrono::milliseconds(config_.cluster_node_timeout_ms));
    liveness_->set_listener([this](std::chrono::steady_clock::time_point deadline, bool new_lease) {
        on_lease(deadline, new_lease);
    });
    failover_ = std::make_unique<ClusterFailover>(config_, state_, replication_, *backend_,
                                                  std::move(*election_client), self_.id);
    backend_->set_handover_listener(
        [this](const std::string& name, bool put) { failover_->on_handover_event(name, put); });
    failover_->set_lease_deadline([this] { return liveness_->deadline(); });
    state_.set_failover_handler(
        [this](cluster::ClusterState::FailoverMode mode, cluster::ChangeDone done) {
            failover_->manual(mode, std::move(done));
        });
    state_.set_backend(backend_.get());
    spdlog::info("cluster: node {} at {}, cluster '{}' kept in etcd at {}", self_.id, self_.address,
                 config_.cluster_name, config_.cluster_etcd);
    // The monitoring thread reads the parts from here on.
    started_.store(true, std::memory_order_release);
    connector_ = std::jthread([this](const std::stop_token& stop) { connect_loop(stop); });
}

template <class Attempt>
bool ClusterNode::keep_trying(const std::stop_token& stop, Attempt attempt) {
    for (int tries = 0; !stop.stop_requested(); ++tries) {
        const core::Status status = attempt();
        if (status) return true;
        if (tries % kRetriesBetweenWarnings == 0) {
            spdlog::warn(
                "cluster: etcd cannot be reached yet ({}); serving no slot until it "
                "can, trying every second",
                status.error());
        }
        std::unique_lock lock(mutex_);
        wake_.wait_for(lock, stop, kConnectRetry, [] { return false; });
    }
    return false;
}

void ClusterNode::connect_loop(const std::stop_token& stop) {
    if (!keep_trying(stop, [this] { return backend_->start(); })) return;
    if (!keep_trying(stop, [this] { return liveness_->start(); })) return;
    failover_->start();
    std::lock_guard lock(mutex_);
    connected_ = true;
    spdlog::info("cluster: connected to etcd; this node's lease lasts {} s",
                 (config_.cluster_node_timeout_ms + 999) / 1000);
}

// Writes are taken until the lease's deadline. A new lease (the last one
// lapsed: this node was cut off or paused past its timeout) extends it only
// once the map has been read again: another node may have taken this
// node's slots over meanwhile, and that must be seen before any write.
void ClusterNode::on_lease(std::chrono::steady_clock::time_point deadline, bool new_lease) {
    if (new_lease) map_fresh_ = false;
    if (!map_fresh_) {
        const core::Status read = backend_->refresh();
        if (!read) {
            spdlog::warn("cluster: the map cannot be read again after a new lease: {}",
                         read.error());
            return;
        }
        map_fresh_ = true;
    }
    // A handover in progress keeps writes refused until it ends.
    if (!failover_->handing_over()) state_.set_writable_until(deadline);
}

void ClusterNode::stop() {
    if (connector_.joinable()) {
        connector_.request_stop();
        connector_.join();
    }
    state_.set_writable_until(std::chrono::steady_clock::time_point{});
    if (failover_) failover_->stop();
    if (liveness_) liveness_->stop(cluster::EtcdLiveness::Release::revoke);
    if (backend_) backend_->stop();
}

void ClusterNode::follow(const cluster::ClusterMap& map) {
    std::string host;
    std::uint16_t port = 0;
    if (!map.self().is_primary()) {
        const std::uint16_t primary = map.primary_of(map.self_index());
        if (primary == cluster::kNoNode) return;  // a primary this map does not know yet
        host = map.node(primary).host;
        port = map.node(primary).port;
    }
    const std::string wanted = host.empty() ? std::string() : host + ":" + std::to_string(port);
    {
        std::lock_guard lock(mutex_);
        if (wanted == following_) return;
        following_ = wanted;
        ++role_changes_;
    }
    if (wanted.empty()) {
        // Writes from now on, as far as the lease reaches (a handover in
        // progress keeps them refused).
        if (started_.load(std::memory_order_acquire) && !failover_->handing_over() &&
            liveness_->held()) {
            state_.set_writable_until(liveness_->deadline());
        }
        spdlog::info("cluster: the map makes this node a primary");
    } else {
        spdlog::info("cluster: the map makes this node a replica of {}", wanted);
    }
    replication_.replicaof(host, port, [wanted](const std::string& error) {
        if (!error.empty()) spdlog::warn("cluster: following {} failed: {}", wanted, error);
    });
}

bool ClusterNode::connected() const {
    std::lock_guard lock(mutex_);
    return connected_;
}

std::uint64_t ClusterNode::lease_renewals() const {
    return started_.load(std::memory_order_acquire) ? liveness_->renewals() : 0;
}

std::uint64_t ClusterNode::lease_failures() const {
    return started_.load(std::memory_order_acquire) ? liveness_->failures() : 0;
}

std::uint64_t ClusterNode::failovers_won() const {
    return started_.load(std::memory_order_acquire) ? failover_->won() : 0;
}

std::uint64_t ClusterNode::role_changes() const {
    std::lock_guard lock(mutex_);
    return role_changes_;
}

}  // namespace bloomery::net
