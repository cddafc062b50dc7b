#pragma once
// Transactions' hold on shards (a part of store::Keyspace, keyspace.hpp).
//
// A Transaction (MULTI/EXEC, and a replica applying one) holds the shards of
// the keys it touches. Until it ends, every other access to those shards
// (lookups, writes, SCAN, KEYS, views, counts, expiry) waits for it, so
// nobody sees a transaction half made, and its records reach the journal as
// one unit (MutationLog::begin_transaction). What this costs an access
// outside transactions: one load of a word in a line the lookup reads anyway
// (the shard's gate, beside its version: shard_table.hpp), and a predicted
// branch.
//
// A gate is 0 or the token of the transaction that holds the shard; that
// transaction also holds the shard's transaction_mutex, which an access that
// finds the gate closed waits on.
//
// Thread safety: every function may be called from any thread; a
// Transaction belongs to the thread that began it.

#include <atomic>
#include <cstdint>
#include <shared_mutex>
#include <vector>

#include "bloomery/store/mutation_log.hpp"
#include "bloomery/store/shard_table.hpp"

namespace bloomery::store {

// The gate checks every access makes (static: a gate lives in its shard).
class ShardGates {
public:
    using Shard = ShardTable::Shard;

    // True while a transaction of another thread holds `shard`.
    static bool closed(const Shard& shard) {
        const std::uint64_t gate = shard.gate.load(std::memory_order_seq_cst);
        return gate != 0 && gate != this_thread_token();
    }
    // Waits until no transaction of another thread holds `shard`. The caller
    // holds no shard lock and no epoch guard.
    static void wait(const Shard& shard);
    // The shard's shared lock, taken once no transaction of another thread
    // holds the shard.
    static std::shared_lock<std::shared_mutex> read(const Shard& shard);
    // The token of the transaction this thread runs (0: none).
    static std::uint64_t this_thread_token();
};

// Which shards a transaction holds: those of its keys, or every shard (a
// command without key arguments that touches keys: FLUSHALL, KEYS, SCAN,
// DBSIZE...).
enum class TransactionScope { keys, every_shard };

// What a transaction holds. Ends when destroyed or by end(): the records it
// made are appended as one unit, then the shards open again. Movable; one
// per thread at a time.
class Transaction {
public:
    Transaction() = default;  // holds nothing
    Transaction(Transaction&& other) noexcept { *this = std::move(other); }
    Transaction& operator=(Transaction&& other) noexcept;
    ~Transaction() { end(); }
    void end() noexcept;
    bool active() const { return table_ != nullptr; }

    // Holds `shards` (indexes into `table`, ascending, each once) for this
    // thread, its records captured by `log` (null: none): waits for
    // transactions of other threads on those shards, then for every access
    // already under way, so that once it returns this thread alone sees and
    // changes them. Throws std::bad_alloc with nothing held, std::logic_error
    // on a thread that already runs one.
    static Transaction begin(ShardTable& table, std::vector<std::uint32_t> shards,
                             MutationLog* log);

private:
    ShardTable* table_ = nullptr;
    std::vector<std::uint32_t> shards_;  // held, in index order
    MutationLog* log_ = nullptr;         // capturing this thread's records
};

// What WATCH remembers of a key: its filter (a key deleted and created again
// has a new one), its deadline and what was added to the filter (item counts
// only grow). Equal stamps mean the key holds the same data with the same
// deadline: nothing a client could tell apart changed. An absent or expired
// key has an empty stamp. BF.LOADCHUNK data sets bits without counting
// items, so `chunks` counts the chunks any filter took: one loaded anywhere
// fails every watch (only while filters are being restored, and a failed
// EXEC is retried).
struct WatchStamp {
    bool exists = false;
    std::uint64_t filter_id = 0;
    std::int64_t expire_at_ms = 0;
    std::uint64_t items = 0;
    std::uint64_t chunks = 0;
    std::uint64_t generation = 0;  // an expiring filter's
    bool operator==(const WatchStamp&) const = default;
};

}  // namespace bloomery::store
