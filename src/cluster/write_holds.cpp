// Writes held while MIGRATE sends hot keys for their last time
// (cluster/write_holds.hpp).

#include "bloomery/cluster/write_holds.hpp"

#include <utility>

namespace bloomery::cluster {

WriteHolds::~WriteHolds() {
    for (auto& [key, entry] : entries_) {
        for (Resume& resume : entry.waiters) resume(false);
    }
}

void WriteHolds::hold(const std::vector<std::string>& keys) {
    std::lock_guard lock(mutex_);
    for (const std::string& key : keys) ++entries_[key].holds;
    held_count_.store(entries_.size(), std::memory_order_release);
}

void WriteHolds::release(const std::vector<std::string>& keys,
                         const std::function<bool(std::string_view)>& moved) {
    std::vector<std::pair<std::string, std::vector<Resume>>> resumed;
    {
        std::lock_guard lock(mutex_);
        for (const std::string& key : keys) {
            auto it = entries_.find(key);
            if (it == entries_.end() || --it->second.holds != 0) continue;
            resumed.emplace_back(key, std::move(it->second.waiters));
            entries_.erase(it);
        }
        held_count_.store(entries_.size(), std::memory_order_release);
    }
    // Outside the lock: a waiter's reply may be written on this thread.
    for (auto& [key, waiters] : resumed) {
        const bool gone = moved(key);
        for (Resume& resume : waiters) resume(gone);
    }
}

bool WriteHolds::wait_if_held(std::string_view key, Resume resume) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(std::string(key));
    if (it == entries_.end()) return false;
    it->second.waiters.push_back(std::move(resume));
    return true;
}

bool WriteHolds::held(std::string_view key) const {
    std::lock_guard lock(mutex_);
    return entries_.contains(std::string(key));
}

}  // namespace bloomery::cluster
