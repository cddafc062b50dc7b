#pragma once
// The keyspace's table (a part of store::Keyspace, keyspace.hpp, which alone
// uses it): key name -> node, in shards, each an open-addressing table under
// a reader/writer lock that lookups on the hot path never take. It knows
// nothing of deadlines, journals or transactions; it only keeps, beside its
// version, the word of each shard's transaction gate (transaction_gates.hpp),
// so a lookup reads both in one line.
//
// Memory: each key is one node of 24 bytes plus the key's bytes (a key of up
// to 8 bytes fits a 32-byte size class) referencing its filter and keeping
// when the key was last used, and one 8-byte slot of an open-addressing table
// (load factor at most 0.8). The key is hashed (XXH3): some bits pick the
// shard, others the slot, others a 16-bit tag kept in the slot so most
// mismatches are rejected without touching the node. Nodes and tables are
// counted in core/memory.hpp (MemoryUse::keyspace) and in bytes().
//
// Lock-free lookups (probe()): a shard carries a sequence number that
// writers make odd while they change its table; a lookup retries if the
// number changed under it. What a change unlinks (nodes, tables, and the
// filters they hold) is handed to dispose() and freed only once every
// lookup that could still see it has left its EpochGuard (epoch.hpp).
//
// Thread safety: probe() from any thread inside an EpochGuard; find_slot(),
// node_at() and the walks under the shard's lock, shared or exclusive;
// insert(), replace(), erase() and detach() under its exclusive lock (a
// ShardWrite, private to the store); dispose(), reclaim() and
// pending_reclaim() from any thread, holding no shard lock.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string_view>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/store/value_ref.hpp"

namespace bloomery::store {

using bloom::FilterRef;

class ShardTable {
public:
    // One key: its deadline, its filter, its access word and its name, in
    // one allocation (shard_table_node.hpp, private to the store).
    struct Node;
    // One shard's slots (likewise).
    struct Table;

    struct alignas(64) Shard {
        mutable std::shared_mutex mutex;
        // Held by the transaction that holds the gate, for as long as it
        // does (transaction_gates.hpp).
        mutable std::mutex transaction_mutex;
        // The line every lookup reads; written only under the exclusive lock
        // (the gate: by transactions).
        alignas(64) std::atomic<std::uint64_t> version{0};  // odd while changing
        std::atomic<Table*> table{nullptr};
        // 0, or the token of the transaction that holds the shard.
        std::atomic<std::uint64_t> gate{0};
        // Written under the exclusive lock, read without it.
        std::atomic<std::size_t> count{0};          // keys linked
        std::atomic<std::size_t> key_bytes{0};      // the sum of their keys' sizes
        std::atomic<std::int64_t> linked_items{0};  // items of the linked filters, when linked
    };

    // What changes unlinked, until no lookup can see it (dispose()).
    struct Garbage {
        std::vector<Node*> nodes;
        std::vector<Table*> tables;            // the table only
        std::vector<Table*> tables_and_nodes;  // detach(): every node too
        bool empty() const { return nodes.empty() && tables.empty() && tables_and_nodes.empty(); }
    };

    explicit ShardTable(std::size_t num_shards);
    // Frees everything at once: no lookup may run any more.
    ~ShardTable();
    ShardTable(const ShardTable&) = delete;
    ShardTable& operator=(const ShardTable&) = delete;

    std::size_t num_shards() const { return num_shards_; }
    static std::uint64_t hash_key(std::string_view key);
    Shard& shard_for(std::uint64_t hash);
    const Shard& shard_for(std::uint64_t hash) const;
    Shard& shard(std::size_t index) { return shards_[index]; }
    const Shard& shard(std::size_t index) const { return shards_[index]; }
    std::size_t index_of(const Shard& shard) const {
        return static_cast<std::size_t>(&shard - shards_.data());
    }
    std::span<Shard> shards() { return shards_; }
    std::span<const Shard> shards() const { return shards_; }

    // ---- Lookups ----

    // One lock-free lookup attempt, inside an EpochGuard: the node under
    // `key` and its deadline, read at one version of the shard (found), or
    // none (missing), or a writer changed the shard meanwhile (retry). The
    // node stays readable while the guard is held, even if a writer unlinks
    // it. Defined in shard_table_node.hpp, so the store's lookups inline it.
    enum class Probe { found, missing, retry };
    struct Seen {
        const Node* node = nullptr;
        std::int64_t deadline = 0;
    };
    inline Probe probe(const Shard& shard, std::string_view key, std::uint64_t hash,
                       Seen& seen) const;

