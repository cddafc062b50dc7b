#include "bloomery/cluster/etcd_liveness.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace bloomery::cluster {
namespace {

std::int64_t whole_seconds(std::chrono::milliseconds timeout) {
    return std::max<std::int64_t>(1, (timeout.count() + 999) / 1000);
}

// Waits `pause`, or less if `stop` is requested meanwhile.
void sleep_unless_stopped(const std::stop_token& stop, std::chrono::milliseconds pause) {
    std::mutex mutex;
    std::unique_lock lock(mutex);
    std::condition_variable_any().wait_for(lock, stop, pause, [] { return false; });
}

}  // namespace

EtcdLiveness::EtcdLiveness(std::unique_ptr<EtcdClient> client, std::string_view cluster_name,
                           const std::string& node_id, std::chrono::milliseconds node_timeout)
    : client_(std::move(client)),
      key_(alive_prefix(cluster_name) + node_id),
      ttl_seconds_(whole_seconds(node_timeout)) {}

EtcdLiveness::~EtcdLiveness() {
    stop(Release::keep);
}

std::string EtcdLiveness::alive_prefix(std::string_view cluster_name) {
    std::string prefix = "/bloomery/";
    prefix += cluster_name;
    prefix += "/alive/";
    return prefix;
}

void EtcdLiveness::extend(Clock::time_point sent, std::int64_t ttl_seconds, bool new_lease) {
    const auto ttl = std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ttl_seconds));
    const auto margin = std::max<Clock::duration>(
        std::chrono::duration_cast<Clock::duration>(ttl * kLeaseDriftMargin), kLeaseMinimumMargin);
    const Clock::time_point deadline = sent + ttl - margin;
    deadline_.store(deadline.time_since_epoch().count(), std::memory_order_release);
    if (listener_) listener_(deadline, new_lease);
}

core::Status EtcdLiveness::take_lease() {
    const Clock::time_point sent = Clock::now();
    core::Result<EtcdLease> lease = client_->grant(ttl_seconds_);
    if (!lease) return lease.failure();
    core::Result<std::int64_t> put = client_->put(key_, "up", lease->id);
    if (!put) {
        (void)client_->revoke(lease->id);
        return put.failure();
    }
    lease_ = lease->id;
    granted_ttl_ = lease->ttl_seconds;
    extend(sent, granted_ttl_, true);
    return {};
}

core::Status EtcdLiveness::start() {
    if (core::Status taken = take_lease(); !taken) return taken;
    renewer_ = std::jthread([this](const std::stop_token& stop) { renew_loop(stop); });
    return {};
}

void EtcdLiveness::stop(Release release) {
    if (!renewer_.joinable()) return;
    renewer_.request_stop();
    renewer_.join();
    if (release == Release::revoke && lease_ != 0) (void)client_->revoke(lease_);
    deadline_.store(0, std::memory_order_release);
}

// Renews three times per time to live. A renewal that fails is tried again
// at once, then every tenth of the time to live; a lease that lapsed (the
// node was cut off too long) is replaced by a new one.
void EtcdLiveness::renew_loop(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
        const auto period = std::chrono::milliseconds(granted_ttl_ * 1000 / 3);
        sleep_unless_stopped(stop, period);
        while (!stop.stop_requested()) {
            const Clock::time_point sent = Clock::now();
            const core::Result<std::int64_t> remaining = client_->keep_alive(lease_);
            if (remaining && *remaining > 0) {
                extend(sent, *remaining, false);
                renewals_.fetch_add(1, std::memory_order_relaxed);
                break;
            }
            failures_.fetch_add(1, std::memory_order_relaxed);
            if (remaining && take_lease()) break;  // lapsed: a new lease
            sleep_unless_stopped(stop, std::chrono::milliseconds(granted_ttl_ * 100));
        }
    }
}

}  // namespace bloomery::cluster
