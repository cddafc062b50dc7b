#include "bloomery/cluster/etcd_map_backend.hpp"

#include <chrono>
#include <vector>

#include "bloomery/cluster/map_codec.hpp"

namespace bloomery::cluster {
namespace {

// How many times a change reads the map again after another node's change
// won the race, before it gives up.
constexpr int kCommitAttempts = 16;
// The pause before watching again after the watch failed (etcd unreachable).
constexpr auto kWatchRetry = std::chrono::milliseconds(200);

core::Error store_error(const std::string& what) {
    return core::Error{"ERR the cluster's store (etcd) cannot be reached: " + what};
}

}  // namespace

EtcdMapBackend::EtcdMapBackend(std::unique_ptr<EtcdClient> client, std::string cluster_name,
                               MapNode self, ClusterState& state)
    : client_(std::move(client)),
      key_(map_key(cluster_name)),
      self_(std::move(self)),
      state_(state) {}

EtcdMapBackend::~EtcdMapBackend() {
    stop();
}

std::string EtcdMapBackend::map_key(std::string_view cluster_name) {
    std::string key = "/bloomery/";
    key += cluster_name;
    key += "/map";
    return key;
}

ClusterMap EtcdMapBackend::lone() const {
    return ClusterMap::lone(self_);
}

core::Status EtcdMapBackend::reload() {
    core::Result<EtcdRange> range = client_->get(key_);
    if (!range) return store_error(range.error());
    if (range->kvs.empty()) {
        publish("", range->revision);
    } else {
        const EtcdKeyValue& kv = range->kvs.front();
        if (names_node(kv.value, self_.id)) {
            if (core::Result<ClusterMap> view = decode_map(kv.value, self_.id); !view) {
                return core::Error{"the cluster map in etcd (" + key_ +
                                   ") is not one: " + view.error()};
            }
        }
        publish(kv.value, kv.mod_revision);
    }
    return {};
}

core::Status EtcdMapBackend::start() {
    if (core::Status loaded = reload(); !loaded) return loaded;
    committer_ = std::jthread([this](std::stop_token stop) { commit_loop(stop); });
    watcher_ = std::jthread([this](std::stop_token stop) { watch_loop(stop); });
    return {};
}

void EtcdMapBackend::stop() {
    std::deque<Request> abandoned;
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        stopping_ = true;
        abandoned.swap(queue_);
    }
    committer_.request_stop();
    watcher_.request_stop();
    client_->cancel();
    wake_.notify_all();
    if (committer_.joinable()) committer_.join();
    if (watcher_.joinable()) watcher_.join();
    for (Request& request : abandoned) {
        request.done(core::Error{"ERR the server is stopping; the cluster map was not changed"});
    }
}

void EtcdMapBackend::commit(MapEdit edit, ChangeDone done) {
    {
        std::lock_guard lock(mutex_);
        if (!stopping_) {
            queue_.push_back(Request{std::move(edit), std::move(done)});
            wake_.notify_one();
            return;
        }
    }
    done(core::Error{"ERR the server is stopping; the cluster map was not changed"});
}

void EtcdMapBackend::join(ChangeDone done) {
    std::lock_guard lock(mutex_);
    if (stopping_) {
        return done(core::Error{"ERR the server is stopping; the cluster map was not changed"});
    }
    queue_.push_back(Request{nullptr, std::move(done), true});
    wake_.notify_one();
}

std::int64_t EtcdMapBackend::published_revision() const {
    std::lock_guard lock(mutex_);
    return published_revision_;
}

void EtcdMapBackend::commit_loop(std::stop_token stop) {
    while (true) {
        Request request;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, stop, [this] { return !queue_.empty(); });
            if (stop.stop_requested() || queue_.empty()) return;
            request = std::move(queue_.front());
            queue_.pop_front();
        }
        request.done(run(request));
    }
}

core::Status EtcdMapBackend::run(const Request& request) {
    for (int attempt = 0; attempt < kCommitAttempts; ++attempt) {
        core::Result<EtcdRange> range = client_->get(key_);
        if (!range) return store_error(range.error());
        const bool absent = range->kvs.empty();
        const std::string document = absent ? std::string() : range->kvs.front().value;
        const std::int64_t read = absent ? 0 : range->kvs.front().mod_revision;
        core::Result<ClusterMap> view = absent         ? core::Result<ClusterMap>(lone())
                                        : request.join ? join_map(document, self_)
                                                       : decode_map(document, self_.id);
        if (!view) {
            if (!names_node(document, self_.id)) {
                return core::Error{
                    "ERR this node is not a member of the cluster yet: CLUSTER "
                    "MEET one of its nodes first"};
            }
            return core::Error{"ERR the cluster map in etcd is not one: " + view.error()};
        }
        core::Result<ClusterMap> next = request.join ? std::move(view) : request.edit(*view);
        if (!next) return next.failure();
        const std::string written = encode_map(*next);
        EtcdTxn txn;
        EtcdCompare unchanged;
        unchanged.key = key_;
        // Absent: nobody founded it meanwhile; else: nobody changed it.
        unchanged.target =
            absent ? EtcdCompare::Target::create_revision : EtcdCompare::Target::mod_revision;
        unchanged.number = read;
        txn.compares.push_back(std::move(unchanged));
        txn.success.push_back(EtcdOp::put(key_, written));
        core::Result<EtcdTxnResult> result = client_->txn(txn);
        if (!result) return store_error(result.error());
        if (result->succeeded) {
            publish(written, result->revision);
            return {};
        }
    }
    return core::Error{"ERR the cluster map kept changing under this change; try it again"};
}

void EtcdMapBackend::watch_loop(std::stop_token stop) {
    const EtcdWatchHandler handler = [this](const std::vector<EtcdEvent>& events,
                                            std::int64_t revision) {
        for (const EtcdEvent& event : events) {
            if (event.kv.key != key_) continue;
            if (event.type == EtcdEvent::Type::put) {
                publish(event.kv.value, event.kv.mod_revision);
            } else {
                publish("", revision);
            }
        }
    };
    while (!stop.stop_requested()) {
        const core::Result<EtcdWatchEnd> end =
            client_->watch(key_, published_revision() + 1, handler, stop);
        if (stop.stop_requested()) return;
        if (end && *end == EtcdWatchEnd::stopped) return;  // cancel(): stopping
        // Unreachable, or the revision to resume from was compacted away:
        // read the map as it is now, then watch from there.
        std::mutex pause;
        std::unique_lock lock(pause);
        std::condition_variable_any().wait_for(lock, stop, kWatchRetry, [] { return false; });
        (void)reload();
    }
}

void EtcdMapBackend::publish(std::string_view document, std::int64_t revision) {
    std::lock_guard lock(mutex_);
    if (revision <= published_revision_) return;
    if (document.empty() || !names_node(document, self_.id)) {
        state_.publish(lone());
    } else {
        core::Result<ClusterMap> view = decode_map(document, self_.id);
        if (!view) return;  // not a map: the last good one stays
        state_.publish(std::move(view).value());
    }
    published_revision_ = revision;
}

}  // namespace bloomery::cluster