    // The slot of `key` in `shard`, or kNotFound; under the shard's lock.
    static constexpr std::size_t kNotFound = ~std::size_t{0};
    std::size_t find_slot(const Shard& shard, std::string_view key, std::uint64_t hash) const;
    Node* node_at(const Shard& shard, std::size_t slot) const;

    // ---- Changes (under the shard's exclusive lock) ----

    // A node for `key`, not linked yet (counted in bytes()). Throws
    // std::bad_alloc.
    Node* make_node(std::string_view key, ValueRef value, std::int64_t expire_at_ms,
                    std::uint32_t accessed);
    // Frees a node that was never linked (or, as reclamation does, one no
    // lookup can see any more).
    void free_node(Node* node) const;
    // Links `node` (its key absent from the shard), growing the table if it
    // must; throws std::bad_alloc with the key not linked.
    void insert(Shard& shard, Node* node, std::uint64_t hash, Garbage& garbage);
    // Links `node` in place of the node at `slot` (the same key), which goes
    // to `garbage` (room reserved by the caller) and is returned.
    const Node* replace(Shard& shard, std::size_t slot, Node* node, std::uint64_t hash,
                        Garbage& garbage);
    // Unlinks the node at `slot` into `garbage` (room reserved by the
    // caller), shrinking the table when it is mostly empty.
    void erase(Shard& shard, std::size_t slot, Garbage& garbage);
    // Unlinks the shard's whole table, nodes and all, into `garbage`.
    void detach(Shard& shard, Garbage& garbage);

    // ---- Walks (under the shard's lock) ----

    // Calls fn(const Node&) for every node linked in `shard`, with the
    // nodes a few slots ahead prefetched, and ahead(const Node&) on the node
    // kAheadSlots slots before fn reaches it (to prefetch what fn will read
    // through it), so the misses of a walk over many keys overlap.
    static constexpr std::size_t kAheadSlots = 4;
    struct NothingAhead {
        void operator()(const Node&) const {}
    };
    template <class Fn, class Ahead = NothingAhead>
    void for_each(const Shard& shard, Fn&& fn, Ahead&& ahead = NothingAhead{}) const;
    // One SCAN step in one shard's table: calls fn(const Node&) for the
    // nodes of the buckets from `bucket` on (a bucket is a home slot, its
    // keys are those whose hash points there), and more() after each
    // bucket, until it answers false. Buckets are counted in reverse binary,
    // as Redis's dictScan, so a key present for the whole scan is visited
    // even if the table grows or shrinks between steps. Returns the bucket
    // to go on from, 0 once the table was walked (a shard without a table
    // is one empty bucket).
    template <class Fn, class More>
    std::uint64_t scan(const Shard& shard, std::uint64_t bucket, Fn&& fn, More&& more) const;
    // A node drawn uniformly from `shard`'s table (random(max) draws a
    // uniform number in [0, max]); null if the shard is empty. The walks
    // are defined in shard_table_node.hpp.
    template <class Random>
    const Node* random_node(const Shard& shard, Random&& random) const;

    // ---- Reclamation ----

    // Stamps `garbage` with the epoch and frees what no lookup can see any
    // more; call with no shard lock held. Never throws: if there is no room
    // to keep `garbage` for later, it stays allocated (and counted).
    void dispose(Garbage& garbage) const noexcept;
    // Frees what was unlinked and no lookup can see any more.
    void reclaim() const noexcept;
    // Unlinked objects waiting for lookups to leave (for tests).
    std::size_t pending_reclaim() const;

    // Bytes of nodes and tables (MemoryUse::keyspace).
    std::uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

private:
    enum class Nodes { keep, free };
    // Moves every entry into a fresh table of `slots` (a power of two above
    // the count); false, table unchanged, if it cannot be allocated.
    bool rehash(Shard& shard, std::size_t slots, Garbage& garbage);
    void free_table(Table* table, Nodes nodes) const;
    void free_garbage(Garbage& garbage) const;
    void charge(std::int64_t bytes) const;
    static std::int64_t table_bytes(std::size_t slots);  // header and slots

    std::vector<Shard> shards_;
    // shards_.size(), kept: every lookup picks its shard by it, and a Shard's
    // size is not a power of two.
    const std::size_t num_shards_;
    mutable std::atomic<std::uint64_t> bytes_{0};
    struct Retired {
        Garbage garbage;
        std::uint64_t stamp;
    };
    mutable std::mutex retired_mutex_;
    mutable std::vector<Retired> retired_;
    mutable std::atomic<std::size_t> retired_count_{0};  // retired_.size(), read without the lock
};

}  // namespace bloomery::store
