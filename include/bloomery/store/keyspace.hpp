#pragma once
// The keyspace: a map from key name to Bloom filter, sharded by a hash of the
// key, one reader/writer lock per shard, so clients using different filters do
// not contend. Filters are held by shared_ptr so that a snapshot can keep one
// alive after releasing the shard lock; the command path never copies the
// pointer (no reference-count traffic per command).
//
// Expiry: a key past its deadline is invisible to every lookup (lazy) and is
// erased by the next write to its shard or by active_expire_cycle().
//
// Thread safety: every member function may be called from any thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::store {

using FilterPtr = std::shared_ptr<bloom::ScalableFilter>;

// Milliseconds since the Unix epoch (wall clock), the unit of every deadline.
std::int64_t now_ms();

struct Entry {
    FilterPtr filter;
    std::int64_t expire_at_ms = 0;  // 0: no expiry

    bool expired(std::int64_t now) const { return expire_at_ms != 0 && expire_at_ms <= now; }
};

// One key as seen by a snapshot or SCAN: a consistent copy of its entry.
struct KeySnapshot {
    std::string key;
    FilterPtr filter;
    std::int64_t expire_at_ms;
};

class Keyspace {
public:
    explicit Keyspace(std::size_t num_shards = 64);

    std::size_t num_shards() const { return shards_.size(); }
    std::size_t shard_of(std::string_view key) const;

    // Calls fn(bloom::ScalableFilter&) under the shard's shared lock if the key
    // exists and has not expired. Returns whether it did.
    template <class Fn>
    bool with_filter(std::string_view key, Fn&& fn) const {
        const Shard& shard = shards_[shard_of(key)];
        std::shared_lock lock(shard.mutex);
        const auto* found = find_live(shard, lock, key);
        if (found == nullptr) return false;
        fn(*found->second.filter);
        return true;
    }

    // Like with_filter, but if the key is missing (or expired) calls make(),
    // which returns a FilterPtr or nullptr to refuse, and inserts that. make()
    // runs outside any lock (a large filter takes a while to allocate); fn
    // runs under the shared lock. Returns false if make() refused (and fn was
    // not called).
    template <class Make, class Fn>
    bool with_filter_or_create(std::string_view key, Make&& make, Fn&& fn) {
        // Each round finds the filter or creates it; only a client deleting
        // the key between the two steps, every time, could keep us looping.
        for (;;) {
            if (with_filter(key, fn)) return true;
            FilterPtr created = make();
            if (!created) return false;
            // If another client created the key first, its filter wins and
            // ours is dropped: the next lookup finds theirs.
            insert_new(key, std::move(created));
        }
    }

    // Inserts `filter` under `key` only if the key is absent (or expired).
    bool insert_new(std::string_view key, FilterPtr filter, std::int64_t expire_at_ms = 0);
    // Inserts or replaces.
    void put(std::string_view key, FilterPtr filter, std::int64_t expire_at_ms = 0);
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
    void clear();

    // Copies the live entries of shard `index` (for snapshots and SCAN).
    std::vector<KeySnapshot> shard_entries(std::size_t index) const;

    // Erases expired keys in every shard; returns how many.
    std::size_t active_expire_cycle();
    // Keys erased because their deadline passed, lazily or by the cycle.
    std::uint64_t expired_keys() const { return expired_keys_.load(std::memory_order_relaxed); }

    // Approximate memory held by filters, in bytes.
    std::uint64_t memory_bytes() const;

private:
    struct Shard;
    // insert_new (replace_live = false) and put (true).
    bool store(std::string_view key, FilterPtr filter, std::int64_t expire_at_ms,
               bool replace_live);
    // Looks `key` up in `shard` under `lock`, a shared lock on it. An expired
    // entry is reaped (releasing the lock) and reported missing.
    const std::pair<const std::string, Entry>* find_live(const Shard& shard,
                                                         std::shared_lock<std::shared_mutex>& lock,
                                                         std::string_view key) const;
    // Erases `key` if it is still expired (a lookup found it so, as Redis
    // deletes an expired key on access). Takes the shard's exclusive lock.
    void reap(std::string_view key) const;

    struct StringHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const noexcept {
            return std::hash<std::string_view>{}(s);
        }
    };
    struct alignas(64) Shard {
        mutable std::shared_mutex mutex;
        std::unordered_map<std::string, Entry, StringHash, std::equal_to<>> map;
    };

    Shard& shard_for(std::string_view key) { return shards_[shard_of(key)]; }
    const Shard& shard_for(std::string_view key) const { return shards_[shard_of(key)]; }

    mutable std::vector<Shard> shards_;  // mutable: lookups reap expired keys
    mutable std::atomic<std::uint64_t> expired_keys_{0};
};

}  // namespace bloomery::store
