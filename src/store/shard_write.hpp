#pragma once
// A shard's exclusive lock as every change takes it (ShardWrite), and
// several of them at once. Private to the store.

#include <atomic>
#include <mutex>
#include <shared_mutex>

#include "bloomery/store/shard_table.hpp"
#include "bloomery/store/transaction_gates.hpp"

namespace bloomery::store {

// The shard's exclusive lock, with its version odd for as long as it is held,
// so lock-free lookups that overlap a change retry. Taken once no
// transaction of another thread holds the shard (it waits for it, holding
// nothing), unless `kIgnoreGate`: then the caller checks gated() itself and
// backs off (a change that holds other locks, or runs inside an epoch
// guard, must not wait).
class ShardWrite {
public:
    using Shard = ShardTable::Shard;
    struct IgnoreGate {};
    static constexpr IgnoreGate kIgnoreGate{};

    explicit ShardWrite(Shard& shard) : shard_(shard), lock_(shard.mutex) {
        while (ShardGates::closed(shard_)) {
            lock_.unlock();
            ShardGates::wait(shard_);
            lock_.lock();
        }
        begin();
    }
    ShardWrite(Shard& shard, IgnoreGate) : shard_(shard), lock_(shard.mutex) { begin(); }
    ~ShardWrite() {
        if (lock_.owns_lock()) end();
    }
    ShardWrite(const ShardWrite&) = delete;
    ShardWrite& operator=(const ShardWrite&) = delete;

    void unlock() {
        end();
        lock_.unlock();
    }
    // Whether a transaction of another thread holds the shard.
    bool gated() const { return ShardGates::closed(shard_); }

private:
    void begin() {
        shard_.version.store(shard_.version.load(std::memory_order_relaxed) + 1,
                             std::memory_order_relaxed);
        // Orders the odd version before every change that follows.
        std::atomic_thread_fence(std::memory_order_release);
    }
    void end() {
        shard_.version.store(shard_.version.load(std::memory_order_relaxed) + 1,
                             std::memory_order_release);
    }
    Shard& shard_;
    std::unique_lock<std::shared_mutex> lock_;
};

namespace shard_write_detail {
inline const ShardTable::Shard& shard_of(const ShardTable::Shard& shard) {
    return shard;
}
inline const ShardTable::Shard& shard_of(const ShardTable::Shard* shard) {
    return *shard;
}
}  // namespace shard_write_detail

// Calls lock(locks, shard) for each of `shards` (shards or pointers to
// them) in index order, as every access that locks several takes them, so
// none waits for another in a cycle; lock() adds what it takes to `locks`.
// A transaction of another thread holding one of them is waited for with
// every lock released, and then it starts over: a change of several shards,
// or a view of all, never falls inside a transaction.
template <class Locks, class Shards, class Lock>
void lock_outside_transactions(Locks& locks, Shards&& shards, Lock&& lock) {
    for (;;) {
        const ShardTable::Shard* held = nullptr;
        for (auto&& item : shards) {
            const ShardTable::Shard& shard = shard_write_detail::shard_of(item);
            lock(locks, item);
            if (ShardGates::closed(shard)) {
                held = &shard;
                break;
            }
        }
        if (held == nullptr) return;
        locks.clear();
        ShardGates::wait(*held);
    }
}

}  // namespace bloomery::store
