#pragma once
// The worker threads: one io_context each, serving the connections handed to
// it; the --maxclients slots; the connections each worker serves, tracked so
// that the server can walk them (CLIENT LIST and KILL, eviction, limits, a
// stop); and each worker's journal turn.

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio/io_context.hpp>

#include "bloomery/command/context.hpp"
#include "bloomery/persist/journal_turn.hpp"
#include "bloomery/persist/manager.hpp"
#include "client_slot.hpp"

namespace bloomery::net {

class Connection;

// One worker thread and what its connections share. Its thread ends each
// turn with the journal's write-through (persist/journal_turn.hpp).
struct Worker final : persist::JournalTurn {
    explicit Worker(persist::Manager& records) : persistence(records) {}

    void schedule_write_through() override;

    boost::asio::io_context context{1};
    command::WorkerStats stats;
    // Where the records its connections' commands append go (the journal
    // written at the end of each turn).
    persist::Manager& persistence;
    std::mutex connections_mutex;  // guards `connections` (changes on accept/close only)
    std::list<std::weak_ptr<Connection>> connections;
    // --appendfsync everysec and no: connections whose replies wait for
    // this worker's one journal write of the turn, and whether that
    // write is posted (worker thread only).
    std::vector<std::shared_ptr<Connection>> awaiting_journal;
    bool journal_turn_posted = false;
    std::thread thread;
};

class WorkerPool {
public:
    // Where a tracked connection stands in its worker's list.
    using Position = std::list<std::weak_ptr<Connection>>::iterator;

    // `threads` workers (at least one), idle until start().
    WorkerPool(unsigned threads, persist::Manager& persistence);
    ~WorkerPool();  // stop()
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    // Starts every worker's thread. Once, from the main thread.
    void start();
    // Stops every worker and joins its thread; the connections a worker
    // still holds go when the pool does. Idempotent.
    void stop();
    unsigned size() const { return static_cast<unsigned>(workers_.size()); }
    // The worker the next connection goes to, round-robin. Main thread.
    Worker& next_worker();
    const std::vector<std::unique_ptr<Worker>>& workers() const { return workers_; }

    // Takes a --maxclients slot if fewer than `limit` are taken (empty if
    // not); the connection holding it gives it back. Lock-free, any thread.
    ClientSlot take_client_slot(std::size_t limit) {
        return ClientSlot::acquire(client_slots_, limit);
    }
    std::size_t client_slots_taken() const { return client_slots_.load(std::memory_order_relaxed); }

    // A connection is listed from when it starts serving until it closes.
    // Worker thread of the connection.
    Position track(Worker& worker, const std::shared_ptr<Connection>& connection);
    void untrack(Worker& worker, Position position);
    // Connections tracked and not yet closed. Any thread.
    std::size_t open_connections() const { return open_connections_.load(); }
    // `closed` runs, on the closing connection's thread, each time the last
    // open connection closes. Set before start().
    void when_all_closed(std::function<void()> closed) { all_closed_ = std::move(closed); }

    // Calls fn(Connection&) for every open connection, one worker at a time,
    // outside the worker's lock. Any thread.
    template <class Fn>
    void for_each_connection(Fn&& fn);
    // Every open connection at once. Any thread.
    std::vector<std::shared_ptr<Connection>> live_connections();

    // Posts `worker`'s journal write for the end of its turn, behind the
    // completions already queued, unless it is posted (worker thread).
    static void post_journal_turn(Worker& worker);

private:
    // Declared before workers_ so they outlive them: a connection still held
    // by a worker's io_context when that is destroyed gives its slot back.
    std::atomic<std::size_t> client_slots_{0};
    std::atomic<std::size_t> open_connections_{0};
    std::function<void()> all_closed_;
    std::vector<std::unique_ptr<Worker>> workers_;
    std::size_t next_worker_ = 0;
};

template <class Fn>
void WorkerPool::for_each_connection(Fn&& fn) {
    for (auto& worker : workers_) {
        std::vector<std::shared_ptr<Connection>> live;
        {
            std::lock_guard lock(worker->connections_mutex);
            for (auto& weak : worker->connections) {
                if (auto connection = weak.lock()) live.push_back(std::move(connection));
            }
        }
        for (auto& connection : live) fn(*connection);
    }
}

}  // namespace bloomery::net
