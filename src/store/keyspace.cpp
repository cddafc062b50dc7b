#include "bloomery/store/keyspace.hpp"

#include <xxhash.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "bloomery/core/memory.hpp"

namespace bloomery::store {

std::int64_t now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// One key: its deadline, its filter and its name, in one allocation (the name
// follows the node). `hash_low` is the low half of the key's hash, so moving
// slots (growth, deletion) never hashes a key again.
struct Keyspace::Node {
    std::int64_t expire_at_ms;
    FilterRef filter;
    std::uint32_t key_size;
    std::uint32_t hash_low;

    std::string_view key() const {
        return std::string_view(reinterpret_cast<const char*>(this + 1), key_size);
    }
    bool expired(std::int64_t now) const { return expire_at_ms != 0 && expire_at_ms <= now; }
};

namespace {

static_assert(sizeof(FilterRef) == sizeof(void*), "a node holds one pointer to its filter");

constexpr unsigned kTagShift = 48;
constexpr std::uint64_t kPointerMask = (std::uint64_t{1} << kTagShift) - 1;
constexpr std::size_t kMinSlots = 8;
constexpr std::size_t kNotFound = ~std::size_t{0};

// Load factor bounds: grow past 4/5 full (linear probing stays short), shrink
// below 1/8 full so deleting most keys gives the table memory back.
bool too_full(std::size_t count, std::size_t slots) {
    return count * 5 > slots * 4;
}
bool too_empty(std::size_t count, std::size_t slots) {
    return slots > kMinSlots && count * 8 < slots;
}

std::uint64_t tag_of(std::uint64_t hash) {
    return hash >> kTagShift;
}

template <class NodeT>
NodeT* node_of(std::uint64_t slot) {
    return reinterpret_cast<NodeT*>(slot & kPointerMask);
}

}  // namespace

Keyspace::Keyspace(std::size_t num_shards) : shards_(num_shards == 0 ? 1 : num_shards) {}

Keyspace::~Keyspace() {
    for (Shard& shard : shards_) {
        std::vector<FilterRef> doomed;
        release_table(shard, doomed);
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

void Keyspace::charge(std::int64_t bytes) {
    overhead_bytes_.fetch_add(static_cast<std::uint64_t>(bytes), std::memory_order_relaxed);
    core::memory_add(core::MemoryUse::keyspace, bytes);
}

void Keyspace::charge_table(std::size_t new_slots, std::size_t old_slots) {
    charge((static_cast<std::int64_t>(new_slots) - static_cast<std::int64_t>(old_slots)) *
           static_cast<std::int64_t>(sizeof(std::uint64_t)));
}

Keyspace::Node* Keyspace::make_node(std::string_view key, FilterRef filter,
                                    std::int64_t expire_at_ms) {
    // Key lengths are bounded by proto-max-bulk-len (at most 4 GiB - 1 by
    // the config's range), so the size fits the node's 32-bit field.
    const std::size_t bytes = sizeof(Node) + key.size();
    void* block = ::operator new(bytes);
    Node* node =
        new (block) Node{expire_at_ms, std::move(filter), static_cast<std::uint32_t>(key.size()),
                         static_cast<std::uint32_t>(hash_key(key))};
    if (!key.empty()) std::memcpy(static_cast<char*>(block) + sizeof(Node), key.data(), key.size());
    charge(static_cast<std::int64_t>(bytes));
    return node;
}

void Keyspace::free_node(Node* node, std::vector<FilterRef>& doomed) {
    charge(-static_cast<std::int64_t>(sizeof(Node) + node->key_size));
    // The filter is released by the caller after the shard lock is dropped:
    // freeing a large filter (munmap of gigabytes) must not stall the shard.
    doomed.push_back(std::move(node->filter));
    node->~Node();
    ::operator delete(node);
}

std::size_t Keyspace::find_slot(const Shard& shard, std::string_view key,
                                std::uint64_t hash) const {
    if (shard.slots == nullptr) return kNotFound;
    const std::uint64_t tag = tag_of(hash);
    for (std::size_t i = hash & shard.mask;; i = (i + 1) & shard.mask) {
        const std::uint64_t slot = shard.slots[i];
        if (slot == 0) return kNotFound;
        if (tag_of(slot) == tag && node_of<const Node>(slot)->key() == key) return i;
    }
}

void Keyspace::insert_slot(Shard& shard, Node* node, std::uint64_t hash) {
    if (shard.slots == nullptr || too_full(shard.count + 1, shard.mask + 1)) grow(shard);
    const auto address = reinterpret_cast<std::uint64_t>(node);
    if ((address & ~kPointerMask) != 0) {
        // User-space addresses fit 48 bits on every 64-bit platform we build
        // for (x86-64 and AArch64 without 5-level paging hints).
        std::abort();
    }
    std::size_t i = hash & shard.mask;
    while (shard.slots[i] != 0) i = (i + 1) & shard.mask;
    shard.slots[i] = address | (tag_of(hash) << kTagShift);
    ++shard.count;
}

void Keyspace::erase_slot(Shard& shard, std::size_t hole) {
    // Backward-shift deletion: move later entries of the probe run into the
    // hole when their home slot allows it, so no tombstones accumulate.
    const std::size_t mask = shard.mask;
    shard.slots[hole] = 0;
    for (std::size_t j = (hole + 1) & mask; shard.slots[j] != 0; j = (j + 1) & mask) {
        const std::size_t home = node_of<const Node>(shard.slots[j])->hash_low & mask;
        // The entry at j may fill the hole unless its home lies cyclically
        // in (hole, j], where it would then be unreachable.
        const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (stays) continue;
        shard.slots[hole] = shard.slots[j];
        shard.slots[j] = 0;
        hole = j;
    }
    --shard.count;
    if (too_empty(shard.count, mask + 1)) {
        // Rebuild at a size that keeps the load between the two bounds; if
        // that cannot be allocated the bigger table stays, still correct.
        std::size_t slots = kMinSlots;
        while (too_full(shard.count, slots)) slots *= 2;
        rehash(shard, slots);
    }
}

bool Keyspace::rehash(Shard& shard, std::size_t slots) {
    const std::size_t old_slots = shard.slots == nullptr ? 0 : shard.mask + 1;
    auto* fresh = static_cast<std::uint64_t*>(std::calloc(slots, sizeof(std::uint64_t)));
    if (fresh == nullptr) return false;
    std::uint64_t* old = shard.slots;
    shard.slots = fresh;
    shard.mask = slots - 1;
    for (std::size_t i = 0; i < old_slots; ++i) {
        if (old[i] == 0) continue;
        std::size_t k = node_of<const Node>(old[i])->hash_low & shard.mask;
        while (shard.slots[k] != 0) k = (k + 1) & shard.mask;
        shard.slots[k] = old[i];
    }
    std::free(old);
    charge_table(slots, old_slots);
    return true;
}

void Keyspace::grow(Shard& shard) {
    const std::size_t slots = shard.slots == nullptr ? kMinSlots : (shard.mask + 1) * 2;
    if (!rehash(shard, slots)) throw std::bad_alloc();
}

void Keyspace::release_table(Shard& shard, std::vector<FilterRef>& doomed) {
    if (shard.slots == nullptr) return;
    const std::size_t slots = shard.mask + 1;
    for (std::size_t i = 0; i < slots; ++i) {
        if (shard.slots[i] != 0) free_node(node_of<Node>(shard.slots[i]), doomed);
    }
    std::free(shard.slots);
    charge_table(0, slots);
    shard.slots = nullptr;
    shard.mask = 0;
    shard.count = 0;
}

bloom::ScalableFilter* Keyspace::find_live(const Shard& shard,
                                           std::shared_lock<std::shared_mutex>& lock,
                                           std::string_view key, std::uint64_t hash) const {
    const std::size_t slot = find_slot(shard, key, hash);
    if (slot == kNotFound) return nullptr;
    const Node* node = node_of<const Node>(shard.slots[slot]);
    if (node->expired(now_ms())) {
        lock.unlock();
        reap(key, hash);
        return nullptr;
    }
    return node->filter.get();
}

void Keyspace::reap(std::string_view key, std::uint64_t hash) const {
    Shard& shard = shards_[((hash >> 32) & 0xFFFF) % shards_.size()];
    std::vector<FilterRef> doomed;  // freed after the lock is released
    std::unique_lock lock(shard.mutex);
    const std::size_t slot = find_slot(shard, key, hash);
    if (slot == kNotFound) return;
    Node* node = node_of<Node>(shard.slots[slot]);
    if (!node->expired(now_ms())) return;
    auto* self = const_cast<Keyspace*>(this);
    self->erase_slot(shard, slot);
    self->free_node(node, doomed);
    expired_keys_.fetch_add(1, std::memory_order_relaxed);
    lock.unlock();
}

bool Keyspace::store(std::string_view key, FilterRef filter, std::int64_t expire_at_ms,
                     bool replace_live) {
    const std::uint64_t hash = hash_key(key);
    Shard& shard = shard_for(hash);
    FilterRef doomed;  // declared before the lock: freed after it is released
    std::unique_lock lock(shard.mutex);
    const std::size_t slot = find_slot(shard, key, hash);
    if (slot == kNotFound) {
        Node* node = make_node(key, std::move(filter), expire_at_ms);
        try {
            insert_slot(shard, node, hash);
        } catch (...) {
            std::vector<FilterRef> dropped;
            free_node(node, dropped);
            lock.unlock();
            throw;
        }
        return true;
    }
    Node* node = node_of<Node>(shard.slots[slot]);
    const bool expired = node->expired(now_ms());
    if (!expired && !replace_live) return false;
    if (expired) expired_keys_.fetch_add(1, std::memory_order_relaxed);
    doomed = std::exchange(node->filter, std::move(filter));
    node->expire_at_ms = expire_at_ms;
    return true;
}

bool Keyspace::insert_new(std::string_view key, FilterRef filter, std::int64_t expire_at_ms) {
    return store(key, std::move(filter), expire_at_ms, false);
}

void Keyspace::put(std::string_view key, FilterRef filter, std::int64_t expire_at_ms) {
    store(key, std::move(filter), expire_at_ms, true);
}

bool Keyspace::erase(std::string_view key) {
    const std::uint64_t hash = hash_key(key);
    Shard& shard = shard_for(hash);
    std::vector<FilterRef> doomed;  // freed after the lock is released
    std::unique_lock lock(shard.mutex);
    const std::size_t slot = find_slot(shard, key, hash);
    if (slot == kNotFound) return false;
    Node* node = node_of<Node>(shard.slots[slot]);
    const bool live = !node->expired(now_ms());
    erase_slot(shard, slot);
    free_node(node, doomed);
    lock.unlock();
    return live;
}

bool Keyspace::contains(std::string_view key) const {
    const std::uint64_t hash = hash_key(key);
    const Shard& shard = shard_for(hash);
    std::shared_lock lock(shard.mutex);
    return find_live(shard, lock, key, hash) != nullptr;
}

std::optional<KeySnapshot> Keyspace::get(std::string_view key) const {
    const std::uint64_t hash = hash_key(key);
    const Shard& shard = shard_for(hash);
    std::shared_lock lock(shard.mutex);
    if (find_live(shard, lock, key, hash) == nullptr) return std::nullopt;
    const Node* node = node_of<const Node>(shard.slots[find_slot(shard, key, hash)]);
    return KeySnapshot{std::string(key), node->filter, node->expire_at_ms};
}

std::optional<bool> Keyspace::update_expiry(
    std::string_view key, const std::function<std::optional<std::int64_t>(std::int64_t)>& decide) {
    const std::uint64_t hash = hash_key(key);
    Shard& shard = shard_for(hash);
    std::vector<FilterRef> doomed;  // declared before the lock: freed after it is released
    std::unique_lock lock(shard.mutex);
    const std::size_t slot = find_slot(shard, key, hash);
    if (slot == kNotFound) return std::nullopt;
    Node* node = node_of<Node>(shard.slots[slot]);
    const std::int64_t now = now_ms();
    if (node->expired(now)) {
        erase_slot(shard, slot);
        free_node(node, doomed);
        expired_keys_.fetch_add(1, std::memory_order_relaxed);
        return std::nullopt;
    }
    const std::optional<std::int64_t> deadline = decide(node->expire_at_ms);
    if (!deadline) return false;
    if (*deadline != 0 && *deadline <= now) {
        erase_slot(shard, slot);
        free_node(node, doomed);
        return true;
    }
    node->expire_at_ms = *deadline;
    return true;
}

bool Keyspace::set_expiry(std::string_view key, std::int64_t expire_at_ms) {
    return update_expiry(key, [&](std::int64_t) { return expire_at_ms; }).has_value();
}

std::optional<std::int64_t> Keyspace::expiry(std::string_view key) const {
    const std::uint64_t hash = hash_key(key);
    const Shard& shard = shard_for(hash);
    std::shared_lock lock(shard.mutex);
    if (find_live(shard, lock, key, hash) == nullptr) return std::nullopt;
    return node_of<const Node>(shard.slots[find_slot(shard, key, hash)])->expire_at_ms;
}

bool Keyspace::rename(std::string_view from, std::string_view to) {
    const std::uint64_t from_hash = hash_key(from);
    const std::uint64_t to_hash = hash_key(to);
    Shard& source = shard_for(from_hash);
    Shard& target = shard_for(to_hash);
    std::vector<FilterRef> doomed;
    // Lock both shards in index order so two opposite renames cannot deadlock.
    Shard* first = &source < &target ? &source : &target;
    Shard* second = &source < &target ? &target : &source;
    std::unique_lock<std::shared_mutex> first_lock(first->mutex);
    std::unique_lock<std::shared_mutex> second_lock;
    if (second != first) second_lock = std::unique_lock(second->mutex);

    const std::size_t slot = find_slot(source, from, from_hash);
    if (slot == kNotFound) return false;
    Node* node = node_of<Node>(source.slots[slot]);
    if (node->expired(now_ms())) {
        erase_slot(source, slot);
        free_node(node, doomed);
        expired_keys_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    if (from == to) return true;
    // The new node is made first: if allocation fails nothing has changed.
    Node* moved = make_node(to, node->filter, node->expire_at_ms);
    const std::size_t existing = find_slot(target, to, to_hash);
    if (existing != kNotFound) {
        Node* replaced = node_of<Node>(target.slots[existing]);
        target.slots[existing] =
            reinterpret_cast<std::uint64_t>(moved) | (tag_of(to_hash) << kTagShift);
        free_node(replaced, doomed);
    } else {
        try {
            insert_slot(target, moved, to_hash);
        } catch (...) {
            free_node(moved, doomed);
            throw;
        }
    }
    // Found again: inserting into the same shard may have rebuilt the table.
    erase_slot(source, find_slot(source, from, from_hash));
    free_node(node, doomed);
    return true;
}

Keyspace::Counts Keyspace::counts() const {
    // Keys past their deadline are already invisible to every lookup, so they
    // must not be counted either, even before the expiry cycle erases them.
    Counts counts;
    const std::int64_t now = now_ms();
    for (const Shard& shard : shards_) {
        std::shared_lock lock(shard.mutex);
        if (shard.slots == nullptr) continue;
        for (std::size_t i = 0; i <= shard.mask; ++i) {
            if (shard.slots[i] == 0) continue;
            const Node* node = node_of<const Node>(shard.slots[i]);
            if (node->expired(now)) continue;
            ++counts.keys;
            if (node->expire_at_ms != 0) ++counts.with_expiry;
        }
    }
    return counts;
}

template <class Lock>
std::vector<Lock> Keyspace::lock_all() const {
    std::vector<Lock> locks;
    locks.reserve(shards_.size());
    for (const Shard& shard : shards_) locks.emplace_back(shard.mutex);
    return locks;
}

std::size_t Keyspace::clear() {
    std::vector<Shard> taken(shards_.size());
    std::size_t live = 0;
    {
        auto locks = lock_all<std::unique_lock<std::shared_mutex>>();
        const std::int64_t now = now_ms();
        for (std::size_t s = 0; s < shards_.size(); ++s) {
            Shard& shard = shards_[s];
            if (shard.slots != nullptr) {
                for (std::size_t i = 0; i <= shard.mask; ++i) {
                    if (shard.slots[i] != 0 && !node_of<const Node>(shard.slots[i])->expired(now)) {
                        ++live;
                    }
                }
            }
            taken[s].slots = std::exchange(shard.slots, nullptr);
            taken[s].mask = std::exchange(shard.mask, 0);
            taken[s].count = std::exchange(shard.count, 0);
        }
    }
    // Freed with no lock held: a million keys or a terabyte of filters take a
    // while, and other clients may already create new keys meanwhile.
    for (Shard& shard : taken) {
        std::vector<FilterRef> doomed;
        release_table(shard, doomed);
    }
    return live;
}

std::vector<KeySnapshot> Keyspace::shard_entries(std::size_t index) const {
    std::vector<KeySnapshot> out;
    const Shard& shard = shards_.at(index);
    std::shared_lock lock(shard.mutex);
    if (shard.slots == nullptr) return out;
    out.reserve(shard.count);
    const std::int64_t now = now_ms();
    for (std::size_t i = 0; i <= shard.mask; ++i) {
        if (shard.slots[i] == 0) continue;
        const Node* node = node_of<const Node>(shard.slots[i]);
        if (node->expired(now)) continue;
        out.push_back(KeySnapshot{std::string(node->key()), node->filter, node->expire_at_ms});
    }
    return out;
}

KeyspaceView Keyspace::view() const {
    KeyspaceView view;
    auto locks = lock_all<std::shared_lock<std::shared_mutex>>();
    // Sized first so the copy below does not reallocate while every shard is
    // locked (writers wait for the whole copy; readers do not).
    std::size_t entries = 0;
    std::size_t key_bytes = 0;
    for (const Shard& shard : shards_) {
        if (shard.slots == nullptr) continue;
        entries += shard.count;
        for (std::size_t i = 0; i <= shard.mask; ++i) {
            if (shard.slots[i] != 0) key_bytes += node_of<const Node>(shard.slots[i])->key_size;
        }
    }
    view.entries_.reserve(entries);
    view.keys_.reserve(key_bytes);
    const std::int64_t now = now_ms();
    for (const Shard& shard : shards_) {
        if (shard.slots == nullptr) continue;
        for (std::size_t i = 0; i <= shard.mask; ++i) {
            if (shard.slots[i] == 0) continue;
            const Node* node = node_of<const Node>(shard.slots[i]);
            if (node->expired(now)) continue;
            view.entries_.push_back(KeyspaceView::Entry{view.keys_.size(), node->key_size,
                                                        node->expire_at_ms, node->filter});
            view.keys_.append(node->key());
        }
    }
    return view;
}

std::size_t Keyspace::active_expire_cycle() {
    std::size_t removed = 0;
    for (Shard& shard : shards_) {
        std::vector<FilterRef> doomed;
        const std::int64_t now = now_ms();
        // Look under the shared lock first: most cycles find nothing to do.
        bool any = false;
        {
            std::shared_lock lock(shard.mutex);
            for (std::size_t i = 0; shard.slots != nullptr && i <= shard.mask && !any; ++i) {
                any = shard.slots[i] != 0 && node_of<const Node>(shard.slots[i])->expired(now);
            }
        }
        if (!any) continue;
        std::unique_lock lock(shard.mutex);
        // Erasing shifts later entries back, so a slot is examined again
        // after an erase instead of stepping past it.
        std::size_t i = 0;
        while (shard.slots != nullptr && i <= shard.mask) {
            Node* node = shard.slots[i] == 0 ? nullptr : node_of<Node>(shard.slots[i]);
            if (node == nullptr || !node->expired(now)) {
                ++i;
                continue;
            }
            const std::size_t size_before = shard.mask;
            erase_slot(shard, i);
            free_node(node, doomed);
            ++removed;
            expired_keys_.fetch_add(1, std::memory_order_relaxed);
            if (shard.mask != size_before) i = 0;  // the table was rebuilt smaller
        }
    }
    return removed;
}

}  // namespace bloomery::store
