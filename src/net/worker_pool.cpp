// The worker threads and the connections they serve (worker_pool.hpp).

#include "worker_pool.hpp"

#include <algorithm>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "bloomery/persist/journal.hpp"
#include "connection.hpp"

namespace bloomery::net {

namespace asio = boost::asio;

WorkerPool::WorkerPool(unsigned threads, persist::Manager& persistence) {
    for (unsigned i = 0; i < std::max(1u, threads); ++i) {
        workers_.push_back(std::make_unique<Worker>(persistence));
    }
}

WorkerPool::~WorkerPool() {
    stop();
}

void WorkerPool::start() {
    for (auto& worker : workers_) {
        Worker* w = worker.get();
        w->thread = std::thread([w] {
            auto guard = asio::make_work_guard(w->context);
            // Records this worker appends are written at the end of its
            // turn, before the replies that wait for them.
            persist::Journal::set_thread_turn(w);
            w->context.run();
            persist::Journal::set_thread_turn(nullptr);
        });
    }
}

void WorkerPool::stop() {
    for (auto& worker : workers_) {
        worker->context.stop();
        if (worker->thread.joinable()) worker->thread.join();
    }
}

Worker& WorkerPool::next_worker() {
    Worker& worker = *workers_[next_worker_];
    next_worker_ = (next_worker_ + 1) % workers_.size();
    return worker;
}

WorkerPool::Position WorkerPool::track(Worker& worker,
                                       const std::shared_ptr<Connection>& connection) {
    open_connections_.fetch_add(1);
    std::lock_guard lock(worker.connections_mutex);
    worker.connections.push_front(connection);
    return worker.connections.begin();
}

void WorkerPool::untrack(Worker& worker, Position position) {
    {
        std::lock_guard lock(worker.connections_mutex);
        worker.connections.erase(position);
    }
    if (open_connections_.fetch_sub(1) == 1 && all_closed_) all_closed_();
}

std::vector<std::shared_ptr<Connection>> WorkerPool::live_connections() {
    std::vector<std::shared_ptr<Connection>> live;
    for (auto& worker : workers_) {
        std::lock_guard lock(worker->connections_mutex);
        for (auto& weak : worker->connections) {
            if (auto connection = weak.lock()) live.push_back(std::move(connection));
        }
    }
    return live;
}

void Worker::schedule_write_through() {
    WorkerPool::post_journal_turn(*this);
}

void WorkerPool::post_journal_turn(Worker& worker) {
    if (worker.journal_turn_posted) return;
    worker.journal_turn_posted = true;
    asio::post(worker.context, [&worker] { Connection::end_journal_turn(worker); });
}

}  // namespace bloomery::net
