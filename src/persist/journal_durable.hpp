#pragma once
// How far the journal's history is durable, and the replies waiting for it
// (Journal::when_durable(), --appendfsync always). The writer
// (journal_writer.hpp) advances it and lets the waiters go.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace bloomery::persist {

class DurableMark {
public:
    // The history (journal id) the offsets are of. Lock-free.
    std::uint64_t history() const { return id_.load(std::memory_order_acquire); }
    // Every record before this offset is durable. Lock-free; only grows
    // within a history.
    std::uint64_t durable() const { return durable_.load(std::memory_order_acquire); }

    // A history begins (the journal opens), durable up to `offset`.
    void restart(std::uint64_t id, std::uint64_t offset) {
        std::lock_guard lock(mutex_);
        id_.store(id, std::memory_order_release);
        durable_.store(offset, std::memory_order_relaxed);
    }
    // Records up to `offset` are durable now; the caller serializes the
    // calls (the writer's file lock) and then calls notify().
    void advance_to(std::uint64_t offset) {
        if (durable_.load(std::memory_order_relaxed) < offset) {
            durable_.store(offset, std::memory_order_release);
        }
    }

    // Calls `fn` once durable() >= offset of history `id`: from notify(),
    // or at once, on the caller's thread, if it already is, or if the
    // history is another one (the journal was closed and opened again:
    // close() made the old one durable).
    void when_durable(std::uint64_t id, std::uint64_t offset, std::function<void()> fn) {
        {
            std::lock_guard lock(mutex_);
            // Checked under the lock notify() takes after durable_ advanced,
            // so a waiter is either seen by it or sees the new value;
            // restart() changes the id under it too.
            if (id == history() && durable() < offset) {
                waiters_.emplace_back(offset, std::move(fn));
                return;
            }
        }
        fn();
    }
    // Runs the waiters now due; returns how many.
    std::size_t notify() {
        std::vector<std::function<void()>> ready;
        {
            std::lock_guard lock(mutex_);
            const std::uint64_t done = durable();
            auto keep = std::partition(waiters_.begin(), waiters_.end(),
                                       [done](const auto& w) { return w.first > done; });
            for (auto it = keep; it != waiters_.end(); ++it) ready.push_back(std::move(it->second));
            waiters_.erase(keep, waiters_.end());
        }
        for (auto& fn : ready) fn();
        return ready.size();
    }
    // At close: whoever still waits will not be answered (their clients are
    // gone at exit); runs nothing.
    void forget_waiters() {
        std::lock_guard lock(mutex_);
        waiters_.clear();
        waiters_.shrink_to_fit();
    }

private:
    std::atomic<std::uint64_t> id_{0};
    std::atomic<std::uint64_t> durable_{0};
    std::mutex mutex_;
    std::vector<std::pair<std::uint64_t, std::function<void()>>> waiters_;
};

}  // namespace bloomery::persist
