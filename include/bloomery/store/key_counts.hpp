#pragma once
// Counts the keyspace (keyspace.hpp) keeps as keys come and go, so DBSIZE,
// INFO keyspace, /metrics and CLUSTER COUNTKEYSINSLOT cost O(shards) or
// O(1), whatever the key count: keys per cluster slot (SlotCounts) and
// items added (AddedItems). Keys per shard, and the items of the filters
// linked in it, are kept in each shard (shard_table.hpp); item counts at a
// snapshot's cut in SnapshotCounts (snapshot_counts.hpp).
//
// Thread safety: every member may be called from any thread, except
// SlotCounts::enable().

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace bloomery::store {

// Keys per cluster slot (core/key_slot.hpp), for CLUSTER COUNTKEYSINSLOT.
// Off by default, so a server without cluster mode pays nothing (no slot
// hash per created key, no 128 KiB of counters). Several shards hold keys of
// one slot, so the counters are atomic; they change only when a key is
// linked or unlinked, under its shard's lock.
class SlotCounts {
public:
    SlotCounts() = default;
    ~SlotCounts();
    SlotCounts(const SlotCounts&) = delete;
    SlotCounts& operator=(const SlotCounts&) = delete;

    // Call before any key exists and before clients are served (not
    // thread-safe).
    void enable();
    bool enabled() const { return counts_ != nullptr; }
    // `key` linked (+1) or unlinked (-1); nothing when off.
    void add(std::string_view key, std::int64_t by);
    // Keys linked in `slot`; 0 when off or out of range.
    std::uint64_t count(std::uint16_t slot) const;
    // Every key unlinked at once.
    void clear();
    // Bytes of the counters (MemoryUse::keyspace, MEMORY STATS'
    // overhead.hashtable.slot-to-keys).
    std::uint64_t bytes() const;

private:
    std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
};

// Items counted by adds, one counter per thread (summed when read): an add
// never writes a line another thread writes.
class AddedItems {
public:
    void add(std::int64_t items);
    std::int64_t sum() const;

private:
    struct alignas(64) Stripe {
        std::atomic<std::int64_t> value{0};
    };
    static constexpr std::size_t kStripes = 64;
    std::unique_ptr<Stripe[]> stripes_ = std::make_unique<Stripe[]>(kStripes);
};

}  // namespace bloomery::store
