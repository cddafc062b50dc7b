// store::ShardTable: nodes, tables, their changes and their reclamation.

#include "bloomery/store/shard_table.hpp"

#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>

#include "bloomery/core/memory.hpp"
#include "bloomery/store/epoch.hpp"
#include "shard_table_node.hpp"

namespace bloomery::store {

using namespace shard_table_detail;

namespace {

constexpr std::size_t kMinSlots = 8;

// Load factor bounds: grow past 4/5 full (linear probing stays short), shrink
// below 1/8 full so deleting most keys gives the table memory back.
bool too_full(std::size_t count, std::size_t slots) {
    return count * 5 > slots * 4;
}
bool too_empty(std::size_t count, std::size_t slots) {
    return slots > kMinSlots && count * 8 < slots;
}

std::uint64_t reverse_bits(std::uint64_t v) {
    v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
    v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
    v = ((v >> 4) & 0x0F0F0F0F0F0F0F0Full) | ((v & 0x0F0F0F0F0F0F0F0Full) << 4);
    return __builtin_bswap64(v);
}

}  // namespace

// Redis's reverse-binary cursor increment over buckets 0..mask: the high
// bits of the bucket index change fastest, so buckets visited in a table of
// one size cover, in a grown or shrunk table, exactly the buckets that hold
// their keys.
std::uint64_t shard_table_detail::next_bucket(std::uint64_t bucket, std::uint64_t mask) {
    bucket |= ~mask;
    bucket = reverse_bits(bucket);
    ++bucket;
    return reverse_bits(bucket);
}

ShardTable::ShardTable(std::size_t num_shards)
    : shards_(num_shards == 0 ? 1 : num_shards), num_shards_(shards_.size()) {}

ShardTable::~ShardTable() {
    for (Shard& shard : shards_) {
        Table* table = shard.table.exchange(nullptr);
        if (table != nullptr) free_table(table, Nodes::free);
    }
    for (Retired& retired : retired_) free_garbage(retired.garbage);
}

std::uint64_t ShardTable::hash_key(std::string_view key) {
    return XXH3_64bits(key.data(), key.size());
}

const ShardTable::Shard& ShardTable::shard_for(std::uint64_t hash) const {
    // Bits 32..47 choose the shard; the slot uses the low bits and the tag
    // the top 16, so the three choices are independent.
    return shards_[((hash >> 32) & 0xFFFF) % num_shards_];
}

ShardTable::Shard& ShardTable::shard_for(std::uint64_t hash) {
    return shards_[((hash >> 32) & 0xFFFF) % num_shards_];
}

void ShardTable::charge(std::int64_t bytes) const {
    bytes_.fetch_add(static_cast<std::uint64_t>(bytes), std::memory_order_relaxed);
    core::memory_add(core::MemoryUse::keyspace, bytes);
}

std::int64_t ShardTable::table_bytes(std::size_t slots) {
    return static_cast<std::int64_t>(sizeof(Table) + slots * sizeof(std::uint64_t));
}

std::size_t ShardTable::find_slot(const Shard& shard, std::string_view key,
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

ShardTable::Node* ShardTable::node_at(const Shard& shard, std::size_t slot) const {
    return node_of<Node>(shard.table.load(std::memory_order_relaxed)->slots()[slot]);
}

ShardTable::Node* ShardTable::make_node(std::string_view key, ValueRef value,
                                        std::int64_t expire_at_ms, std::uint32_t accessed) {
    // Key lengths are bounded by proto-max-bulk-len (at most 4 GiB - 1 by
    // the config's range), so the size fits the node's 32-bit field.
    const std::size_t bytes = Node::allocation_bytes(key.size());
    void* block = ::operator new(bytes);
    Node* node = new (block)
        Node{{expire_at_ms}, std::move(value), static_cast<std::uint32_t>(key.size()), {accessed}};
    if (!key.empty()) std::memcpy(static_cast<char*>(block) + sizeof(Node), key.data(), key.size());
    charge(static_cast<std::int64_t>(bytes));
    return node;
}

void ShardTable::free_node(Node* node) const {
    charge(-static_cast<std::int64_t>(Node::allocation_bytes(node->key_size)));
    node->~Node();  // releases the filter: freeing a big one (munmap) happens here
    ::operator delete(node);
}

void ShardTable::free_table(Table* table, Nodes nodes) const {
    const std::size_t slots = table->mask + 1;
    if (nodes == Nodes::free) {
        for (std::size_t i = 0; i < slots; ++i) {
            if (table->slots()[i] != 0) free_node(node_of<Node>(table->slots()[i]));
        }
    }
    table->~Table();
    std::free(table);
    charge(-table_bytes(slots));
}

void ShardTable::free_garbage(Garbage& garbage) const {
    for (Node* node : garbage.nodes) free_node(node);
    for (Table* table : garbage.tables) free_table(table, Nodes::keep);
    for (Table* table : garbage.tables_and_nodes) free_table(table, Nodes::free);
}

void ShardTable::insert(Shard& shard, Node* node, std::uint64_t hash, Garbage& garbage) {
    Table* table = shard.table.load(std::memory_order_relaxed);
    if (table == nullptr || too_full(shard.count + 1, table->mask + 1)) {
        const std::size_t slots = table == nullptr ? kMinSlots : (table->mask + 1) * 2;
        if (!rehash(shard, slots, garbage)) throw std::bad_alloc();
        table = shard.table.load(std::memory_order_relaxed);
    }
    const auto address = reinterpret_cast<std::uint64_t>(node);
    if ((address & ~kPointerMask) != 0) {
        // User-space addresses fit 48 bits on every 64-bit platform we build
        // for (x86-64 and AArch64 without 5-level paging hints).
        std::abort();
    }
    std::size_t i = hash & table->mask;
    while (table->slots()[i] != 0) i = (i + 1) & table->mask;
    store_slot(table->slots()[i], address | (tag_of(hash) << kTagShift));
    shard.count.store(shard.count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    shard.key_bytes.store(shard.key_bytes.load(std::memory_order_relaxed) + node->key_size,
                          std::memory_order_relaxed);
}

const ShardTable::Node* ShardTable::replace(Shard& shard, std::size_t slot, Node* node,
                                            std::uint64_t hash, Garbage& garbage) {
    Table* table = shard.table.load(std::memory_order_relaxed);
    Node* old = node_of<Node>(table->slots()[slot]);
    store_slot(table->slots()[slot],
               reinterpret_cast<std::uint64_t>(node) | (tag_of(hash) << kTagShift));
    shard.key_bytes.store(
        shard.key_bytes.load(std::memory_order_relaxed) + node->key_size - old->key_size,
        std::memory_order_relaxed);
    garbage.nodes.push_back(old);
    return old;
}

void ShardTable::erase(Shard& shard, std::size_t hole, Garbage& garbage) {
    // Backward-shift deletion: move later entries of the probe run into the
    // hole when their home slot allows it, so no tombstones accumulate.
    Table* table = shard.table.load(std::memory_order_relaxed);
    std::uint64_t* slots = table->slots();
    const std::size_t mask = table->mask;
    Node* gone = node_of<Node>(slots[hole]);
    garbage.nodes.push_back(gone);
    shard.key_bytes.store(shard.key_bytes.load(std::memory_order_relaxed) - gone->key_size,
                          std::memory_order_relaxed);
    store_slot(slots[hole], 0);
    const std::size_t count = shard.count.load(std::memory_order_relaxed) - 1;
    shard.count.store(count, std::memory_order_relaxed);
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
    if (too_empty(count, mask + 1)) {
        // Rebuild at a size that keeps the load between the two bounds; if
        // that cannot be allocated the bigger table stays, still correct.
        std::size_t size = kMinSlots;
        while (too_full(count, size)) size *= 2;
        rehash(shard, size, garbage);
    }
}

void ShardTable::detach(Shard& shard, Garbage& garbage) {
    Table* table = shard.table.load(std::memory_order_relaxed);
    if (table == nullptr) return;
    shard.table.store(nullptr, std::memory_order_release);
    shard.count.store(0, std::memory_order_relaxed);
    shard.key_bytes.store(0, std::memory_order_relaxed);
    garbage.tables_and_nodes.push_back(table);
}

bool ShardTable::rehash(Shard& shard, std::size_t slots, Garbage& garbage) {
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

void ShardTable::dispose(Garbage& garbage) const noexcept {
    if (!garbage.empty()) {
        const std::uint64_t stamp = epoch_retire_stamp();
        std::lock_guard lock(retired_mutex_);
        try {
            retired_.push_back(Retired{std::move(garbage), stamp});
        } catch (const std::bad_alloc&) {
            // No room to keep it for later, and a lookup may still read it:
            // it stays allocated (and counted in used_memory).
        }
        retired_count_.store(retired_.size(), std::memory_order_relaxed);
    }
    reclaim();
}

void ShardTable::reclaim() const noexcept {
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
        try {
            ready.reserve(n);
        } catch (const std::bad_alloc&) {
            return;  // a later round frees them
        }
        const auto end = retired_.begin() + static_cast<std::ptrdiff_t>(n);
        ready.insert(ready.end(), std::make_move_iterator(retired_.begin()),
                     std::make_move_iterator(end));
        retired_.erase(retired_.begin(), end);
        retired_count_.store(retired_.size(), std::memory_order_relaxed);
    }
    // Freed outside every lock: a million nodes or a terabyte of filters take
    // a while.
    for (Retired& retired : ready) free_garbage(retired.garbage);
}

std::size_t ShardTable::pending_reclaim() const {
    std::lock_guard lock(retired_mutex_);
    std::size_t n = 0;
    for (const Retired& retired : retired_) {
        n += retired.garbage.nodes.size() + retired.garbage.tables.size() +
             retired.garbage.tables_and_nodes.size();
    }
    return n;
}

}  // namespace bloomery::store
