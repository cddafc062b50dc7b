// store::Keyspace's walks: counts kept per shard, SCAN, KEYS, cluster
// slots, snapshot views and active expiry.

#include "bloomery/store/keyspace.hpp"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <new>
#include <optional>
#include <random>
#include <thread>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/core/key_slot.hpp"
#include "bloomery/core/memory.hpp"
#include "keyspace_table.hpp"

namespace bloomery::store {

Keyspace::Counts Keyspace::counts() const {
    // Transactions under way finish first, so DBSIZE does not read the
    // counts of one half made.
    for (const Shard& shard : shards_) {
        if (gated(shard)) wait_for_gate(shard);
    }
    Counts counts;
    std::int64_t items = 0;
    for (const Shard& shard : shards_) {
        counts.keys += shard.count.load(std::memory_order_relaxed);
        counts.with_expiry += shard.expiring_count.load(std::memory_order_relaxed);
        items += shard.linked_items.load(std::memory_order_relaxed);
    }
    for (std::size_t i = 0; i < kItemStripes; ++i) {
        items += items_added_[i].value.load(std::memory_order_relaxed);
    }
    counts.items = items > 0 ? static_cast<std::uint64_t>(items) : 0;
    return counts;
}

std::int64_t Keyspace::average_ttl_ms() const {
    Int128 sum = 0;
    std::size_t with_deadline = 0;
    for (const Shard& shard : shards_) {
        if (shard.expiring_count.load(std::memory_order_relaxed) == 0) continue;
        std::shared_lock lock = read_shard(shard);
        sum += shard.deadline_sum;
        with_deadline += shard.expiring.size();
    }
    if (with_deadline == 0) return 0;
    const Int128 mean = sum / static_cast<Int128>(with_deadline) - now_ms();
    return mean > 0 ? static_cast<std::int64_t>(std::min<Int128>(mean, INT64_MAX)) : 0;
}

Keyspace::Overhead Keyspace::overhead() const {
    Overhead overhead;
    for (const Shard& shard : shards_) {
        std::shared_lock lock(shard.mutex);
        overhead.expires += shard.expiring.bytes();
    }
    if (slot_counts_) {
        overhead.slot_to_keys = core::kSlotCount * sizeof(std::atomic<std::uint64_t>);
    }
    const std::uint64_t total = overhead_bytes();
    const std::uint64_t apart = overhead.expires + overhead.slot_to_keys;
    overhead.main = total > apart ? total - apart : 0;
    return overhead;
}

void Keyspace::count_added(std::int64_t items) const {
    if (items == 0) return;
    // Threads take stripes in turn, so up to kItemStripes threads each have
    // their own line.
    static std::atomic<std::size_t> next_stripe{0};
    thread_local const std::size_t stripe =
        next_stripe.fetch_add(1, std::memory_order_relaxed) % kItemStripes;
    items_added_[stripe].value.fetch_add(items, std::memory_order_relaxed);
}

std::vector<KeySnapshot> Keyspace::shard_entries(std::size_t index) const {
    std::vector<KeySnapshot> out;
    const Shard& shard = shards_.at(index);
    std::shared_lock lock = read_shard(shard);
    const Table* table = shard.table.load(std::memory_order_relaxed);
    if (table == nullptr) return out;
    out.reserve(shard.count);
    const std::int64_t now = now_ms();
    for (std::size_t i = 0; i <= table->mask; ++i) {
        if (table->slots()[i] == 0) continue;
        const Node* node = node_of<const Node>(table->slots()[i]);
        if (node->expired(now)) continue;
        out.push_back(KeySnapshot{std::string(node->key()), node->filter, node->deadline()});
    }
    return out;
}

namespace {

// The bits of a SCAN cursor that name the shard.
unsigned shard_bits(std::size_t shards) {
    return static_cast<unsigned>(std::bit_width(shards - 1));
}

std::uint64_t reverse_bits(std::uint64_t v) {
    v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
    v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
    v = ((v >> 4) & 0x0F0F0F0F0F0F0F0Full) | ((v & 0x0F0F0F0F0F0F0F0Full) << 4);
    return __builtin_bswap64(v);
}

// Redis's reverse-binary cursor increment over buckets 0..mask: the high
// bits of the bucket index change fastest, so buckets visited in a table of
// one size cover, in a grown or shrunk table, exactly the buckets that hold
// their keys.
std::uint64_t next_bucket(std::uint64_t v, std::uint64_t mask) {
    v |= ~mask;
    v = reverse_bits(v);
    ++v;
    return reverse_bits(v);
}

}  // namespace

std::uint64_t Keyspace::scan(std::uint64_t cursor, std::size_t count,
                             std::vector<std::string>& keys) const {
    const unsigned bits = shard_bits(shards_.size());
    auto shard_index = static_cast<std::size_t>(cursor & ((std::uint64_t{1} << bits) - 1));
    std::uint64_t v = cursor >> bits;
    if (shard_index >= shards_.size()) return 0;
    // Buckets looked at, empty shards included: about ten per key wanted,
    // as Redis's SCAN gives up after COUNT * 10 empty buckets.
    std::size_t budget = count > SIZE_MAX / 10 ? SIZE_MAX : std::max<std::size_t>(count * 10, 1);
    const std::size_t wanted = keys.size() + count;
    const std::int64_t now = now_ms();
    for (;;) {
        const Shard& shard = shards_[shard_index];
        bool shard_done = true;
        if (shard.count.load(std::memory_order_relaxed) == 0) {
            --budget;
        } else {
            std::shared_lock lock = read_shard(shard);
            const Table* table = shard.table.load(std::memory_order_relaxed);
            if (table == nullptr) {
                --budget;
            } else {
                const std::uint64_t mask = table->mask;
                const std::uint64_t* slots = table->slots();
                do {
                    // The bucket's keys lie in the probe run from its home
                    // slot up to the next empty slot.
                    const std::uint64_t home = v & mask;
                    for (std::uint64_t i = home; slots[i] != 0; i = (i + 1) & mask) {
                        const Node* node = node_of<const Node>(slots[i]);
                        if (node->home(mask) == home && !node->expired(now)) {
                            keys.emplace_back(node->key());
                        }
                    }
                    --budget;
                    v = next_bucket(v, mask);
                } while (v != 0 && budget > 0 && keys.size() < wanted);
                shard_done = v == 0;
            }
        }
        if (shard_done) {
            v = 0;
            if (++shard_index == shards_.size()) return 0;
        }
        if (budget == 0 || keys.size() >= wanted) {
            return (v << bits) | shard_index;
        }
    }
}

std::optional<std::string> Keyspace::random_key() const {
    // One generator per thread: no shared state on the way.
    thread_local std::mt19937_64 random{std::random_device{}()};
    for (int draw = 0; draw < kRandomKeyDraws; ++draw) {
        // A shard by its key count (keys past their deadline not yet erased
        // included, as in every count), so each key is equally likely.
        std::uint64_t total = 0;
        for (const Shard& shard : shards_) total += shard.count.load(std::memory_order_relaxed);
        if (total == 0) return std::nullopt;
        std::uint64_t pick = std::uniform_int_distribution<std::uint64_t>(0, total - 1)(random);
        const Shard* chosen = &shards_.back();
        for (const Shard& shard : shards_) {
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
            const Table* table = chosen->table.load(std::memory_order_relaxed);
            if (table == nullptr || chosen->count.load(std::memory_order_relaxed) == 0) continue;
            const std::uint64_t* slots = table->slots();
            std::uniform_int_distribution<std::size_t> any_slot(0, table->mask);
            // Slots at random until one holds a key: each key as likely as
            // any other. A table is at least 1/8 full (it shrinks below
            // that), so this takes 8 probes on average; after 256 misses
            // (a chance below 10^-14) the next key from there is taken.
            std::size_t i = any_slot(random);
            for (int probe = 1; slots[i] == 0 && probe < 256; ++probe) i = any_slot(random);
            while (slots[i] == 0) i = (i + 1) & table->mask;
            const Node* node = node_of<const Node>(slots[i]);
            key.assign(node->key());
            expired = node->expired(now_ms());
        }
        if (!expired) return key;
        // Erased as a lookup erases it, and another drawn (Redis's
        // dbRandomKey does the same).
        reap(key, hash_key(key));
    }
    return std::nullopt;
}

void Keyspace::enable_slot_counts() {
    if (slot_counts_) return;
    slot_counts_ = std::make_unique<std::atomic<std::uint64_t>[]>(core::kSlotCount);
    charge(static_cast<std::int64_t>(core::kSlotCount * sizeof(std::atomic<std::uint64_t>)));
}

void Keyspace::count_slot(std::string_view key, std::int64_t by) {
    slot_counts_[core::key_slot(key)].fetch_add(static_cast<std::uint64_t>(by),
                                                std::memory_order_relaxed);
}

std::uint64_t Keyspace::count_keys_in_slot(std::uint16_t slot) const {
    if (!slot_counts_ || slot >= core::kSlotCount) return 0;
    return slot_counts_[slot].load(std::memory_order_relaxed);
}

std::vector<std::string> Keyspace::keys_in_slot(std::uint16_t slot, std::size_t limit) const {
    std::vector<std::string> out;
    if (slot >= core::kSlotCount) return out;
    // With counters, a slot's keys are all found before the last shard is
    // walked, more often than not; without them the walk goes to the end.
    const std::uint64_t in_slot = slot_counts_ ? count_keys_in_slot(slot) : UINT64_MAX;
    const std::int64_t now = now_ms();
    for (const Shard& shard : shards_) {
        if (out.size() >= limit || out.size() >= in_slot) break;
        std::shared_lock lock = read_shard(shard);
        const Table* table = shard.table.load(std::memory_order_relaxed);
        if (table == nullptr) continue;
        for (std::size_t i = 0; i <= table->mask && out.size() < limit; ++i) {
            if (table->slots()[i] == 0) continue;
            const Node* node = node_of<const Node>(table->slots()[i]);
            if (node->expired(now) || core::key_slot(node->key()) != slot) continue;
            out.emplace_back(node->key());
        }
    }
    return out;
}

KeyspaceView Keyspace::view(bool for_snapshot) const {
    KeyspaceView view;
    std::vector<std::shared_lock<std::shared_mutex>> locks;
    locks.reserve(shards_.size());
    // Every shard at once, none held by a transaction of another thread (a
    // view, and a snapshot's cut, never falls inside one): one that holds a
    // shard is waited for with every lock released.
    for (;;) {
        const Shard* held = nullptr;
        for (const Shard& shard : shards_) {
            locks.emplace_back(shard.mutex);
            if (gated(shard)) {
                held = &shard;
                break;
            }
        }
        if (held == nullptr) break;
        locks.clear();
        wait_for_gate(*held);
    }
    // Sized first so the copy below does not reallocate while every shard is
    // locked (writers wait for the whole copy; readers do not).
    std::size_t entries = 0;
    std::size_t key_bytes = 0;
    for (const Shard& shard : shards_) {
        const Table* table = shard.table.load(std::memory_order_relaxed);
        if (table == nullptr) continue;
        entries += shard.count;
        for (std::size_t i = 0; i <= table->mask; ++i) {
            if (table->slots()[i] != 0)
                key_bytes += node_of<const Node>(table->slots()[i])->key_size;
        }
    }
    view.entries_.reserve(entries);
    view.keys_.reserve(key_bytes);
    // Keys past their deadline too: records after the cut may still move
    // their deadline (a replica's primary decides), and the loader keeps
    // them until the journal after it has been redone.
    for (const Shard& shard : shards_) {
        const Table* table = shard.table.load(std::memory_order_relaxed);
        if (table == nullptr) continue;
        for (std::size_t i = 0; i <= table->mask; ++i) {
            if (table->slots()[i] == 0) continue;
            const Node* node = node_of<const Node>(table->slots()[i]);
            view.entries_.push_back(KeyspaceView::Entry{view.keys_.size(), node->key_size,
                                                        node->deadline(), node->filter});
            view.keys_.append(node->key());
        }
    }
    view.counted_.assign(view.entries_.size(), false);
    if (MutationLog* log = log_.load(std::memory_order_acquire); log != nullptr && for_snapshot) {
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

std::vector<std::uint64_t> KeyspaceView::item_counts(std::size_t i) const {
    counted_[i] = true;
    const bloom::ScalableFilter& filter = *entries_[i].filter;
    if (counts_) return counts_->counts_at_cut(filter);
    std::vector<std::uint64_t> counts(filter.num_layers());
    for (std::size_t l = 0; l < counts.size(); ++l) counts[l] = filter.layer(l).items();
    return counts;
}

KeyspaceView::~KeyspaceView() {
    if (!counts_) return;
    // A snapshot that stopped early: its session ends first, so settling the
    // filters it never read saves counts only for other running sessions.
    counts_->end();
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        if (!counted_[i]) counts_->settle(*entries_[i].filter);
    }
}

void Keyspace::wait_for_readers() {
    const std::uint64_t stamp = epoch_retire_stamp();
    while (!epoch_passed(stamp)) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

std::pair<std::size_t, std::size_t> Keyspace::expire_sample(Shard& shard) {
    const std::int64_t now = now_ms();
    std::vector<std::string> expired;
    std::size_t sampled = 0;
    {
        // Looked at under the shared lock: most samples find nothing to erase.
        // A shard a transaction holds is left for a later round.
        std::shared_lock lock(shard.mutex);
        if (gated(shard)) return {0, 0};
        const std::size_t resume =
            shard.expiring.sample(shard.expire_cursor.load(std::memory_order_relaxed),
                                  kExpireSample, kExpireSample * 20, [&](std::uintptr_t entry) {
                                      ++sampled;
                                      const auto* node = expiring_node<Node>(entry);
                                      if (node->expired(now)) expired.emplace_back(node->key());
                                  });
        shard.expire_cursor.store(resume, std::memory_order_relaxed);
    }
    std::size_t erased = 0;
    // One at a time, each with its DEL record (reap() checks again).
    for (const std::string& key : expired) erased += reap(key, hash_key(key)) ? 1 : 0;
    return {sampled, erased};
}

std::size_t Keyspace::active_expire_cycle(std::chrono::microseconds budget) {
    reclaim();
    if (following()) return 0;  // the records decide
    const auto started = std::chrono::steady_clock::now();
    const auto spent = [&] { return std::chrono::steady_clock::now() - started >= budget; };
    std::size_t removed = 0;
    std::size_t looked_at = 0;
    bool out_of_time = false;
    const std::size_t shards = shards_.size();
    for (std::size_t visited = 0; visited < shards; ++visited) {
        Shard& shard = shards_[expire_shard_.fetch_add(1, std::memory_order_relaxed) % shards];
        if (shard.expiring_count.load(std::memory_order_relaxed) == 0) continue;
        for (;;) {
            const auto [sampled, erased] = expire_sample(shard);
            removed += erased;
            looked_at += sampled;
            // Again while more than a tenth of the sample had expired (the
            // shard likely holds many more), as Redis's acceptable staleness.
            if (sampled == 0 || erased * 10 <= sampled || spent()) break;
        }
        if (spent()) {
            out_of_time = true;
            break;
        }
    }
    reclaim();
    // INFO stats, as Redis keeps them: the share of sampled keys found
    // expired, smoothed over cycles (5 % weight for each new cycle), rounds
    // stopped by their time budget, and the time spent.
    const double current =
        looked_at == 0 ? 0.0
                       : static_cast<double>(removed) * 100.0 / static_cast<double>(looked_at);
    const double stale = expire_stale_percent_.load(std::memory_order_relaxed);
    expire_stale_percent_.store(current * 0.05 + stale * 0.95, std::memory_order_relaxed);
    if (out_of_time) {
        expire_time_cap_reached_.store(expire_time_cap_reached_.load(std::memory_order_relaxed) + 1,
                                       std::memory_order_relaxed);
    }
    const auto took = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - started);
    expire_cycle_us_.store(
        expire_cycle_us_.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(took.count()),
        std::memory_order_relaxed);
    return removed;
}

std::size_t Keyspace::expire_past_deadlines() {
    std::size_t erased = 0;
    for (Shard& shard : shards_) {
        if (following()) break;
        if (shard.expiring_count.load(std::memory_order_relaxed) == 0) continue;
        const std::int64_t now = now_ms();
        std::vector<std::string> expired;
        {
            std::shared_lock lock = read_shard(shard);
            // Every slot of the set once.
            const std::size_t slots = shard.expiring.bytes() / sizeof(std::uintptr_t);
            shard.expiring.sample(0, SIZE_MAX, slots, [&](std::uintptr_t entry) {
                const auto* node = expiring_node<Node>(entry);
                if (node->expired(now)) expired.emplace_back(node->key());
            });
        }
        for (const std::string& key : expired) erased += reap(key, hash_key(key)) ? 1 : 0;
    }
    reclaim();
    return erased;
}

Keyspace::ExpireStats Keyspace::expire_stats() const {
    return {expire_stale_percent_.load(std::memory_order_relaxed),
            expire_time_cap_reached_.load(std::memory_order_relaxed),
            expire_cycle_us_.load(std::memory_order_relaxed) / 1000};
}

}  // namespace bloomery::store
