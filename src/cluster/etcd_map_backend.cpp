#include "bloomery/cluster/etcd_map_backend.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <vector>

#include "bloomery/cluster/map_codec.hpp"

namespace bloomery::cluster {
namespace {

// How many times a change reads the map again after another node's change
// won the race, before it gives up.
constexpr int kCommitAttempts = 16;
// The pause before watching again after the watch failed (etcd unreachable).
constexpr auto kWatchRetry = std::chrono::milliseconds(200);
// A change etcd could not take (no member answered, a leader being
// elected after one was lost) is tried again for this long, every
// kStoreRetryPause, before the command answers the error.
constexpr auto kStoreRetryFor = std::chrono::seconds(5);
constexpr auto kStoreRetryPause = std::chrono::milliseconds(100);

}  // namespace

constexpr std::string_view kStoreUnreachable = "ERR the cluster's store (etcd) cannot be reached: ";

core::Error EtcdMapBackend::store_error(const std::string& what) {
    return core::Error{std::string(kStoreUnreachable) + what};
}

EtcdMapBackend::EtcdMapBackend(std::unique_ptr<EtcdClient> client, std::string_view cluster_name,
                               MapNode self, ClusterState& state, Liveness liveness)
    : client_(std::move(client)),
      prefix_(cluster_prefix(cluster_name)),
      key_(prefix_ + "map"),
      alive_prefix_(prefix_ + "alive/"),
      nodes_prefix_(prefix_ + "nodes/"),
      own_key_(nodes_prefix_ + self.id),
      handover_prefix_(prefix_ + "handover/"),
      liveness_(liveness),
      self_(std::move(self)),
      state_(state) {}

EtcdMapBackend::~EtcdMapBackend() {
    stop();
}

std::string EtcdMapBackend::cluster_prefix(std::string_view cluster_name) {
    std::string prefix = "/bloomery/";
    prefix += cluster_name;
    prefix += '/';
    return prefix;
}

std::string EtcdMapBackend::map_key(std::string_view cluster_name) {
    return cluster_prefix(cluster_name) + "map";
}

ClusterMap EtcdMapBackend::lone() const {
    core::Result<ClusterMap> view = lone_view(registration_);
    return view ? std::move(view).value() : ClusterMap::lone(self_);
}

// Reads the cluster's keys at one revision: the map, and who is alive.
core::Status EtcdMapBackend::reload() {
    core::Result<EtcdRange> range = client_->get_prefix(prefix_);
    if (!range) return store_error(range.error());
    std::string document, registration;
    std::int64_t map_revision = 0, registration_revision = 0;
    std::set<std::string, std::less<>> alive;
    for (const EtcdKeyValue& kv : range->kvs) {
        if (kv.key == key_) {
            document = kv.value;
            map_revision = kv.mod_revision;
        } else if (kv.key == own_key_) {
            registration = kv.value;
            registration_revision = kv.mod_revision;
        } else if (kv.key.starts_with(alive_prefix_)) {
            alive.insert(kv.key.substr(alive_prefix_.size()));
        }
    }
    if (!document.empty() && names_node(document, self_.id)) {
        if (core::Result<ClusterMap> view = decode_map(document, self_.id); !view) {
            return core::Error{"the cluster map in etcd (" + key_ +
                               ") is not one: " + view.error()};
        }
    }
    std::lock_guard lock(mutex_);
    document_ = std::move(document);
    if (registration_revision >= registration_revision_) {
        registration_ = std::move(registration);
        registration_revision_ = registration_revision;
    }
    alive_ = std::move(alive);
    published_revision_ = std::max(published_revision_, map_revision);
    watched_revision_ = std::max(watched_revision_, range->revision);
    republish();
    return {};
}

core::Status EtcdMapBackend::start() {
    if (core::Status loaded = reload(); !loaded) return loaded;
    // This node's registration says where it is now (MEET finds it there).
    if (core::Status enrolled = run(request_of(Request::Kind::enroll, nullptr)); !enrolled) {
        return enrolled;
    }
    committer_ = std::jthread([this](const std::stop_token& stop) { commit_loop(stop); });
    watcher_ = std::jthread([this](const std::stop_token& stop) { watch_loop(stop); });
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

bool EtcdMapBackend::pause_unless_stopping() {
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, kStoreRetryPause, [this] { return stopping_; });
    return !stopping_;
}

EtcdMapBackend::Request EtcdMapBackend::request_of(Request::Kind kind, ChangeDone done) {
    Request request;
    request.kind = kind;
    request.done = std::move(done);
    return request;
}

void EtcdMapBackend::enqueue(Request request) {
    {
        std::lock_guard lock(mutex_);
        if (!stopping_) {
            queue_.push_back(std::move(request));
            wake_.notify_one();
            return;
        }
    }
    request.done(core::Error{"ERR the server is stopping; the cluster map was not changed"});
}

void EtcdMapBackend::commit(MapEdit edit, ChangeDone done) {
    Request request = request_of(Request::Kind::edit, std::move(done));
    request.edit = std::move(edit);
    enqueue(std::move(request));
}

void EtcdMapBackend::meet(std::string host, std::uint16_t port, ChangeDone done) {
    Request request = request_of(Request::Kind::meet, std::move(done));
    request.host = std::move(host);
    request.port = port;
    enqueue(std::move(request));
}

void EtcdMapBackend::leave(ChangeDone done) {
    enqueue(request_of(Request::Kind::leave, std::move(done)));
}

void EtcdMapBackend::take_over(std::string primary, Lease lease, ChangeDone done) {
    Request request = request_of(Request::Kind::take_over, std::move(done));
    request.host = std::move(primary);
    request.forced = lease == Lease::ignore;
    enqueue(std::move(request));
}

void EtcdMapBackend::join(ChangeDone done) {
    enqueue(request_of(Request::Kind::join, std::move(done)));
}

std::int64_t EtcdMapBackend::published_revision() const {
    std::lock_guard lock(mutex_);
    return published_revision_;
}

void EtcdMapBackend::commit_loop(const std::stop_token& stop) {
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
    const auto give_up = std::chrono::steady_clock::now() + kStoreRetryFor;
    for (int attempt = 0; attempt < kCommitAttempts; ++attempt) {
        core::Result<bool> done = false;
        switch (request.kind) {
            case Request::Kind::edit:
                done = try_edit(request.edit);
                break;
            case Request::Kind::join:
                done = try_meet(self_.host, self_.port);
                break;
            case Request::Kind::meet:
                done = try_meet(request.host, request.port);
                break;
            case Request::Kind::leave:
                done = try_leave();
                break;
            case Request::Kind::enroll:
                done = try_enroll();
                break;
            case Request::Kind::take_over:
                done = try_take_over(request.host, request.forced);
                break;
        }
        if (!done && done.error().starts_with(kStoreUnreachable) &&
            std::chrono::steady_clock::now() < give_up && pause_unless_stopping()) {
            --attempt;  // etcd's own trouble: not a lost race
            continue;
        }
        if (!done) return done.failure();
        if (*done) return {};
    }
    return core::Error{"ERR the cluster map kept changing under this change; try it again"};
}

void EtcdMapBackend::on_events(const std::vector<EtcdEvent>& events, std::int64_t revision) {
    std::lock_guard lock(mutex_);
    for (const EtcdEvent& event : events) {
        const bool put = event.type == EtcdEvent::Type::put;
        if (event.kv.key == key_) {
            if (event.kv.mod_revision <= published_revision_) continue;
            document_ = put ? event.kv.value : std::string();
            published_revision_ = event.kv.mod_revision;
        } else if (event.kv.key == own_key_) {
            if (event.kv.mod_revision <= registration_revision_) continue;
            registration_ = put ? event.kv.value : std::string();
            registration_revision_ = event.kv.mod_revision;
        } else if (event.kv.key.starts_with(handover_prefix_)) {
            if (handover_listener_) {
                handover_listener_(event.kv.key.substr(handover_prefix_.size()), put);
            }
        } else if (event.kv.key.starts_with(alive_prefix_)) {
            std::string id = event.kv.key.substr(alive_prefix_.size());
            if (put) {
                alive_.insert(std::move(id));
            } else {
                alive_.erase(id);
            }
        }
    }
    watched_revision_ = std::max(watched_revision_, revision);
    republish();
}

void EtcdMapBackend::watch_loop(const std::stop_token& stop) {
    const EtcdWatchHandler handler = [this](const std::vector<EtcdEvent>& events,
                                            std::int64_t revision) { on_events(events, revision); };
    while (!stop.stop_requested()) {
        std::int64_t from = 0;
        {
            std::lock_guard lock(mutex_);
            from = watched_revision_ + 1;
        }
        const core::Result<EtcdWatchEnd> end = client_->watch(prefix_, from, handler, stop);
        if (stop.stop_requested()) return;
        if (end && *end == EtcdWatchEnd::stopped) return;  // cancel(): stopping
        // Unreachable, or the revision to resume from was compacted away:
        // read the keys as they are now, then watch from there.
        std::mutex pause;
        std::unique_lock lock(pause);
        std::condition_variable_any().wait_for(lock, stop, kWatchRetry, [] { return false; });
        (void)reload();
    }
}

void EtcdMapBackend::publish(std::string_view document, std::int64_t revision) {
    std::lock_guard lock(mutex_);
    if (revision <= published_revision_) return;
    document_ = document;
    published_revision_ = revision;
    republish();
}

void EtcdMapBackend::publish_registration(std::string_view document, std::int64_t revision) {
    std::lock_guard lock(mutex_);
    if (revision <= registration_revision_) return;
    registration_ = document;
    registration_revision_ = revision;
    republish();
}

void EtcdMapBackend::republish() {
    if (document_.empty() || !names_node(document_, self_.id)) return state_.publish(lone());
    core::Result<ClusterMap> view = decode_map(document_, self_.id);
    if (!view) return;  // not a map: the last good one stays
    if (liveness_ == Liveness::track) {
        for (std::size_t i = 0; i < view->nodes().size(); ++i) {
            const auto index = static_cast<std::uint16_t>(i);
            if (index == view->self_index()) continue;  // as Redis: never "myself,fail"
            view->mutable_node(index).failed = !alive_.contains(view->node(index).id);
        }
        view->finish();
    }
    state_.publish(std::move(view).value());
}

}  // namespace bloomery::cluster
