#pragma once
// Writes held while MIGRATE sends keys for their last time. MIGRATE re-sends
// a filter that took adds while it was being sent, with its writes held: a
// write routed to a held key waits, its reply deferred, until the move of
// that key ends, and is then answered -ASK to the target the key went to
// (the client runs it there), or -TRYAGAIN if the key stayed here. The
// pause a writer sees is the time to copy that one filter to the target;
// keys copied while nobody wrote them hold nothing.
//
// Thread safety: every member may be called from any thread. any() is one
// relaxed load: the routing check costs nothing while no key is held.

#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bloomery::cluster {

class WriteHolds {
public:
    // Called once, on the thread that ends the hold, with whether the key
    // left this node.
    using Resume = std::function<void(bool moved)>;

    WriteHolds() = default;
    WriteHolds(const WriteHolds&) = delete;
    WriteHolds& operator=(const WriteHolds&) = delete;
    // Resumes every waiter as if its key stayed (a server that stops).
    ~WriteHolds();

    bool any() const { return held_count_.load(std::memory_order_acquire) != 0; }
    // Holds writes to `keys` (a key held twice needs two releases).
    void hold(const std::vector<std::string>& keys);
    // Ends one hold of each of `keys`; once a key is held no more, its
    // waiters are resumed with moved(key).
    void release(const std::vector<std::string>& keys,
                 const std::function<bool(std::string_view)>& moved);
    // If `key` is held, queues `resume` for when it is not and returns
    // true; otherwise returns false and keeps nothing.
    bool wait_if_held(std::string_view key, Resume resume);
    bool held(std::string_view key) const;

private:
    struct Entry {
        std::size_t holds = 0;
        std::vector<Resume> waiters;
    };
    mutable std::mutex mutex_;
    std::unordered_map<std::string, Entry> entries_;
    std::atomic<std::size_t> held_count_{0};  // entries_.size()
};

}  // namespace bloomery::cluster
