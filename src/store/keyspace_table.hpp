#pragma once
// The keyspace's table, shared by the files that implement store::Keyspace
// (keyspace.cpp: nodes, tables, memory and the primitives every change
// uses; keyspace_writes.cpp: the write path; keyspace_walks.cpp: counts,
// SCAN, KEYS, views and active expiry). Not part of the store's interface.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string_view>

#include "bloomery/core/runtime_settings.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::store {

// One key: its deadline, its filter, when it was last used and its name, in
// one allocation (the name follows the node). Only the deadline and the
// access clock change while a node is linked (atomic: lock-free lookups read
// them); replacing the filter links a new node instead. Moving slots
// (growth, deletion) and SCAN find an entry's home slot by hashing its key
// again: the node keeps the access clock rather than part of the hash, so a
// short key's node stays in a 32-byte size class.
struct Keyspace::Node {
    std::atomic<std::int64_t> expire_at_ms;
    FilterRef filter;
    std::uint32_t key_size;
    // When and how often commands use the key (key_access.hpp). Written by
    // lookups only when the clock moved on since the last use (at most once
    // a second) or the counter goes up (with odds that fall as it grows),
    // so readers of a hot key rarely share a written line.
    mutable std::atomic<std::uint32_t> accessed;

    static std::size_t allocation_bytes(std::size_t key_size) { return sizeof(Node) + key_size; }
    std::string_view key() const { return {reinterpret_cast<const char*>(this + 1), key_size}; }
    // The home slot of this key in a table of mask + 1 slots.
    std::size_t home(std::size_t mask) const { return hash_key(key()) & mask; }
    void touch(const core::LfuSettings& lfu) const {
        const std::uint32_t word = accessed.load(std::memory_order_relaxed);
        const std::uint32_t clock = access_clock();
        // Not compare-and-swaps: a use lost to a racing one only makes the
        // estimate a little lower, and Redis's counter is an estimate too.
        if (key_access::stamp_of(word) == (clock & key_access::kClockMask)) {
            // Used again within the second: nothing decays; the counter
            // may go up (rarely once past a few uses, never past 255).
            const std::uint32_t counter = key_access::counter_of(word);
            if (counter < key_access::kCounterMax &&
                key_access::counts(counter, key_access::next_random(), lfu.log_factor())) {
                accessed.store(word + 1, std::memory_order_relaxed);
            }
            return;
        }
        accessed.store(key_access::used(word, clock, key_access::next_random(), lfu.log_factor(),
                                        lfu.decay_minutes()),
                       std::memory_order_relaxed);
    }
    std::int64_t deadline() const { return expire_at_ms.load(std::memory_order_relaxed); }
    bool expired(std::int64_t now) const {
        const std::int64_t at = deadline();
        return at != 0 && at <= now;
    }
};

namespace keyspace_detail {

static_assert(sizeof(FilterRef) == sizeof(void*), "a node holds one pointer to its filter");

inline constexpr unsigned kTagShift = 48;
inline constexpr std::uint64_t kPointerMask = (std::uint64_t{1} << kTagShift) - 1;
inline constexpr std::size_t kMinSlots = 8;
inline constexpr std::size_t kNotFound = ~std::size_t{0};

// Load factor bounds: grow past 4/5 full (linear probing stays short), shrink
// below 1/8 full so deleting most keys gives the table memory back.
inline bool too_full(std::size_t count, std::size_t slots) {
    return count * 5 > slots * 4;
}
inline bool too_empty(std::size_t count, std::size_t slots) {
    return slots > kMinSlots && count * 8 < slots;
}

inline std::uint64_t tag_of(std::uint64_t hash) {
    return hash >> kTagShift;
}

// An ExpirySet's entry: the address of a node with a deadline, stored as
// an integer by the set.
template <class NodeT>
inline const NodeT* expiring_node(std::uintptr_t entry) {
    return reinterpret_cast<const NodeT*>(entry);  // NOLINT(performance-no-int-to-ptr)
}

template <class NodeT>
inline NodeT* node_of(std::uint64_t slot) {
    // The slot is a tagged pointer: the tag bits cleared, what is left is
    // the node's address as the table stored it.
    return reinterpret_cast<NodeT*>(slot & kPointerMask);  // NOLINT(performance-no-int-to-ptr)
}

// Slots are read by lock-free lookups while a writer changes them: every
// access is atomic. Release on store / acquire on load publish a node's
// contents with the slot that points at it.
inline std::uint64_t load_slot(const std::uint64_t& slot) {
    return std::atomic_ref(const_cast<std::uint64_t&>(slot)).load(std::memory_order_acquire);
}
inline void store_slot(std::uint64_t& slot, std::uint64_t value) {
    std::atomic_ref(slot).store(value, std::memory_order_release);
}

}  // namespace keyspace_detail
using namespace keyspace_detail;

// The shard's exclusive lock, with its version odd for as long as it is held,
// so lock-free lookups that overlap a change retry. Taken once no
// transaction of another thread holds the shard (it waits for it, holding
// nothing), unless `kIgnoreGate`: then the caller checks gated() itself and
// backs off (a change that holds other locks, or runs inside an epoch
// guard, must not wait).
class Keyspace::ShardWrite {
public:
    struct IgnoreGate {};
    static constexpr IgnoreGate kIgnoreGate{};

    explicit ShardWrite(Shard& shard) : shard_(shard), lock_(shard.mutex) {
        while (Keyspace::gated(shard_)) {
            lock_.unlock();
            Keyspace::wait_for_gate(shard_);
            lock_.lock();
        }
        begin();
    }
    ShardWrite(Shard& shard, IgnoreGate) : shard_(shard), lock_(shard.mutex) { begin(); }
    ~ShardWrite() {
        if (lock_.owns_lock()) end();
    }
    void unlock() {
        end();
        lock_.unlock();
    }
    // Whether a transaction of another thread holds the shard.
    bool gated() const { return Keyspace::gated(shard_); }

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

}  // namespace bloomery::store
