#pragma once
// The keyspace: a map from key name to Bloom filter, sharded by a hash of the
// key, one reader/writer lock per shard, so clients using different filters do
// not contend.
//
// Memory: each key is one node of 24 bytes plus the key's bytes (a short key
// fits a 32-byte size class) referencing its filter, and one 8-byte slot of an
// open-addressing table (load factor at most 0.8). The key is hashed once
// (XXH3): some bits pick the shard, others the slot, others a 16-bit tag kept
// in the slot so most mismatches are rejected without touching the node.
// Nodes and tables are counted in core/memory.hpp (MemoryUse::keyspace).
//
// Expiry: a key past its deadline is invisible to every lookup and is erased
// on access (as Redis deletes an expired key when it is touched) or by
// active_expire_cycle().
//
// Thread safety: every member function may be called from any thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::store {

using bloom::FilterRef;

// Milliseconds since the Unix epoch (wall clock), the unit of every deadline.
std::int64_t now_ms();

// One key as seen by SCAN, KEYS or get(): a copy of its entry.
struct KeySnapshot {
    std::string key;
    FilterRef filter;
    std::int64_t expire_at_ms;
};

// A consistent copy of every live key (for snapshots): taken with every
// shard's lock held at once, so a key renamed, deleted, re-created or expired
// while it was taken appears exactly as it was at one instant. Holds a
// reference to each filter, not a copy of its bits.
class KeyspaceView {
public:
    struct Entry {
        std::uint64_t key_offset;
        std::uint32_t key_size;
        std::int64_t expire_at_ms;
        FilterRef filter;
    };
    std::size_t size() const { return entries_.size(); }
    std::string_view key(std::size_t i) const {
        return std::string_view(keys_).substr(entries_[i].key_offset, entries_[i].key_size);
    }
    const Entry& entry(std::size_t i) const { return entries_[i]; }

private:
    friend class Keyspace;
    std::string keys_;  // every key, back to back
    std::vector<Entry> entries_;
};

class Keyspace {
public:
    explicit Keyspace(std::size_t num_shards = 64);
    ~Keyspace();
    Keyspace(const Keyspace&) = delete;
    Keyspace& operator=(const Keyspace&) = delete;

    std::size_t num_shards() const { return shards_.size(); }

    // Calls fn(bloom::ScalableFilter&) under the shard's shared lock if the key
    // exists and has not expired. Returns whether it did.
    template <class Fn>
    bool with_filter(std::string_view key, Fn&& fn) const {
        const std::uint64_t hash = hash_key(key);
        const Shard& shard = shard_for(hash);
        std::shared_lock lock(shard.mutex);
        bloom::ScalableFilter* filter = find_live(shard, lock, key, hash);
        if (filter == nullptr) return false;
        fn(*filter);
        return true;
    }

    // Like with_filter, but if the key is missing (or expired) calls make(),
    // which returns a FilterRef or an empty one to refuse, and inserts that.
    // make() runs outside any lock (a large filter takes a while to
    // allocate); fn runs under the shared lock. Returns false if make()
    // refused (and fn was not called).
    template <class Make, class Fn>
    bool with_filter_or_create(std::string_view key, Make&& make, Fn&& fn) {
        // Each round finds the filter or creates it; only a client deleting
        // the key between the two steps, every time, could keep us looping.
        for (;;) {
            if (with_filter(key, fn)) return true;
            FilterRef created = make();
            if (!created) return false;
            // If another client created the key first, its filter wins and
            // ours is dropped: the next lookup finds theirs.
            insert_new(key, std::move(created));
        }
    }

    // Inserts `filter` under `key` only if the key is absent (or expired).
    bool insert_new(std::string_view key, FilterRef filter, std::int64_t expire_at_ms = 0);
    // Inserts or replaces.
    void put(std::string_view key, FilterRef filter, std::int64_t expire_at_ms = 0);
    bool erase(std::string_view key);
    bool contains(std::string_view key) const;
    std::optional<KeySnapshot> get(std::string_view key) const;

