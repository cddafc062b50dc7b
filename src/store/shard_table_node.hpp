#pragma once
// The inside of store::ShardTable (shard_table.hpp): its nodes and tables,
// the lock-free lookup and the walks, for the files that implement the
// keyspace. Not part of the store's interface.

#include <atomic>
#include <cstdint>
#include <string_view>

#include "bloomery/store/key_access.hpp"
#include "bloomery/store/shard_table.hpp"

namespace bloomery::store {

// One key: its deadline, its value (a filter), when it was last used and its name, in
// one allocation (the name follows the node). Only the deadline and the
// access word change while a node is linked (atomic: lock-free lookups read
// them); replacing the value links a new node instead. Moving slots
// (growth, deletion) and SCAN find an entry's home slot by hashing its key
// again: the node keeps the access word rather than part of the hash, so a
// short key's node stays in a 32-byte size class.
struct ShardTable::Node {
    std::atomic<std::int64_t> expire_at_ms;
    ValueRef value;
    std::uint32_t key_size;
    // When and how often commands use the key (key_access.hpp); written by
    // lookups (key_access::use).
    mutable std::atomic<std::uint32_t> accessed;

    static std::size_t allocation_bytes(std::size_t key_size) { return sizeof(Node) + key_size; }
    std::string_view key() const { return {reinterpret_cast<const char*>(this + 1), key_size}; }
    // The home slot of this key in a table of mask + 1 slots.
    std::size_t home(std::size_t mask) const { return hash_key(key()) & mask; }
    // One use of the key by a command (OBJECT IDLETIME, OBJECT FREQ).
    void touch(const core::LfuSettings& lfu) const { key_access::use(accessed, lfu); }
    std::int64_t deadline() const { return expire_at_ms.load(std::memory_order_relaxed); }
    bool expired(std::int64_t now) const {
        const std::int64_t at = deadline();
        return at != 0 && at <= now;
    }
};

// Open addressing with linear probing; a slot is 0 (empty) or a Node* with a
// 16-bit tag of the key's hash in bits 48-63. The slots follow the header in
// one allocation, so a lookup loads one pointer to see both.
struct ShardTable::Table {
    std::size_t mask;  // slot count - 1 (slot count is a power of two)
    std::uint64_t* slots() { return reinterpret_cast<std::uint64_t*>(this + 1); }
    const std::uint64_t* slots() const { return reinterpret_cast<const std::uint64_t*>(this + 1); }
};

namespace shard_table_detail {

static_assert(sizeof(ValueRef) == sizeof(void*), "a node holds one pointer to its value");

inline constexpr unsigned kTagShift = 48;
inline constexpr std::uint64_t kPointerMask = (std::uint64_t{1} << kTagShift) - 1;

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

std::uint64_t next_bucket(std::uint64_t bucket, std::uint64_t mask);

}  // namespace shard_table_detail

inline ShardTable::Probe ShardTable::probe(const Shard& shard, std::string_view key,
                                           std::uint64_t hash, Seen& seen) const {
    using namespace shard_table_detail;
    // seq_cst (a plain load on x86): ordered after the EpochGuard's seq_cst
    // exchange, so a write whose unlink our guard did not hold back is seen
    // (epoch.hpp).
    const std::uint64_t version = shard.version.load(std::memory_order_seq_cst);
    if ((version & 1) != 0) return Probe::retry;
    const Table* table = shard.table.load(std::memory_order_acquire);
    const Node* node = nullptr;
    if (table != nullptr) {
        const std::uint64_t tag = tag_of(hash);
        // A table is never full, but one read while a writer shifts entries
        // may look so: give up after one lap and let the version decide.
        std::size_t i = hash & table->mask;
        for (std::size_t step = 0; step <= table->mask; ++step, i = (i + 1) & table->mask) {
            const std::uint64_t slot = load_slot(table->slots()[i]);
            if (slot == 0) break;
            if (tag_of(slot) == tag && node_of<const Node>(slot)->key() == key) {
                node = node_of<const Node>(slot);
                break;
            }
        }
    }
    const std::int64_t deadline = node != nullptr ? node->deadline() : 0;
    // Everything above was read at one version, or it is thrown away.
    std::atomic_thread_fence(std::memory_order_acquire);
    if (shard.version.load(std::memory_order_relaxed) != version) return Probe::retry;
    if (node == nullptr) return Probe::missing;
    seen.node = node;
    seen.deadline = deadline;
    return Probe::found;
}

template <class Fn, class Ahead>
void ShardTable::for_each(const Shard& shard, Fn&& fn, Ahead&& ahead) const {
    using shard_table_detail::node_of;
    const Table* table = shard.table.load(std::memory_order_relaxed);
    if (table == nullptr) return;
    const std::uint64_t* slots = table->slots();
    const std::size_t size = table->mask + 1;
    for (std::size_t i = 0; i < size; ++i) {
        // The node two strides ahead is asked for; the one a stride ahead,
        // asked for a stride ago, is in cache for ahead().
        if (i + 2 * kAheadSlots < size && slots[i + 2 * kAheadSlots] != 0) {
            __builtin_prefetch(node_of<const Node>(slots[i + 2 * kAheadSlots]));
        }
        if (i + kAheadSlots < size && slots[i + kAheadSlots] != 0) {
            ahead(*node_of<const Node>(slots[i + kAheadSlots]));
        }
        if (slots[i] != 0) fn(*node_of<const Node>(slots[i]));
    }
}

template <class Fn, class More>
std::uint64_t ShardTable::scan(const Shard& shard, std::uint64_t bucket, Fn&& fn,
                               More&& more) const {
    using namespace shard_table_detail;
    const Table* table = shard.table.load(std::memory_order_relaxed);
    if (table == nullptr) {
        more();  // one empty bucket
        return 0;
    }
    const std::uint64_t mask = table->mask;
    const std::uint64_t* slots = table->slots();
    for (;;) {
        // The bucket's keys lie in the probe run from its home slot up to
        // the next empty slot.
        const std::uint64_t home = bucket & mask;
        for (std::uint64_t i = home; slots[i] != 0; i = (i + 1) & mask) {
            const Node* node = node_of<const Node>(slots[i]);
            if (node->home(mask) == home) fn(*node);
        }
        bucket = next_bucket(bucket, mask);
        // Asked after every bucket, the last one too: it counts them.
        if (!more() || bucket == 0) return bucket;
    }
}

template <class Random>
const ShardTable::Node* ShardTable::random_node(const Shard& shard, Random&& random) const {
    const Table* table = shard.table.load(std::memory_order_relaxed);
    if (table == nullptr || shard.count.load(std::memory_order_relaxed) == 0) return nullptr;
    const std::uint64_t* slots = table->slots();
    // Slots at random until one holds a key: each key as likely as any
    // other. A table is at least 1/8 full (it shrinks below that), so this
    // takes 8 probes on average; after 256 misses (a chance below 10^-14)
    // the next key from there is taken.
    std::size_t i = random(table->mask);
    for (int probe = 1; slots[i] == 0 && probe < 256; ++probe) i = random(table->mask);
    while (slots[i] == 0) i = (i + 1) & table->mask;
    return shard_table_detail::node_of<const Node>(slots[i]);
}

}  // namespace bloomery::store
