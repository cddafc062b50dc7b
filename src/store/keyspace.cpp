#include "bloomery/store/keyspace.hpp"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <new>
#include <thread>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/core/key_slot.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/core/runtime_settings.hpp"
#include "keyspace_table.hpp"

namespace bloomery::store {

std::int64_t now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

namespace {
std::uint32_t unix_seconds() {
    return static_cast<std::uint32_t>(now_ms() / 1000);
}
std::atomic<std::uint32_t> g_access_clock{unix_seconds()};
}  // namespace

std::uint32_t access_clock() {
    return g_access_clock.load(std::memory_order_relaxed);
}

void tick_access_clock() {
    const std::uint32_t now = unix_seconds();
    // Written only when it moves on: lookups load it on every command.
    if (g_access_clock.load(std::memory_order_relaxed) != now) {
        g_access_clock.store(now, std::memory_order_relaxed);
    }
}

std::uint32_t access_word(std::int64_t idle_seconds, std::uint32_t counter) {
    const std::int64_t idle = std::clamp<std::int64_t>(idle_seconds, 0, key_access::kClockMask);
    return key_access::make_word(access_clock() - static_cast<std::uint32_t>(idle),
                                 std::min(counter, key_access::kCounterMax));
}

std::int64_t idle_seconds(std::uint32_t word) {
    // Against the clock keys are stamped with, as Redis's LRU clock: a key
    // used since the last tick is idle 0.
    return key_access::elapsed(word, access_clock());
}

std::uint32_t access_frequency(std::uint32_t word, std::int64_t decay_minutes) {
    return key_access::decayed(word, access_clock(), decay_minutes);
}

Keyspace::Keyspace(std::size_t num_shards) : Keyspace(num_shards, core::LfuSettings::defaults()) {}

Keyspace::Keyspace(std::size_t num_shards, const core::LfuSettings& lfu)
    : shards_(num_shards == 0 ? 1 : num_shards), lfu_(lfu) {}

Keyspace::~Keyspace() {
    if (slot_counts_) {
        charge(-static_cast<std::int64_t>(core::kSlotCount * sizeof(std::atomic<std::uint64_t>)));
    }
    // No lookup can run any more: free at once.
    for (Shard& shard : shards_) {
        Table* table = shard.table.exchange(nullptr);
        if (table != nullptr) free_table(table, true);
    }
    for (Retired& retired : retired_) {
        for (Node* node : retired.garbage.nodes) free_node(node);
        for (Table* table : retired.garbage.tables) free_table(table, false);
        for (Table* table : retired.garbage.tables_and_nodes) free_table(table, true);
    }
}

std::uint64_t Keyspace::hash_key(std::string_view key) {
    return XXH3_64bits(key.data(), key.size());
}

const Keyspace::Shard& Keyspace::shard_for(std::uint64_t hash) const {
    // Bits 32..47 choose the shard; the slot uses the low bits and the tag
    // the top 16, so the three choices are independent.
    return shards_[((hash >> 32) & 0xFFFF) % shards_.size()];
}

Keyspace::Shard& Keyspace::shard_for(std::uint64_t hash) {
    return shards_[((hash >> 32) & 0xFFFF) % shards_.size()];
}

void Keyspace::charge(std::int64_t bytes) const {
    overhead_bytes_.fetch_add(static_cast<std::uint64_t>(bytes), std::memory_order_relaxed);
    core::memory_add(core::MemoryUse::keyspace, bytes);
}

std::int64_t Keyspace::table_bytes(std::size_t slots) {
    return static_cast<std::int64_t>(sizeof(Table) + slots * sizeof(std::uint64_t));
}

Keyspace::Node* Keyspace::make_node(std::string_view key, FilterRef filter,
                                    std::int64_t expire_at_ms) {
    // Key lengths are bounded by proto-max-bulk-len (at most 4 GiB - 1 by
    // the config's range), so the size fits the node's 32-bit field.
    const std::size_t bytes = Node::allocation_bytes(key.size());
    void* block = ::operator new(bytes);
    Node* node = new (block) Node{{expire_at_ms},
                                  std::move(filter),
                                  static_cast<std::uint32_t>(key.size()),
                                  {access_word(0, key_access::kInitialCount)}};
    if (!key.empty()) std::memcpy(static_cast<char*>(block) + sizeof(Node), key.data(), key.size());
    charge(static_cast<std::int64_t>(bytes));
    return node;
}

void Keyspace::free_node(Node* node) {
    charge(-static_cast<std::int64_t>(Node::allocation_bytes(node->key_size)));
    node->~Node();  // releases the filter: freeing a big one (munmap) happens here
    ::operator delete(node);
}

void Keyspace::free_table(Table* table, bool with_nodes) {
    const std::size_t slots = table->mask + 1;
    if (with_nodes) {
        for (std::size_t i = 0; i < slots; ++i) {
            if (table->slots()[i] != 0) free_node(node_of<Node>(table->slots()[i]));
        }
    }
    table->~Table();
    std::free(table);
    charge(-table_bytes(slots));
}

void Keyspace::dispose(Garbage& garbage) const {
    if (!garbage.empty()) {
        const std::uint64_t stamp = epoch_retire_stamp();
        std::lock_guard lock(retired_mutex_);
        retired_.push_back(Retired{std::move(garbage), stamp});
        retired_count_.store(retired_.size(), std::memory_order_relaxed);
    }
    reclaim();
}

void Keyspace::reclaim() const {
    // Most writes (every key created) retire nothing and find nothing
    // waiting: no shared lock for them.
    if (retired_count_.load(std::memory_order_relaxed) == 0) return;
    std::vector<Retired> ready;
    {
        std::lock_guard lock(retired_mutex_);
        if (retired_.empty()) return;
        // Stamps grow with the list; every entry up to the newest passed
        // stamp is free to go.
        std::size_t n = retired_.size();
        while (n > 0 && !epoch_passed(retired_[n - 1].stamp)) --n;
        if (n == 0) return;
        ready.assign(std::make_move_iterator(retired_.begin()),
                     std::make_move_iterator(retired_.begin() + static_cast<std::ptrdiff_t>(n)));
        retired_.erase(retired_.begin(), retired_.begin() + static_cast<std::ptrdiff_t>(n));
        retired_count_.store(retired_.size(), std::memory_order_relaxed);
    }
    // Freed outside every lock: a million nodes or a terabyte of filters take
    // a while.
    auto* self = const_cast<Keyspace*>(this);
    for (Retired& retired : ready) {
        for (Node* node : retired.garbage.nodes) self->free_node(node);
        for (Table* table : retired.garbage.tables) self->free_table(table, false);
        for (Table* table : retired.garbage.tables_and_nodes) self->free_table(table, true);
    }
}

std::size_t Keyspace::pending_reclaim() const {
    std::lock_guard lock(retired_mutex_);
    std::size_t n = 0;
    for (const Retired& retired : retired_) {
        n += retired.garbage.nodes.size() + retired.garbage.tables.size() +
             retired.garbage.tables_and_nodes.size();
    }
    return n;
}

Keyspace::Probe Keyspace::probe_unlocked(const Shard& shard, std::string_view key,
                                         std::uint64_t hash, bloom::ScalableFilter*& filter) const {
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
    std::int64_t deadline = 0;
    if (node != nullptr) {
        deadline = node->deadline();
        filter = node->filter.get();
    }
    // Everything above was read at one version, or it is thrown away.
    std::atomic_thread_fence(std::memory_order_acquire);
    if (shard.version.load(std::memory_order_relaxed) != version) return Probe::retry;
    if (node == nullptr) return Probe::missing;
    if (deadline != 0 && deadline <= now_ms()) {
        // Following deadlines, it is only hidden; else the locked path
        // erases it, as Redis deletes on access.
        return following() ? Probe::missing : Probe::use_lock;
    }
    // The node stays readable (and writable: its clock) while our epoch
    // guard is held, even if a writer unlinks it now.
    node->touch(lfu_);
    return Probe::found;
}

Keyspace::Node* Keyspace::node_at(const Shard& shard, std::size_t slot) const {
    return node_of<Node>(shard.table.load(std::memory_order_relaxed)->slots()[slot]);
}

std::size_t Keyspace::find_slot(const Shard& shard, std::string_view key,
                                std::uint64_t hash) const {
    const Table* table = shard.table.load(std::memory_order_relaxed);
    if (table == nullptr) return kNotFound;
    const std::uint64_t tag = tag_of(hash);
    for (std::size_t i = hash & table->mask;; i = (i + 1) & table->mask) {
        const std::uint64_t slot = table->slots()[i];
        if (slot == 0) return kNotFound;
        if (tag_of(slot) == tag && node_of<const Node>(slot)->key() == key) return i;
    }
}

void Keyspace::insert_slot(Shard& shard, Node* node, std::uint64_t hash, Garbage& garbage) {
    Table* table = shard.table.load(std::memory_order_relaxed);
    if (table == nullptr || too_full(shard.count + 1, table->mask + 1)) {
        const std::size_t slots = table == nullptr ? kMinSlots : (table->mask + 1) * 2;
        if (!rehash(shard, slots, garbage)) throw std::bad_alloc();
        table = shard.table.load(std::memory_order_relaxed);
    }
    reserve_expiring(shard, node->deadline() != 0);
    const auto address = reinterpret_cast<std::uint64_t>(node);
    if ((address & ~kPointerMask) != 0) {
        // User-space addresses fit 48 bits on every 64-bit platform we build
        // for (x86-64 and AArch64 without 5-level paging hints).
        std::abort();
    }
    std::size_t i = hash & table->mask;
    while (table->slots()[i] != 0) i = (i + 1) & table->mask;
    store_slot(table->slots()[i], address | (tag_of(hash) << kTagShift));
    account(shard, node, +1);
}

void Keyspace::replace_slot(Shard& shard, std::size_t slot, Node* node, std::uint64_t hash) {
    Table* table = shard.table.load(std::memory_order_relaxed);
    reserve_expiring(shard, node->deadline() != 0);  // reserved by the callers: never throws
    const Node* old = node_of<const Node>(table->slots()[slot]);
    store_slot(table->slots()[slot],
               reinterpret_cast<std::uint64_t>(node) | (tag_of(hash) << kTagShift));
    // The new node first: its room in the ExpirySet was reserved, and
    // unlinking the old one may shrink the set.
    account(shard, node, +1);
    account(shard, old, -1);
}

void Keyspace::reserve_expiring(Shard& shard, bool needed) {
    if (!needed) return;
    const std::size_t before = shard.expiring.bytes();
    shard.expiring.reserve(1);
    charge(static_cast<std::int64_t>(shard.expiring.bytes()) - static_cast<std::int64_t>(before));
}

void Keyspace::account(Shard& shard, const Node* node, int sign) {
    shard.count.store(shard.count.load(std::memory_order_relaxed) + sign,
                      std::memory_order_relaxed);
    shard.linked_items.fetch_add(sign * static_cast<std::int64_t>(node->filter->items()),
                                 std::memory_order_relaxed);
    if (slot_counts_) count_slot(node->key(), sign);
    if (node->deadline() != 0)
        account_deadline(shard, node, sign > 0 ? 0 : node->deadline(),
                         sign > 0 ? node->deadline() : 0);
}

void Keyspace::account_deadline(Shard& shard, const Node* node, std::int64_t from,
                                std::int64_t to) {
    const auto entry = reinterpret_cast<std::uintptr_t>(node);
    const std::size_t before = shard.expiring.bytes();
    if (from == 0 && to != 0) {
        shard.expiring.insert(entry);
    } else if (from != 0 && to == 0) {
        shard.expiring.erase(entry);
    }
    shard.deadline_sum += static_cast<Int128>(to) - static_cast<Int128>(from);
    shard.expiring_count.store(shard.expiring.size(), std::memory_order_relaxed);
    charge(static_cast<std::int64_t>(shard.expiring.bytes()) - static_cast<std::int64_t>(before));
}

void Keyspace::erase_slot(Shard& shard, std::size_t hole, Garbage& garbage) {
    // Backward-shift deletion: move later entries of the probe run into the
    // hole when their home slot allows it, so no tombstones accumulate.
    Table* table = shard.table.load(std::memory_order_relaxed);
    std::uint64_t* slots = table->slots();
    const std::size_t mask = table->mask;
    account(shard, node_of<const Node>(slots[hole]), -1);
    store_slot(slots[hole], 0);
    for (std::size_t j = (hole + 1) & mask; slots[j] != 0; j = (j + 1) & mask) {
        const std::size_t home = node_of<const Node>(slots[j])->home(mask);
        // The entry at j may fill the hole unless its home lies cyclically
        // in (hole, j], where it would then be unreachable.
        const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (stays) continue;
        store_slot(slots[hole], slots[j]);
        store_slot(slots[j], 0);
        hole = j;
    }
    if (too_empty(shard.count, mask + 1)) {
        // Rebuild at a size that keeps the load between the two bounds; if
        // that cannot be allocated the bigger table stays, still correct.
        std::size_t size = kMinSlots;
        while (too_full(shard.count, size)) size *= 2;
        rehash(shard, size, garbage);
    }
}

bool Keyspace::rehash(Shard& shard, std::size_t slots, Garbage& garbage) {
    Table* old = shard.table.load(std::memory_order_relaxed);
    const std::size_t old_slots = old == nullptr ? 0 : old->mask + 1;
    void* block = std::calloc(1, static_cast<std::size_t>(table_bytes(slots)));
    if (block == nullptr) return false;
    auto* fresh = new (block) Table{slots - 1};
    for (std::size_t i = 0; i < old_slots; ++i) {
        const std::uint64_t slot = old->slots()[i];
        if (slot == 0) continue;
        std::size_t k = node_of<const Node>(slot)->home(fresh->mask);
        while (fresh->slots()[k] != 0) k = (k + 1) & fresh->mask;
        fresh->slots()[k] = slot;
    }
    // Release: a lookup that loads the new table sees its slots filled.
    shard.table.store(fresh, std::memory_order_release);
    charge(table_bytes(slots));
    if (old != nullptr) garbage.tables.push_back(old);
    return true;
}

bloom::ScalableFilter* Keyspace::find_live(const Shard& shard,
                                           std::shared_lock<std::shared_mutex>& lock,
                                           std::string_view key, std::uint64_t hash,
                                           bool touch) const {
    const std::size_t slot = find_slot(shard, key, hash);
    if (slot == kNotFound) return nullptr;
    const Node* node = node_at(shard, slot);
    if (node->expired(now_ms())) {
        if (!following()) {
            lock.unlock();
            reap(key, hash);
        }
        return nullptr;
    }
    if (touch) node->touch(lfu_);
    return node->filter.get();
}

bool Keyspace::lapsed(const Node* node, std::int64_t now) const {
    return !following() && node->expired(now);
}

bool Keyspace::reap(std::string_view key, std::uint64_t hash) const {
    if (following()) return false;
    Shard& shard = shards_[((hash >> 32) & 0xFFFF) % shards_.size()];
    auto* self = const_cast<Keyspace*>(this);
    Garbage garbage;
    MutationLog* log = mutation_log();
    try {
        // As Redis does, an expired key leaves the journal (and replicas) as a
        // DEL, encoded before it goes; if that cannot be allocated the key
        // stays for now (it is invisible either way).
        EncodedRecord record = log != nullptr ? log->encode_deleted(key) : nullptr;
        garbage.nodes.reserve(1);
        garbage.tables.reserve(1);
        // Called inside lookups (an epoch guard held): never waits for a
        // transaction. One that holds the shard leaves the key be; it is
        // invisible either way, and erased at the next access.
        ShardWrite write(shard, ShardWrite::kIgnoreGate);
        if (write.gated()) return false;
        const std::size_t slot = find_slot(shard, key, hash);
        if (slot == kNotFound) return false;
        Node* node = node_at(shard, slot);
        if (!lapsed(node, now_ms())) return false;
        self->erase_slot(shard, slot, garbage);
        garbage.nodes.push_back(node);
        expired_keys_.fetch_add(1, std::memory_order_relaxed);
        if (record) log->append(std::move(record));
    } catch (const std::bad_alloc&) {
        return false;
    }
    dispose(garbage);
    return true;
}

}  // namespace bloomery::store
