// store::Keyspace's walks: counts, SCAN, KEYS, RANDOMKEY, cluster slots,
// snapshot views and active expiry.

#include <algorithm>
#include <bit>
#include <deque>
#include <random>

#include "bloomery/core/key_slot.hpp"
#include "bloomery/store/keyspace.hpp"
#include "shard_table_node.hpp"
#include "shard_write.hpp"

namespace bloomery::store {

Keyspace::Counts Keyspace::counts() const {
    // Transactions under way finish first, so DBSIZE does not read the
    // counts of one half made.
    for (const Shard& shard : table_.shards()) {
        if (ShardGates::closed(shard)) ShardGates::wait(shard);
    }
    Counts counts;
    std::int64_t items = items_added_.sum();
    for (std::size_t i = 0; i < table_.num_shards(); ++i) {
        const Shard& shard = table_.shard(i);
        counts.keys += shard.count.load(std::memory_order_relaxed);
        counts.key_bytes += shard.key_bytes.load(std::memory_order_relaxed);
        counts.with_expiry += expiry_.count(i);
        items += shard.linked_items.load(std::memory_order_relaxed);
    }
    counts.items = items > 0 ? static_cast<std::uint64_t>(items) : 0;
    return counts;
}

std::int64_t Keyspace::average_ttl_ms() const {
    Int128 sum = 0;
    std::size_t with_deadline = 0;
    for (std::size_t i = 0; i < table_.num_shards(); ++i) {
        if (expiry_.count(i) == 0) continue;
        std::shared_lock lock = ShardGates::read(table_.shard(i));
        sum += expiry_.deadline_sum(i);
        with_deadline += expiry_.count(i);
    }
    if (with_deadline == 0) return 0;
    const Int128 mean = sum / static_cast<Int128>(with_deadline) - now_ms();
    return mean > 0 ? static_cast<std::int64_t>(std::min<Int128>(mean, INT64_MAX)) : 0;
}

std::vector<KeySnapshot> Keyspace::shard_entries(std::size_t index) const {
    std::vector<KeySnapshot> out;
    const Shard& shard = table_.shard(index);
    std::shared_lock lock = ShardGates::read(shard);
    out.reserve(shard.count);
    const std::int64_t now = now_ms();
    table_.for_each(shard, [&](const Node& node) {
        if (node.expired(now)) return;
        out.push_back(KeySnapshot{std::string(node.key()), node.value, node.deadline()});
    });
    return out;
}

std::vector<bloom::AgeFilterRef> Keyspace::expiring_filters() const {
    std::vector<bloom::AgeFilterRef> out;
    const std::int64_t now = now_ms();
    for (std::size_t index = 0; index < table_.num_shards(); ++index) {
        const Shard& shard = table_.shard(index);
        std::shared_lock lock = ShardGates::read(shard);
        table_.for_each(shard, [&](const Node& node) {
            bloom::AgeFilter* filter = node.value.age_or_null();
            if (filter != nullptr && !node.expired(now)) {
                out.push_back(bloom::AgeFilterRef::share(*filter));
            }
        });
    }
    return out;
}

std::uint64_t Keyspace::scan(std::uint64_t cursor, std::size_t count,
                             std::vector<std::string>& keys) const {
    // The bits of the cursor that name the shard.
    const std::size_t shards = table_.num_shards();
    const auto bits = static_cast<unsigned>(std::bit_width(shards - 1));
    auto shard_index = static_cast<std::size_t>(cursor & ((std::uint64_t{1} << bits) - 1));
    std::uint64_t bucket = cursor >> bits;
    if (shard_index >= shards) return 0;
    // Buckets looked at, empty shards included: about ten per key wanted,
    // as Redis's SCAN gives up after COUNT * 10 empty buckets.
    std::size_t budget = count > SIZE_MAX / 10 ? SIZE_MAX : std::max<std::size_t>(count * 10, 1);
    const std::size_t wanted = keys.size() + count;
    const std::int64_t now = now_ms();
    const auto more = [&] { return --budget > 0 && keys.size() < wanted; };
    for (;;) {
        const Shard& shard = table_.shard(shard_index);
        if (shard.count.load(std::memory_order_relaxed) == 0) {
            more();  // one empty bucket
            bucket = 0;
        } else {
            std::shared_lock lock = ShardGates::read(shard);
            bucket = table_.scan(
                shard, bucket,
                [&](const Node& node) {
                    if (!node.expired(now)) keys.emplace_back(node.key());
                },
                more);
        }
        if (bucket == 0 && ++shard_index == shards) return 0;
        if (budget == 0 || keys.size() >= wanted) return (bucket << bits) | shard_index;
    }
}

std::optional<std::string> Keyspace::random_key() const {
    // One generator per thread: no shared state on the way.
    thread_local std::mt19937_64 random{std::random_device{}()};
    for (int draw = 0; draw < kRandomKeyDraws; ++draw) {
        // A shard by its key count (keys past their deadline not yet erased
        // included, as in every count), so each key is equally likely.
        std::uint64_t total = 0;
        for (const Shard& shard : table_.shards()) {
            total += shard.count.load(std::memory_order_relaxed);
        }
        if (total == 0) return std::nullopt;
        std::uint64_t pick = std::uniform_int_distribution<std::uint64_t>(0, total - 1)(random);
        const Shard* chosen = &table_.shards().back();
        for (const Shard& shard : table_.shards()) {
            const std::uint64_t count = shard.count.load(std::memory_order_relaxed);
            if (pick < count) {
                chosen = &shard;
                break;
            }
            pick -= count;
        }
        std::string key;
        bool expired = false;
        {
            std::shared_lock lock(chosen->mutex);
            const Node* node = table_.random_node(*chosen, [](std::size_t max) {
                return std::uniform_int_distribution<std::size_t>(0, max)(random);
            });
            if (node == nullptr) continue;
            key.assign(node->key());
            expired = node->expired(now_ms());
        }
        if (!expired) return key;
        // Erased as a lookup erases it, and another drawn (Redis's
        // dbRandomKey does the same).
        reap(key, ShardTable::hash_key(key));
    }
    return std::nullopt;
}

std::vector<std::string> Keyspace::keys_in_slot(std::uint16_t slot, std::size_t limit) const {
    std::vector<std::string> out;
    if (slot >= core::kSlotCount) return out;
    // With counters, a slot's keys are all found before the last shard is
    // walked, more often than not; without them the walk goes to the end.
    const std::uint64_t in_slot = slot_counts_.enabled() ? slot_counts_.count(slot) : UINT64_MAX;
    const std::int64_t now = now_ms();
    for (const Shard& shard : table_.shards()) {
        if (out.size() >= limit || out.size() >= in_slot) break;
        std::shared_lock lock = ShardGates::read(shard);
        table_.for_each(shard, [&](const Node& node) {
            if (out.size() >= limit) return;
            if (node.expired(now) || core::key_slot(node.key()) != slot) return;
            out.emplace_back(node.key());
        });
    }
    return out;
}

KeyspaceView Keyspace::view(ViewFor purpose) const {
    KeyspaceView view;
    std::vector<std::shared_lock<std::shared_mutex>> locks;
    locks.reserve(table_.num_shards());
    // Every shard at once, none held by a transaction of another thread (a
    // view, and a snapshot's cut, never falls inside one).
    lock_outside_transactions(locks, table_.shards(), [](auto& held, const Shard& shard) {
        held.emplace_back(shard.mutex);
    });
    // Sized first so the copy below does not reallocate while every shard is
    // locked (writers wait for the whole copy; readers do not).
    std::size_t entries = 0;
    std::size_t key_bytes = 0;
    for (const Shard& shard : table_.shards()) {
        entries += shard.count.load(std::memory_order_relaxed);
        key_bytes += shard.key_bytes.load(std::memory_order_relaxed);
    }
    view.entries_.reserve(entries);
    view.keys_.reserve(key_bytes);
    // Keys past their deadline too: records after the cut may still move
    // their deadline (a replica's primary decides), and the loader keeps
    // them until the journal after it has been redone. Each value's count
    // of references is taken: its line is asked for a few keys ahead.
    for (const Shard& shard : table_.shards()) {
        table_.for_each(
            shard,
            [&](const Node& node) {
                view.entries_.push_back(KeyspaceView::Entry{view.keys_.size(), node.key_size,
                                                            node.deadline(), node.value});
                view.keys_.append(node.key());
            },
            [](const Node& node) { node.value.prefetch(); });
    }
    view.counted_.assign(view.entries_.size(), false);
    if (MutationLog* log = mutation_log(); log != nullptr && purpose == ViewFor::snapshot) {
        view.log_id_ = log->log_id();
        // The cut: no data scope is open (every add before it has set its
        // bits and counted), none opens, and every shard is locked, so the
        // view holds exactly the records before the position; the counts
        // session keeps the counts of that instant for the filters changed
        // while the snapshot copies them.
        view.log_position_ = log->cut([&] { view.counts_ = snapshot_counts_.begin(); });
    }
    return view;
}

// ---- Active expiry ----

ExpiryIndex::Sampled Keyspace::expire_sample(std::size_t index) {
    const Shard& shard = table_.shard(index);
    const std::int64_t now = now_ms();
    std::vector<std::string> expired;
    ExpiryIndex::Sampled sampled;
    {
        // Looked at under the shared lock: most samples find nothing to erase.
        // A shard a transaction holds is left for a later round.
        std::shared_lock lock(shard.mutex);
        if (ShardGates::closed(shard)) return sampled;
        // The set holds the deadlines: only an expired key's node is read.
        sampled.looked_at = expiry_.sample_expired(index, now, [&](std::uintptr_t entry) {
            expired.emplace_back(shard_table_detail::expiring_node<Node>(entry)->key());
        });
    }
    // One at a time, each with its DEL record (reap() checks again).
    for (const std::string& key : expired) {
        sampled.erased += reap(key, ShardTable::hash_key(key)) ? 1 : 0;
    }
    return sampled;
}

std::size_t Keyspace::active_expire_cycle(std::chrono::microseconds budget) {
    table_.reclaim();
    if (expiry_.following()) return 0;  // the records decide
    const std::size_t removed =
        expiry_.run_round(budget, [this](std::size_t shard) { return expire_sample(shard); });
    table_.reclaim();
    return removed;
}

std::size_t Keyspace::expire_past_deadlines() {
    std::size_t erased = 0;
    for (std::size_t i = 0; i < table_.num_shards(); ++i) {
        if (expiry_.following()) break;
        if (expiry_.count(i) == 0) continue;
        const std::int64_t now = now_ms();
        std::vector<std::string> expired;
        {
            std::shared_lock lock = ShardGates::read(table_.shard(i));
            expiry_.visit_expired(i, now, [&](std::uintptr_t entry) {
                expired.emplace_back(shard_table_detail::expiring_node<Node>(entry)->key());
            });
        }
        for (const std::string& key : expired) {
            erased += reap(key, ShardTable::hash_key(key)) ? 1 : 0;
        }
    }
    table_.reclaim();
    return erased;
}

}  // namespace bloomery::store
