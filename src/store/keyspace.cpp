// store::Keyspace: lookups, and linking and unlinking keys with every
// part's bookkeeping.

#include "bloomery/store/keyspace.hpp"

#include <algorithm>
#include <chrono>
#include <new>
#include <thread>

#include "bloomery/core/runtime_settings.hpp"
#include "keyspace_write.hpp"
#include "shard_table_node.hpp"
#include "shard_write.hpp"

namespace bloomery::store {

Keyspace::Keyspace(std::size_t num_shards) : Keyspace(num_shards, core::LfuSettings::defaults()) {}

Keyspace::Keyspace(std::size_t num_shards, const core::LfuSettings& lfu)
    : table_(num_shards), expiry_(table_.num_shards()), lfu_(lfu) {}

Keyspace::~Keyspace() = default;

void Keyspace::wait_for_readers() {
    const std::uint64_t stamp = epoch_retire_stamp();
    // Guards last a lookup or an add (microseconds): a few rounds of
    // yielding see most of them out before sleeping does.
    for (int round = 0; round < 64; ++round) {
        if (epoch_passed(stamp)) return;
        std::this_thread::yield();
    }
    while (!epoch_passed(stamp)) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// ---- Lookups ----

Keyspace::Probe Keyspace::probe_unlocked(const Shard& shard, std::string_view key,
                                         std::uint64_t hash, const ValueRef*& value) const {
    ShardTable::Seen seen;
    switch (table_.probe(shard, key, hash, seen)) {
        case ShardTable::Probe::retry:
            return Probe::retry;
        case ShardTable::Probe::missing:
            return Probe::missing;
        case ShardTable::Probe::found:
            break;
    }
    if (seen.deadline != 0 && seen.deadline <= now_ms()) {
        // Following deadlines, it is only hidden; else the locked path
        // erases it, as Redis deletes on access.
        return expiry_.following() ? Probe::missing : Probe::use_lock;
    }
    // The node stays readable (and writable: its access word) while our
    // epoch guard is held, even if a writer unlinks it now; a linked node's
    // filter never changes.
    seen.node->touch(lfu_);
    value = &seen.node->value;
    return Probe::found;
}

const ValueRef* Keyspace::find_live(const Shard& shard, std::shared_lock<std::shared_mutex>& lock,
                                    std::string_view key, std::uint64_t hash, Use use) const {
    const std::size_t slot = table_.find_slot(shard, key, hash);
    if (slot == ShardTable::kNotFound) return nullptr;
    const Node* node = table_.node_at(shard, slot);
    if (node->expired(now_ms())) {
        if (!expiry_.following()) {
            lock.unlock();
            reap(key, hash);
        }
        return nullptr;
    }
    if (use == Use::touch) node->touch(lfu_);
    return &node->value;
}

bool Keyspace::reap(std::string_view key, std::uint64_t hash) const {
    if (expiry_.following()) return false;
    // A lookup erases what it finds expired, so the const lookups write (no
    // keyspace is a const object).
    auto* self = const_cast<Keyspace*>(this);
    MutationLog* log = mutation_log();
    try {
        // As Redis does, an expired key leaves the journal (and replicas) as a
        // DEL, encoded before it goes; if that cannot be allocated the key
        // stays for now (it is invisible either way).
        EncodedRecord record = log != nullptr ? log->encode_deleted(key) : nullptr;
        // Called inside lookups (an epoch guard held): never waits for a
        // transaction. One that holds the shard leaves the key be; it is
        // invisible either way, and erased at the next access.
        KeyWrite write(*self, key, hash, ShardWrite::kIgnoreGate);
        if (write.gated()) return false;
        const std::size_t slot = write.find();
        if (slot == ShardTable::kNotFound || !write.lapsed(*write.node_at(slot))) return false;
        write.unlink(slot, KeyWrite::Why::expired);
        // The log read once: the record was encoded for it.
        if (record) log->append(std::move(record));
    } catch (const std::bad_alloc&) {
        return false;
    }
    return true;
}

bool Keyspace::contains(std::string_view key) const {
    const std::uint64_t hash = ShardTable::hash_key(key);
    const Shard& shard = table_.shard_for(hash);
    std::shared_lock lock = ShardGates::read(shard);
    return find_live(shard, lock, key, hash) != nullptr;
}

std::optional<KeySnapshot> Keyspace::get(std::string_view key) const {
    const std::uint64_t hash = ShardTable::hash_key(key);
    const Shard& shard = table_.shard_for(hash);
    std::shared_lock lock = ShardGates::read(shard);
    if (find_live(shard, lock, key, hash) == nullptr) return std::nullopt;
    const Node* node = table_.node_at(shard, table_.find_slot(shard, key, hash));
    return KeySnapshot{std::string(key), node->value, node->deadline()};
}

std::optional<KeySnapshot> Keyspace::linked(std::string_view key) const {
    const std::uint64_t hash = ShardTable::hash_key(key);
    const Shard& shard = table_.shard_for(hash);
    std::shared_lock lock = ShardGates::read(shard);
    const std::size_t slot = table_.find_slot(shard, key, hash);
    if (slot == ShardTable::kNotFound) return std::nullopt;
    const Node* node = table_.node_at(shard, slot);
    return KeySnapshot{std::string(key), node->value, node->deadline()};
}

std::optional<KeyDetails> Keyspace::inspect(std::string_view key) const {
    const std::uint64_t hash = ShardTable::hash_key(key);
    const Shard& shard = table_.shard_for(hash);
    std::shared_lock lock(shard.mutex);
    if (find_live(shard, lock, key, hash) == nullptr) return std::nullopt;
    const Node* node = table_.node_at(shard, table_.find_slot(shard, key, hash));
    KeyDetails details;
    details.value = node->value;
    details.expire_at_ms = node->deadline();
    details.accessed = node->accessed.load(std::memory_order_relaxed);
    // What used_memory counts for the entry: its node and its slot.
    details.entry_bytes = Node::allocation_bytes(node->key_size) + sizeof(std::uint64_t);
    // Without the copy just taken.
    details.references = static_cast<long>(details.value.references()) - 1;
    return details;
}

std::optional<std::int64_t> Keyspace::expiry(std::string_view key) const {
    const std::uint64_t hash = ShardTable::hash_key(key);
    const Shard& shard = table_.shard_for(hash);
    std::shared_lock lock = ShardGates::read(shard);
    if (find_live(shard, lock, key, hash) == nullptr) return std::nullopt;
    return table_.node_at(shard, table_.find_slot(shard, key, hash))->deadline();
}

Keyspace::WatchStamp Keyspace::watch_stamp(std::string_view key) const {
    WatchStamp stamp;
    const std::uint64_t hash = ShardTable::hash_key(key);
    const Shard& shard = table_.shard_for(hash);
    std::shared_lock lock = ShardGates::read(shard);
    const ValueRef* value = find_live(shard, lock, key, hash);
    if (value == nullptr) return stamp;
    stamp.exists = true;
    stamp.filter_id = value->id();
    stamp.expire_at_ms = table_.node_at(shard, table_.find_slot(shard, key, hash))->deadline();
    // A Bloom filter changes by adding items (or loading chunks), an
    // expiring one also by shifting; a Cuckoo filter's changes are numbered.
    if (const bloom::AgeFilter* age = value->age_or_null()) {
        stamp.items = age->items();
        stamp.generation = age->generation();
    } else if (const bloom::ScalableFilter* filter = value->bloom_or_null()) {
        stamp.items = filter->items();
    } else {
        stamp.items = value->cuckoo().changes();
    }
    stamp.chunks = chunks_loaded_.load(std::memory_order_relaxed);
    return stamp;
}

Keyspace::Transaction Keyspace::begin_transaction(std::span<const std::string_view> keys,
                                                  TransactionScope scope) {
    std::vector<std::uint32_t> held;
    if (scope == TransactionScope::every_shard) {
        held.resize(table_.num_shards());
        for (std::uint32_t i = 0; i < held.size(); ++i) held[i] = i;
    } else {
        held.reserve(keys.size());
        for (std::string_view key : keys) {
            const Shard& shard = table_.shard_for(ShardTable::hash_key(key));
            held.push_back(static_cast<std::uint32_t>(table_.index_of(shard)));
        }
        std::sort(held.begin(), held.end());
        held.erase(std::unique(held.begin(), held.end()), held.end());
    }
    return Transaction::begin(table_, std::move(held), mutation_log());
}

// ---- Linking and unlinking ----

void Keyspace::reserve_deadline(const Shard& shard, std::int64_t deadline) {
    if (deadline != 0) expiry_.reserve(table_.index_of(shard));
}

void Keyspace::account(Shard& shard, const Node& node, Linked linked) {
    const std::int64_t sign = linked == Linked::in ? 1 : -1;
    // Items of Bloom filters (Counts::items).
    if (const bloom::ScalableFilter* filter = node.value.bloom_or_null()) {
        shard.linked_items.fetch_add(sign * static_cast<std::int64_t>(filter->items()),
                                     std::memory_order_relaxed);
    }
    slot_counts_.add(node.key(), sign);
    if (const std::int64_t deadline = node.deadline(); deadline != 0) {
        const auto entry = reinterpret_cast<std::uintptr_t>(&node);
        const std::size_t index = table_.index_of(shard);
        if (linked == Linked::in) {
            expiry_.change(index, entry, 0, deadline);
        } else {
            expiry_.change(index, entry, deadline, 0);
        }
    }
}

void Keyspace::link(Shard& shard, Node* node, std::uint64_t hash, Garbage& garbage) {
    reserve_deadline(shard, node->deadline());
    table_.insert(shard, node, hash, garbage);
    account(shard, *node, Linked::in);
}

void Keyspace::relink(Shard& shard, std::size_t slot, Node* node, std::uint64_t hash,
                      Garbage& garbage) {
    reserve_deadline(shard, node->deadline());  // reserved by the callers: never throws
    const Node* old = table_.replace(shard, slot, node, hash, garbage);
    // The new node first: its room in the ExpirySet was reserved, and
    // unlinking the old one may shrink the set.
    account(shard, *node, Linked::in);
    account(shard, *old, Linked::out);
}

void Keyspace::unlink(Shard& shard, std::size_t slot, Garbage& garbage) {
    account(shard, *table_.node_at(shard, slot), Linked::out);
    table_.erase(shard, slot, garbage);
}

}  // namespace bloomery::store
