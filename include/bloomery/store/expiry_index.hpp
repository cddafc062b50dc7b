#pragma once
// The keys that have a deadline (a part of store::Keyspace, keyspace.hpp):
// per shard, an ExpirySet of them and the sum of their deadlines; who decides
// that a deadline has passed (Deadlines); and active expiry's rounds and
// statistics.
//
// Expiry: a key past its deadline is invisible to every lookup. Who erases
// it depends on who owns the clock (Deadlines): a primary erases it on
// access (as Redis deletes an expired key when it is touched) or by active
// expiry, which samples only the keys that have a deadline, as Redis's
// expire.c does, each time with a DEL record. While records are redone
// (journal replay at start, a replica applying its primary's stream) no key
// is erased because its deadline passed: the records decided that already,
// and a later one may move or remove the deadline (PERSIST before the
// deadline on the primary's clock, after it on ours). Writes then find such
// a key as it is.
//
// The index holds keys as opaque entries (the addresses of the table's
// nodes) and knows nothing of the table: the keyspace tells it of every
// deadline linked, changed or unlinked, and erases what it samples.
//
// Thread safety: the per-shard bookkeeping and sampling run under that
// shard's lock (exclusive to change, shared to sample); the rule, the
// counts, the statistics and bytes() may be read from any thread.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "bloomery/store/expiry_set.hpp"

namespace bloomery::store {

// A sum of up to 2^64 deadlines cannot overflow it.
__extension__ typedef __int128 Int128;

// Who decides that a key's deadline has passed.
enum class Deadlines {
    // This server: a key found past its deadline is erased, with a DEL
    // record (a primary).
    enforce,
    // Its records: a key past its deadline is hidden from reads but stays
    // until a DEL record erases it, and writes find it as it is (replay at
    // start, a replica), as Redis loads its AOF and as its replicas wait
    // for their primary's DEL.
    follow,
};

// Active expiry as INFO stats shows it (Redis's fields): the share of
// sampled keys found expired, smoothed over rounds; rounds stopped by their
// time budget; milliseconds spent in rounds.
struct ExpireStats {
    double stale_percent = 0;
    std::uint64_t time_cap_reached = 0;
    std::uint64_t cycle_milliseconds = 0;
};

class ExpiryIndex {
public:
    // Keys a round samples in a shard at a time, and the fewest a round
    // looks at in all (Redis's ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP).
    static constexpr std::size_t kSample = 20;

    explicit ExpiryIndex(std::size_t num_shards);
    ~ExpiryIndex();
    ExpiryIndex(const ExpiryIndex&) = delete;
    ExpiryIndex& operator=(const ExpiryIndex&) = delete;

    // ---- The rule ----
    // A lookup racing a change may still go by the old rule.
    void set_rule(Deadlines rule) {
        following_.store(rule == Deadlines::follow, std::memory_order_release);
    }
    bool following() const { return following_.load(std::memory_order_acquire); }
    Deadlines rule() const { return following() ? Deadlines::follow : Deadlines::enforce; }
    // Whether a key with `deadline` (0: none) is gone at `now` for a write:
    // past its deadline while this server enforces deadlines (following, it
    // is there until a DEL).
    bool lapsed(std::int64_t deadline, std::int64_t now) const {
        return deadline != 0 && deadline <= now && !following();
    }

    // ---- Bookkeeping, under the shard's exclusive lock ----
    // Room for one more key with a deadline in `shard`; throws
    // std::bad_alloc with nothing changed. Taken before the key is linked
    // or given its first deadline.
    void reserve(std::size_t shard);
    // Key `entry`'s deadline goes from `from` to `to` (0: none): linked with
    // a deadline (from 0), unlinked (to 0), or changed. Never throws
    // (reserve() came first).
    void change(std::size_t shard, std::uintptr_t entry, std::int64_t from, std::int64_t to);
    // Every key of `shard` unlinked at once.
    void clear(std::size_t shard);

    // ---- Reading ----
    // Keys with a deadline in `shard`; without a lock, a moment's figure.
    std::size_t count(std::size_t shard) const {
        return shards_[shard].count.load(std::memory_order_relaxed);
    }
    // The sum of `shard`'s deadlines; under its shared lock.
    Int128 deadline_sum(std::size_t shard) const { return shards_[shard].deadline_sum; }
    // Looks at up to kSample entries of `shard`, from where the last sample
    // of it stopped, and calls fn(entry) for those whose deadline is at or
    // before `now`; under its shared lock. Returns how many it looked at.
    std::size_t sample_expired(std::size_t shard, std::int64_t now,
                               const std::function<void(std::uintptr_t)>& fn);
    // Calls fn(entry) for every entry of `shard` whose deadline is at or
    // before `now`; under its shared lock.
    void visit_expired(std::size_t shard, std::int64_t now,
                       const std::function<void(std::uintptr_t)>& fn) const;

    // ---- Active expiry ----
    // What one sample of a shard did.
    struct Sampled {
        std::size_t looked_at = 0;
        std::size_t erased = 0;
    };
    // One round, as Redis's expire.c: visits the shards in turn (from where
    // the last round stopped), calls sample_shard(shard) for those with
    // keys that have a deadline, and again for the same shard while more
    // than a tenth of a sample had expired. It stops once it has looked at
    // kSample keys and no more than a tenth of all it looked at had
    // expired, after one pass over the shards, or once `budget` has been
    // spent: at idle a round costs kSample lookups whatever the number of
    // shards or keys, and a mass expiry is swept within the budget. Keeps
    // the statistics. Returns how many keys were erased.
    std::size_t run_round(std::chrono::microseconds budget,
                          const std::function<Sampled(std::size_t shard)>& sample_shard);
    ExpireStats stats() const;

    // Keys erased because their deadline passed, lazily or by a round.
    void count_expired() const { expired_keys_.fetch_add(1, std::memory_order_relaxed); }
    std::uint64_t expired_keys() const { return expired_keys_.load(std::memory_order_relaxed); }

    // Bytes of the ExpirySets (MemoryUse::keyspace, MEMORY STATS'
    // overhead.hashtable.expires).
    std::uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

private:
    struct alignas(64) Shard {
        ExpirySet keys;           // under the shard's lock
        Int128 deadline_sum = 0;  // of their deadlines, likewise
        // keys.size(), read without the lock.
        std::atomic<std::size_t> count{0};
        // Where active expiry resumes in `keys` (only a round moves it).
        std::atomic<std::size_t> cursor{0};
    };
    // Charges the change in `shard`'s set size since `before` bytes.
    void charge_since(const Shard& shard, std::size_t before);

    std::unique_ptr<Shard[]> shards_;
    std::size_t num_shards_;
    std::atomic<bool> following_{false};
    std::atomic<std::uint64_t> bytes_{0};
    mutable std::atomic<std::uint64_t> expired_keys_{0};
    std::atomic<std::size_t> next_shard_{0};  // where the next round starts
    // Written by run_round() (one thread at a time), read by INFO.
    std::atomic<double> stale_percent_{0};
    std::atomic<std::uint64_t> time_cap_reached_{0};
    std::atomic<std::uint64_t> round_us_{0};
};

}  // namespace bloomery::store