    // Deadline management, under the shard's exclusive lock so a conditional
    // change (EXPIRE NX/XX/GT/LT, PERSIST) cannot race another one.
    // decide(current) gets the current deadline (0: none) and returns the new
    // one (0: none) or nullopt to leave it. A new deadline at or before now
    // deletes the key. Returns nullopt if the key is missing, else whether
    // anything changed.
    std::optional<bool> update_expiry(
        std::string_view key,
        const std::function<std::optional<std::int64_t>(std::int64_t)>& decide);
    // Unconditional form: 0 removes the deadline. False if the key is missing.
    bool set_expiry(std::string_view key, std::int64_t expire_at_ms);
    // nullopt: key missing; 0: no expiry; otherwise the deadline.
    std::optional<std::int64_t> expiry(std::string_view key) const;

    // Moves `from` to `to`, replacing `to`. False if `from` is missing.
    bool rename(std::string_view from, std::string_view to);

    struct Counts {
        std::size_t keys = 0;
        std::size_t with_expiry = 0;
    };
    // Live keys, and how many of them have a deadline; O(keys), expired keys
    // not counted.
    Counts counts() const;
    std::size_t size() const { return counts().keys; }
    // Removes every key at one instant (every shard locked at once, as for
    // view()); returns how many live keys there were. Filters are freed after
    // the locks are released.
    std::size_t clear();

    // Copies the live entries of shard `index` (for SCAN and KEYS).
    std::vector<KeySnapshot> shard_entries(std::size_t index) const;
    // A consistent copy of every live key (see KeyspaceView).
    KeyspaceView view() const;

    // Erases expired keys in every shard; returns how many.
    std::size_t active_expire_cycle();
    // Keys erased because their deadline passed, lazily or by the cycle.
    std::uint64_t expired_keys() const { return expired_keys_.load(std::memory_order_relaxed); }

    // Bytes of nodes and tables (what this keyspace reports to core/memory.hpp
    // as MemoryUse::keyspace); filters are counted by themselves.
    std::uint64_t overhead_bytes() const { return overhead_bytes_.load(std::memory_order_relaxed); }

private:
    struct Node;
    struct alignas(64) Shard {
        mutable std::shared_mutex mutex;
        // Open addressing with linear probing; 0 marks an empty slot,
        // otherwise a Node* with a 16-bit tag of the key's hash in bits 48-63.
        std::uint64_t* slots = nullptr;
        std::size_t mask = 0;  // slot count - 1 (slot count is a power of two)
        std::size_t count = 0;
    };

    static std::uint64_t hash_key(std::string_view key);
    const Shard& shard_for(std::uint64_t hash) const;
    Shard& shard_for(std::uint64_t hash);
    // Looks `key` up in `shard` under `lock`, a shared lock on it. An expired
    // entry is reaped (releasing the lock) and reported missing.
    bloom::ScalableFilter* find_live(const Shard& shard, std::shared_lock<std::shared_mutex>& lock,
                                     std::string_view key, std::uint64_t hash) const;
    // Erases `key` if it is still expired (a lookup found it so). Takes the
    // shard's exclusive lock.
    void reap(std::string_view key, std::uint64_t hash) const;
    // insert_new (replace_live = false) and put (true).
    bool store(std::string_view key, FilterRef filter, std::int64_t expire_at_ms,
               bool replace_live);
    // Locks every shard in index order (the order rename() and every
    // all-shard operation use, so none can deadlock).
    template <class Lock>
    std::vector<Lock> lock_all() const;

    // Table primitives; the shard's exclusive lock is held by the caller
    // except for find (shared lock).
    Node* make_node(std::string_view key, FilterRef filter, std::int64_t expire_at_ms);
    void free_node(Node* node, std::vector<FilterRef>& doomed);
    std::size_t find_slot(const Shard& shard, std::string_view key, std::uint64_t hash) const;
    void insert_slot(Shard& shard, Node* node, std::uint64_t hash);
    void erase_slot(Shard& shard, std::size_t slot);
    void grow(Shard& shard);
    // Moves every entry into a fresh table of `slots` (a power of two above
    // the count); false, table unchanged, if it cannot be allocated.
    bool rehash(Shard& shard, std::size_t slots);
    void release_table(Shard& shard, std::vector<FilterRef>& doomed);
    void charge(std::int64_t bytes);
    void charge_table(std::size_t new_slots, std::size_t old_slots);

    mutable std::vector<Shard> shards_;  // mutable: lookups reap expired keys
    mutable std::atomic<std::uint64_t> expired_keys_{0};
    std::atomic<std::uint64_t> overhead_bytes_{0};
};

}  // namespace bloomery::store
