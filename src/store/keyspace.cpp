#include "bloomery/store/keyspace.hpp"

#include <xxhash.h>

#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <new>
#include <thread>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/cluster/slot.hpp"
#include "bloomery/core/memory.hpp"

namespace bloomery::store {

std::int64_t now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// One key: its deadline, its filter and its name, in one allocation (the name
// follows the node). `hash_low` is the low half of the key's hash, so moving
// slots (growth, deletion) never hashes a key again. Only the deadline changes
// while a node is linked (atomic: lock-free lookups read it); replacing the
// filter links a new node instead.
struct Keyspace::Node {
    std::atomic<std::int64_t> expire_at_ms;
    FilterRef filter;
    std::uint32_t key_size;
    std::uint32_t hash_low;

    std::string_view key() const {
        return std::string_view(reinterpret_cast<const char*>(this + 1), key_size);
    }
    std::int64_t deadline() const { return expire_at_ms.load(std::memory_order_relaxed); }
    bool expired(std::int64_t now) const {
        const std::int64_t at = deadline();
        return at != 0 && at <= now;
    }
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

// Slots are read by lock-free lookups while a writer changes them: every
// access is atomic. Release on store / acquire on load publish a node's
// contents with the slot that points at it.
std::uint64_t load_slot(const std::uint64_t& slot) {
    return std::atomic_ref(const_cast<std::uint64_t&>(slot)).load(std::memory_order_acquire);
}
void store_slot(std::uint64_t& slot, std::uint64_t value) {
    std::atomic_ref(slot).store(value, std::memory_order_release);
}

}  // namespace

// The shard's exclusive lock, with its version odd for as long as it is held,
// so lock-free lookups that overlap a change retry.
class Keyspace::ShardWrite {
public:
    explicit ShardWrite(Shard& shard) : shard_(shard), lock_(shard.mutex) { begin(); }
    ~ShardWrite() {
        if (lock_.owns_lock()) end();
    }
    void unlock() {
        end();
        lock_.unlock();
    }

private:
    void begin() {
        shard_.version.store(shard_.version.load(std::memory_order_relaxed) + 1,
                             std::memory_order_relaxed);
        // Orders the odd version before every change that follows.
        std::atomic_thread_fence(std::memory_order_release);
    }
    void end() {
        shard_.version.store(shard_.version.load(std::memory_order_relaxed) + 1,
                             std::memory_order_release);
    }
    Shard& shard_;
    std::unique_lock<std::shared_mutex> lock_;
};

Keyspace::Keyspace(std::size_t num_shards) : shards_(num_shards == 0 ? 1 : num_shards) {}

Keyspace::~Keyspace() {
    if (slot_counts_) {
        charge(
            -static_cast<std::int64_t>(cluster::kSlotCount * sizeof(std::atomic<std::uint64_t>)));
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
    const std::size_t bytes = sizeof(Node) + key.size();
    void* block = ::operator new(bytes);
    Node* node = new (block) Node{{expire_at_ms},
                                  std::move(filter),
                                  static_cast<std::uint32_t>(key.size()),
                                  static_cast<std::uint32_t>(hash_key(key))};
    if (!key.empty()) std::memcpy(static_cast<char*>(block) + sizeof(Node), key.data(), key.size());
    charge(static_cast<std::int64_t>(bytes));
    return node;
}

void Keyspace::free_node(Node* node) {
    charge(-static_cast<std::int64_t>(sizeof(Node) + node->key_size));
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
    // An expired key is erased by the locked path, as Redis deletes on access.
    if (deadline != 0 && deadline <= now_ms()) return Probe::use_lock;
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
        const std::size_t home = node_of<const Node>(slots[j])->hash_low & mask;
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
    Table* fresh = new (block) Table{slots - 1};
    for (std::size_t i = 0; i < old_slots; ++i) {
        const std::uint64_t slot = old->slots()[i];
        if (slot == 0) continue;
        std::size_t k = node_of<const Node>(slot)->hash_low & fresh->mask;
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
                                           std::string_view key, std::uint64_t hash) const {
    const std::size_t slot = find_slot(shard, key, hash);
    if (slot == kNotFound) return nullptr;
    const Node* node = node_at(shard, slot);
    if (node->expired(now_ms())) {
        lock.unlock();
        reap(key, hash);
        return nullptr;
    }
    return node->filter.get();
}

bool Keyspace::reap(std::string_view key, std::uint64_t hash) const {
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
        ShardWrite write(shard);
        const std::size_t slot = find_slot(shard, key, hash);
        if (slot == kNotFound) return false;
        Node* node = node_at(shard, slot);
        if (!node->expired(now_ms())) return false;
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

bool Keyspace::store(std::string_view key, FilterRef filter, std::int64_t expire_at_ms,
                     bool replace_live) {
    const std::uint64_t hash = hash_key(key);
    Shard& shard = shard_for(hash);
    Garbage garbage;
    garbage.nodes.reserve(1);
    garbage.tables.reserve(1);
    bool stored = true;
    // Records are encoded before the change they describe (here, or under
    // the lock once it is known which): once the key changed, nothing may
    // fail to record it.
    MutationLog* log = mutation_log();
    EncodedRecord created =
        log != nullptr ? log->encode_created(key, *filter, expire_at_ms) : nullptr;
    {
        ShardWrite write(shard);
        // Under the lock, so no snapshot cut falls between the stamp and the
        // link: the new filter owes nothing to a snapshot taken before.
        filter->set_count_stamp(snapshot_counts_.current_stamp());
        reserve_expiring(shard, expire_at_ms != 0);
        const std::size_t slot = find_slot(shard, key, hash);
        if (slot == kNotFound) {
            Node* node = make_node(key, std::move(filter), expire_at_ms);
            try {
                insert_slot(shard, node, hash, garbage);
            } catch (...) {
                free_node(node);
                write.unlock();
                dispose(garbage);
                throw;
            }
            if (created) log->append(std::move(created));
        } else {
            Node* node = node_at(shard, slot);
            const bool expired = node->expired(now_ms());
            if (!expired && !replace_live) {
                stored = false;
            } else {
                EncodedRecord deleted = log != nullptr ? log->encode_deleted(key) : nullptr;
                // A new node, not a new filter in the old one: lookups read a
                // linked node's filter without a lock.
                Node* fresh = make_node(key, std::move(filter), expire_at_ms);
                if (expired) expired_keys_.fetch_add(1, std::memory_order_relaxed);
                replace_slot(shard, slot, fresh, hash);
                garbage.nodes.push_back(node);
                if (log != nullptr) {
                    // CREATE replaces the key on replay; the DEL says the old
                    // filter went (its later adds are dropped, as its bits).
                    log->append(std::move(deleted));
                    log->append(std::move(created));
                }
            }
        }
    }
    dispose(garbage);
    return stored;
}

bool Keyspace::insert_new(std::string_view key, FilterRef filter, std::int64_t expire_at_ms) {
    return store(key, std::move(filter), expire_at_ms, false);
}

void Keyspace::put(std::string_view key, FilterRef filter, std::int64_t expire_at_ms) {
    store(key, std::move(filter), expire_at_ms, true);
}

bool Keyspace::add_items(std::string_view key, std::span<const std::string_view> items,
                         const bloom::GrowthLimits& limits, const std::function<FilterRef()>* make,
                         std::vector<bloom::AddResult>& results) {
    results.resize(items.size());
    std::size_t done = 0;
    const auto run = [&](bloom::ScalableFilter& filter) {
        done = 0;
        MutationLog* log = mutation_log();
        constexpr std::size_t kBatch = bloom::ScalableFilter::kBatch;
        for (std::size_t first = 0; first < items.size(); first += kBatch) {
            const std::size_t n = std::min(kBatch, items.size() - first);
            const auto batch = items.subspan(first, n);
            const auto out = std::span(results).subspan(done, n);
            std::size_t stored;
            if (log == nullptr) {
                stored = filter.add_many(batch, limits, out);
            } else {
                bloom::AddRecorder* scope;
                try {
                    scope = &log->begin_adds(filter, n);
                } catch (const std::bad_alloc&) {
                    // No room for the batch's record: nothing of it changed.
                    results[done++] = bloom::AddResult::out_of_memory;
                    return;
                }
                DataScope close(log);
                // Before any room is taken (a small layer counts its
                // reservations): a running snapshot keeps the counts of its
                // cut.
                if (!snapshot_counts_.before_count_change(filter)) {
                    results[done++] = bloom::AddResult::out_of_memory;
                    return;
                }
                stored = filter.add_many(batch, limits, out, scope);
            }
            count_added(std::count(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(stored),
                                   bloom::AddResult::added));
            done += stored;
            if (stored < n) return;  // stopped at a full filter or an error
        }
    };
    bool found = true;
    try {
        if (make == nullptr) {
            found = with_filter(key, run);
        } else {
            found = with_filter_or_create(key, *make, run);
        }
        results.resize(done);
    } catch (const std::bad_alloc&) {
        // The key's record or entry could not be allocated (nothing of it
        // changed): the adds stop there, as at a full filter.
        results.resize(done);
        results.push_back(bloom::AddResult::out_of_memory);
    }
    return found;
}

Keyspace::ChunkStatus Keyspace::load_chunk(std::string_view key, std::int64_t iter,
                                           std::string_view data, std::string& error) {
    ChunkStatus status = ChunkStatus::loaded;
    const bool found = with_filter(key, [&](bloom::ScalableFilter& filter) {
        bloom::ChunkTarget target;
        // Checked first: a refused chunk is not recorded (nor sent to
        // replicas), however large it was.
        if (!bloom::check_chunk(filter, iter, data, target, error)) {
            status = ChunkStatus::refused;
            return;
        }
        MutationLog* log = mutation_log();
        if (log == nullptr) {
            bloom::apply_chunk(filter, target);
            return;
        }
        log->begin_chunk(filter, iter, data);
        DataScope close(log);
        bloom::apply_chunk(filter, target);
    });
    return found ? status : ChunkStatus::missing;
}

bool Keyspace::redo_adds(bloom::ScalableFilter& filter, std::span<const RecordedAdd> adds) {
    // Every layer first: a layer that cannot exist refuses the whole record
    // before anything changed, and growing cannot fail halfway through.
    std::uint32_t top = 0;
    for (const RecordedAdd& add : adds) top = std::max(top, add.layer);
    if (!adds.empty() && !filter.redo_layers(top)) return false;
    MutationLog* log = mutation_log();
    constexpr std::size_t kBatch = bloom::ScalableFilter::kBatch;
    for (std::size_t first = 0; first < adds.size(); first += kBatch) {
        const auto batch = adds.subspan(first, std::min(kBatch, adds.size() - first));
        if (log == nullptr) {
            for (const RecordedAdd& add : batch) filter.redo_add(add.layer, add.hash);
            count_added(static_cast<std::int64_t>(batch.size()));
            continue;
        }
        bloom::AddRecorder& scope = log->begin_adds(filter, batch.size());
        DataScope close(log);
        if (!snapshot_counts_.before_count_change(filter)) throw std::bad_alloc();
        for (const RecordedAdd& add : batch) {
            scope.record(add.layer, add.hash);
            filter.redo_add(add.layer, add.hash);
        }
    }
    count_added(static_cast<std::int64_t>(adds.size()));
    return true;
}

bool Keyspace::redo_chunk(bloom::ScalableFilter& filter, std::int64_t iter, std::string_view data,
                          std::string& error) {
    bloom::ChunkTarget target;
    if (!bloom::check_chunk(filter, iter, data, target, error)) return false;
    MutationLog* log = mutation_log();
    if (log == nullptr) {
        bloom::apply_chunk(filter, target);
        return true;
    }
    log->begin_chunk(filter, iter, data);
    DataScope close(log);
    bloom::apply_chunk(filter, target);
    return true;
}

bool Keyspace::erase(std::string_view key) {
    const std::uint64_t hash = hash_key(key);
    Shard& shard = shard_for(hash);
    Garbage garbage;
    garbage.nodes.reserve(1);
    garbage.tables.reserve(1);
    MutationLog* log = mutation_log();
    bool live;
    {
        ShardWrite write(shard);
        const std::size_t slot = find_slot(shard, key, hash);
        if (slot == kNotFound) return false;
        EncodedRecord record = log != nullptr ? log->encode_deleted(key) : nullptr;
        Node* node = node_at(shard, slot);
        live = !node->expired(now_ms());
        erase_slot(shard, slot, garbage);
        garbage.nodes.push_back(node);
        if (!live) expired_keys_.fetch_add(1, std::memory_order_relaxed);
        // An expired key goes as a DEL too (reap()).
        if (record) log->append(std::move(record));
    }
    dispose(garbage);
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
    const Node* node = node_at(shard, find_slot(shard, key, hash));
    return KeySnapshot{std::string(key), node->filter, node->deadline()};
}

std::optional<bool> Keyspace::update_expiry(
    std::string_view key, const std::function<std::optional<std::int64_t>(std::int64_t)>& decide) {
    const std::uint64_t hash = hash_key(key);
    Shard& shard = shard_for(hash);
    Garbage garbage;
    garbage.nodes.reserve(1);
    garbage.tables.reserve(1);
    MutationLog* log = mutation_log();
    std::optional<bool> changed;
    {
        ShardWrite write(shard);
        const std::size_t slot = find_slot(shard, key, hash);
        if (slot == kNotFound) return std::nullopt;
        Node* node = node_at(shard, slot);
        const std::int64_t now = now_ms();
        const auto encode_deleted = [&] {
            return log != nullptr ? log->encode_deleted(key) : nullptr;
        };
        if (node->expired(now)) {
            EncodedRecord deleted = encode_deleted();
            erase_slot(shard, slot, garbage);
            garbage.nodes.push_back(node);
            expired_keys_.fetch_add(1, std::memory_order_relaxed);
            if (deleted) log->append(std::move(deleted));
        } else if (const std::optional<std::int64_t> deadline = decide(node->deadline());
                   !deadline) {
            changed = false;
        } else if (*deadline != 0 && *deadline <= now) {
            EncodedRecord deleted = encode_deleted();
            erase_slot(shard, slot, garbage);
            garbage.nodes.push_back(node);
            changed = true;
            if (deleted) log->append(std::move(deleted));
        } else {
            // Encoded before the deadline changes (it was only known now).
            EncodedRecord record = log != nullptr ? log->encode_expiry(key, *deadline) : nullptr;
            const std::int64_t from = node->deadline();
            reserve_expiring(shard, from == 0 && *deadline != 0);
            account_deadline(shard, node, from, *deadline);
            node->expire_at_ms.store(*deadline, std::memory_order_relaxed);
            changed = true;
            if (record) log->append(std::move(record));
        }
    }
    dispose(garbage);
    return changed;
}

bool Keyspace::set_expiry(std::string_view key, std::int64_t expire_at_ms) {
    return update_expiry(key, [&](std::int64_t) { return expire_at_ms; }).has_value();
}

std::optional<std::int64_t> Keyspace::expiry(std::string_view key) const {
    const std::uint64_t hash = hash_key(key);
    const Shard& shard = shard_for(hash);
    std::shared_lock lock(shard.mutex);
    if (find_live(shard, lock, key, hash) == nullptr) return std::nullopt;
    return node_at(shard, find_slot(shard, key, hash))->deadline();
}

bool Keyspace::rename(std::string_view from, std::string_view to) {
    const std::uint64_t from_hash = hash_key(from);
    const std::uint64_t to_hash = hash_key(to);
    Shard& source = shard_for(from_hash);
    Shard& target = shard_for(to_hash);
    Garbage garbage;
    garbage.nodes.reserve(2);
    garbage.tables.reserve(2);
    MutationLog* log = mutation_log();
    bool renamed_key = false;
    {
        // Lock both shards in index order so two opposite renames cannot deadlock.
        Shard* first = &source < &target ? &source : &target;
        Shard* second = &source < &target ? &target : &source;
        ShardWrite first_write(*first);
        std::optional<ShardWrite> second_write;
        if (second != first) second_write.emplace(*second);

        const std::size_t slot = find_slot(source, from, from_hash);
        if (slot == kNotFound) return false;
        Node* node = node_at(source, slot);
        if (node->expired(now_ms())) {
            EncodedRecord deleted = log != nullptr ? log->encode_deleted(from) : nullptr;
            erase_slot(source, slot, garbage);
            garbage.nodes.push_back(node);
            expired_keys_.fetch_add(1, std::memory_order_relaxed);
            if (deleted) log->append(std::move(deleted));
        } else if (from == to) {
            renamed_key = true;
        } else {
            // The record and the new node are made first: if either cannot
            // be allocated nothing has changed.
            EncodedRecord renamed = log != nullptr ? log->encode_renamed(from, to) : nullptr;
            reserve_expiring(target, node->deadline() != 0);
            Node* moved = make_node(to, node->filter, node->deadline());
            const std::size_t existing = find_slot(target, to, to_hash);
            if (existing != kNotFound) {
                garbage.nodes.push_back(node_at(target, existing));
                replace_slot(target, existing, moved, to_hash);
            } else {
                try {
                    insert_slot(target, moved, to_hash, garbage);
                } catch (...) {
                    free_node(moved);
                    if (second_write) second_write->unlock();
                    first_write.unlock();
                    dispose(garbage);
                    throw;
                }
            }
            // Found again: inserting into the same shard may have rebuilt the table.
            erase_slot(source, find_slot(source, from, from_hash), garbage);
            garbage.nodes.push_back(node);
            renamed_key = true;
            if (renamed) log->append(std::move(renamed));
        }
    }
    dispose(garbage);
    return renamed_key;
}

Keyspace::Counts Keyspace::counts() const {
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
        std::shared_lock lock(shard.mutex);
        sum += shard.deadline_sum;
        with_deadline += shard.expiring.size();
    }
    if (with_deadline == 0) return 0;
    const Int128 mean = sum / static_cast<Int128>(with_deadline) - now_ms();
    return mean > 0 ? static_cast<std::int64_t>(std::min<Int128>(mean, INT64_MAX)) : 0;
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

std::size_t Keyspace::clear() {
    Garbage garbage;
    garbage.tables_and_nodes.reserve(shards_.size());
    std::size_t live = 0;
    MutationLog* log = mutation_log();
    EncodedRecord record = log != nullptr ? log->encode_cleared() : nullptr;
    {
        // Every shard in index order (as rename and view take them), so the
        // keyspace empties at one instant.
        std::deque<ShardWrite> writes;
        for (Shard& shard : shards_) writes.emplace_back(shard);
        const std::int64_t now = now_ms();
        for (Shard& shard : shards_) {
            Table* table = shard.table.load(std::memory_order_relaxed);
            if (table == nullptr) continue;
            for (std::size_t i = 0; i <= table->mask; ++i) {
                if (table->slots()[i] != 0 &&
                    !node_of<const Node>(table->slots()[i])->expired(now)) {
                    ++live;
                }
            }
            std::int64_t items = 0;
            for (std::size_t i = 0; i <= table->mask; ++i) {
                if (table->slots()[i] != 0)
                    items += node_of<const Node>(table->slots()[i])->filter->items();
            }
            shard.table.store(nullptr, std::memory_order_release);
            shard.count.store(0, std::memory_order_relaxed);
            shard.linked_items.fetch_sub(items, std::memory_order_relaxed);
            charge(-static_cast<std::int64_t>(shard.expiring.bytes()));
            shard.expiring.clear();
            shard.expiring_count.store(0, std::memory_order_relaxed);
            shard.deadline_sum = 0;
            garbage.tables_and_nodes.push_back(table);
        }
        if (slot_counts_) {
            for (std::uint32_t slot = 0; slot < cluster::kSlotCount; ++slot) {
                slot_counts_[slot].store(0, std::memory_order_relaxed);
            }
        }
        if (record) log->append(std::move(record));
    }
    // Freed with no lock held (once no lookup can see them): a million keys
    // or a terabyte of filters take a while, and other clients may already
    // create new keys meanwhile.
    dispose(garbage);
    return live;
}

std::vector<KeySnapshot> Keyspace::shard_entries(std::size_t index) const {
    std::vector<KeySnapshot> out;
    const Shard& shard = shards_.at(index);
    std::shared_lock lock(shard.mutex);
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
    std::size_t shard_index = static_cast<std::size_t>(cursor & ((std::uint64_t{1} << bits) - 1));
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
            std::shared_lock lock(shard.mutex);
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
                        if ((node->hash_low & mask) == home && !node->expired(now)) {
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

void Keyspace::enable_slot_counts() {
    if (slot_counts_) return;
    slot_counts_ = std::make_unique<std::atomic<std::uint64_t>[]>(cluster::kSlotCount);
    charge(static_cast<std::int64_t>(cluster::kSlotCount * sizeof(std::atomic<std::uint64_t>)));
}

void Keyspace::count_slot(std::string_view key, std::int64_t by) {
    slot_counts_[cluster::key_slot(key)].fetch_add(static_cast<std::uint64_t>(by),
                                                   std::memory_order_relaxed);
}

std::uint64_t Keyspace::count_keys_in_slot(std::uint16_t slot) const {
    if (!slot_counts_ || slot >= cluster::kSlotCount) return 0;
    return slot_counts_[slot].load(std::memory_order_relaxed);
}

std::vector<std::string> Keyspace::keys_in_slot(std::uint16_t slot, std::size_t limit) const {
    std::vector<std::string> out;
    if (slot >= cluster::kSlotCount) return out;
    // With counters, a slot's keys are all found before the last shard is
    // walked, more often than not; without them the walk goes to the end.
    const std::uint64_t in_slot = slot_counts_ ? count_keys_in_slot(slot) : UINT64_MAX;
    const std::int64_t now = now_ms();
    for (const Shard& shard : shards_) {
        if (out.size() >= limit || out.size() >= in_slot) break;
        std::shared_lock lock(shard.mutex);
        const Table* table = shard.table.load(std::memory_order_relaxed);
        if (table == nullptr) continue;
        for (std::size_t i = 0; i <= table->mask && out.size() < limit; ++i) {
            if (table->slots()[i] == 0) continue;
            const Node* node = node_of<const Node>(table->slots()[i]);
            if (node->expired(now) || cluster::key_slot(node->key()) != slot) continue;
            out.emplace_back(node->key());
        }
    }
    return out;
}

KeyspaceView Keyspace::view(bool for_snapshot) const {
    KeyspaceView view;
    std::vector<std::shared_lock<std::shared_mutex>> locks;
    locks.reserve(shards_.size());
    for (const Shard& shard : shards_) locks.emplace_back(shard.mutex);
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
    const std::int64_t now = now_ms();
    for (const Shard& shard : shards_) {
        const Table* table = shard.table.load(std::memory_order_relaxed);
        if (table == nullptr) continue;
        for (std::size_t i = 0; i <= table->mask; ++i) {
            if (table->slots()[i] == 0) continue;
            const Node* node = node_of<const Node>(table->slots()[i]);
            if (node->expired(now)) continue;
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
        std::shared_lock lock(shard.mutex);
        const std::size_t resume =
            shard.expiring.sample(shard.expire_cursor.load(std::memory_order_relaxed),
                                  kExpireSample, kExpireSample * 20, [&](std::uintptr_t entry) {
                                      ++sampled;
                                      const Node* node = reinterpret_cast<const Node*>(entry);
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
    const auto started = std::chrono::steady_clock::now();
    const auto spent = [&] { return std::chrono::steady_clock::now() - started >= budget; };
    std::size_t removed = 0;
    const std::size_t shards = shards_.size();
    for (std::size_t visited = 0; visited < shards; ++visited) {
        Shard& shard = shards_[expire_shard_.fetch_add(1, std::memory_order_relaxed) % shards];
        if (shard.expiring_count.load(std::memory_order_relaxed) == 0) continue;
        for (;;) {
            const auto [sampled, erased] = expire_sample(shard);
            removed += erased;
            // Again while more than a tenth of the sample had expired (the
            // shard likely holds many more), as Redis's acceptable staleness.
            if (sampled == 0 || erased * 10 <= sampled || spent()) break;
        }
        if (spent()) break;
    }
    reclaim();
    return removed;
}

}  // namespace bloomery::store
