#include "bloomery/cluster/cluster_state.hpp"

#include <utility>

namespace bloomery::cluster {
namespace {

// Versions are unique across every ClusterState, so a thread's cached view
// can never be mistaken for another state's (or a destroyed one's).
std::atomic<std::uint64_t> g_next_version{1};

// The map this thread last read, and from which state and version: while
// the version is unchanged view() answers from here without the lock and
// without touching the shared_ptr's count.
struct ThreadView {
    const ClusterState* state = nullptr;
    std::uint64_t version = 0;
    std::shared_ptr<const ClusterMap> map;
};
thread_local ThreadView t_view;

}  // namespace

ClusterState::ClusterState() : ClusterState(ClusterMap::lone(MapNode{})) {}

ClusterState::ClusterState(ClusterMap initial) {
    publish(std::move(initial));
}

const ClusterMap& ClusterState::view() const {
    const std::uint64_t version = version_.load(std::memory_order_acquire);
    if (t_view.state != this || t_view.version != version) {
        std::lock_guard lock(mutex_);
        t_view.state = this;
        t_view.version = version_.load(std::memory_order_relaxed);
        t_view.map = current_;
    }
    return *t_view.map;
}

std::shared_ptr<const ClusterMap> ClusterState::snapshot() const {
    std::lock_guard lock(mutex_);
    return current_;
}

void ClusterState::publish(ClusterMap next) {
    auto map = std::make_shared<const ClusterMap>(std::move(next));
    {
        std::lock_guard lock(mutex_);
        current_ = map;
        version_.store(g_next_version.fetch_add(1, std::memory_order_relaxed),
                       std::memory_order_release);
    }
    if (listener_) listener_(*map);
}

void ClusterState::meet(std::string host, std::uint16_t port, ChangeDone done) {
    if (backend_ == nullptr) return done(core::Error{std::string(kNeedsBackend)});
    backend_->meet(std::move(host), port, std::move(done));
}

void ClusterState::failover(FailoverMode mode, ChangeDone done) {
    if (!failover_handler_) return done(core::Error{std::string(kNeedsBackend)});
    failover_handler_(mode, std::move(done));
}

void ClusterState::leave(ChangeDone done) {
    if (backend_ == nullptr) return done(core::Error{std::string(kNeedsBackend)});
    backend_->leave(std::move(done));
}

void ClusterState::change(MapEdit edit, ChangeDone done) {
    if (backend_ != nullptr) return backend_->commit(std::move(edit), std::move(done));
    core::Status outcome;
    {
        std::lock_guard lock(mutex_);
        core::Result<ClusterMap> next = edit(*current_);
        if (next) {
            current_ = std::make_shared<const ClusterMap>(std::move(next).value());
            version_.store(g_next_version.fetch_add(1, std::memory_order_relaxed),
                           std::memory_order_release);
        } else {
            outcome = core::Error{next.error()};
        }
    }
    done(std::move(outcome));
}

}  // namespace bloomery::cluster
