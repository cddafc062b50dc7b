#pragma once
// The keyspace: a map from key name to Bloom filter, sharded by a hash of the
// key, one reader/writer lock per shard, so clients using different filters do
// not contend.
//
// Memory: each key is one node of 24 bytes plus the key's bytes (a key of up
// to 8 bytes fits a 32-byte size class) referencing its filter and keeping
// when the key was last used, and one 8-byte slot of an open-addressing table
// (load factor at most 0.8). The key is hashed (XXH3): some bits pick the
// shard, others the slot, others a 16-bit tag kept in the slot so most
// mismatches are rejected without touching the node.
// Nodes and tables are counted in core/memory.hpp (MemoryUse::keyspace).
//
// Expiry: a key past its deadline is invisible to every lookup. Who erases
// it depends on who owns the clock (Deadlines): a primary erases it on
// access (as Redis deletes an expired key when it is touched) or by
// active_expire_cycle(), which samples only the keys that have a deadline
// (each shard keeps them apart in an ExpirySet), as Redis's expire.c does,
// each time with a DEL record. While records are redone (journal replay at
// start, a replica applying its primary's stream) no key is erased because
// its deadline passed: the records decided that already, and a later one may
// move or remove the deadline (PERSIST before the deadline on the primary's
// clock, after it on ours). Writes then find such a key as it is.
//
// Counts (keys, keys with a deadline, the sum of deadlines, items) are kept
// per shard as keys come and go, so DBSIZE, INFO keyspace and /metrics cost
// O(shards), whatever the key count; SCAN does work bounded by its COUNT.
//
// Thread safety: every member function may be called from any thread.
// Writers take the shard's lock exclusively. with_filter() (every BF.* on an
// existing key) reads without any lock: a shard carries a sequence number
// that writers make odd while they change its table, a lookup retries if the
// number changed under it, and unlinked nodes, tables and filters are freed
// only after every lookup that could still see them has left its
// EpochGuard (epoch.hpp). So a hot filter's readers and adders write no cache
// line they share. A lookup that keeps colliding with writers, finds an
// expired key or runs on a thread without an epoch slot takes the shard's
// reader lock instead.
//
// Transactions (MULTI/EXEC, and a replica applying one): a Transaction
// holds the shards of the keys it touches. Until it ends, every other access
// to those shards (lookups, writes, SCAN, KEYS, views, counts, expiry) waits
// for it, so nobody sees a transaction half made, and its records reach the
// journal as one unit (MutationLog::begin_transaction). What this costs an
// access outside transactions: one load of a word in a line the lookup
// reads anyway (the shard's gate, beside its version), and a predicted
// branch.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/store/epoch.hpp"
#include "bloomery/store/expiry_set.hpp"
#include "bloomery/store/key_access.hpp"
#include "bloomery/store/keyspace_view.hpp"
#include "bloomery/store/mutation_log.hpp"
#include "bloomery/store/snapshot_counts.hpp"

namespace bloomery::core {
class LfuSettings;  // core/runtime_settings.hpp
}

namespace bloomery::store {

using bloom::FilterRef;
// A sum of up to 2^64 deadlines cannot overflow it.
__extension__ typedef __int128 Int128;

// Milliseconds since the Unix epoch (wall clock), the unit of every deadline.
std::int64_t now_ms();

// Who decides that a key's deadline has passed (see the class comment).
enum class Deadlines {
    // This server: a key found past its deadline is erased, with a DEL
    // record (a primary).
    enforce,
    // Its records: a key past its deadline is hidden from reads but stays
    // until a DEL record erases it, and writes find it as it is (replay at
    // start, a replica), as Redis loads its AOF and as its replicas wait
    // for their primary's DEL.
    follow,
};

class Keyspace {
public:
    // Keys' use counters follow `lfu` (which must outlive the keyspace), or
    // Redis's defaults, never changed, without it.
    explicit Keyspace(std::size_t num_shards = 64);
    Keyspace(std::size_t num_shards, const core::LfuSettings& lfu);
    ~Keyspace();
    Keyspace(const Keyspace&) = delete;
    Keyspace& operator=(const Keyspace&) = delete;

    std::size_t num_shards() const { return shards_.size(); }

    // Enforce (the default) or follow deadlines. Thread-safe; a lookup
    // racing the change may still go by the old rule.
    void set_deadlines(Deadlines rule) {
        following_.store(rule == Deadlines::follow, std::memory_order_release);
    }
    Deadlines deadlines() const { return following() ? Deadlines::follow : Deadlines::enforce; }
    // Erases every key past its deadline now, each with its DEL record
    // (enforcing deadlines only; follow: does nothing). For a server that
    // becomes the one deciding, after replay: O(keys with a deadline), once.
    // Returns how many it erased.
    std::size_t expire_past_deadlines();

    // Attaches the journal that hears of every change from now on (null:
    // none). Thread-safe, but a change racing a write may be told to the old
    // log or the new one: a replica swaps its journal only while nothing else
    // writes (its replication link is its only writer).
    void set_mutation_log(MutationLog* log) { log_.store(log, std::memory_order_release); }
    MutationLog* mutation_log() const { return log_.load(std::memory_order_acquire); }

    // Waits until every with_filter() call that had begun when this was
    // called has returned (for snapshots: an add logged before a view's
    // position has set its bits once this returns).
    static void wait_for_readers();

    // Calls fn(bloom::ScalableFilter&) if the key exists and has not expired,
    // with the filter kept alive for the call (an epoch guard, or the shard's
    // shared lock on the slow path). Returns whether it did.
    template <class Fn>
    bool with_filter(std::string_view key, Fn&& fn) const {
        const std::uint64_t hash = hash_key(key);
        const Shard& shard = shard_for(hash);
        for (;;) {
            {
                // Held on the locked path too, so wait_for_readers() covers
                // it (a transaction waits for it before it begins).
                EpochGuard guard;
                // seq_cst, after the guard's exchange: a transaction that
                // closed the gate first is seen, or waits for this guard.
                if (!gated(shard)) {
                    if (guard.active()) {
                        for (int attempt = 0; attempt < kOptimisticAttempts; ++attempt) {
                            bloom::ScalableFilter* filter = nullptr;
                            const Probe probe = probe_unlocked(shard, key, hash, filter);
                            if (probe == Probe::found) {
                                fn(*filter);
                                return true;
                            }
                            if (probe == Probe::missing) return false;
                            if (probe == Probe::use_lock) break;
                        }
                    }
                    std::shared_lock lock(shard.mutex);
                    if (!gated(shard)) {
                        bloom::ScalableFilter* filter = find_live(shard, lock, key, hash, true);
                        if (filter == nullptr) return false;
                        fn(*filter);
                        return true;
                    }
                }
            }
            // Outside the guard and every lock: the transaction waits for both.
            wait_for_gate(shard);
        }
    }

    // Like with_filter, but if the key is missing (or expired) calls make(),
    // which returns a FilterRef or an empty one to refuse, and inserts that.
    // make() runs outside any lock (a large filter takes a while to
    // allocate); fn runs under the shared lock. Returns false if make()
    // refused, or the key is there past its deadline while deadlines are
    // followed (and fn was not called).
    template <class Make, class Fn>
    bool with_filter_or_create(std::string_view key, Make&& make, Fn&& fn) {
        // Each round finds the filter or creates it; only a client deleting
        // the key between the two steps, every time, could keep us looping.
        for (;;) {
            if (with_filter(key, fn)) return true;
            FilterRef created = make();
            if (!created) return false;
            // If another client created the key first, its filter wins and
            // ours is dropped: the next lookup finds theirs. Following
            // deadlines, a key past its deadline is hidden from the lookup
            // and still refuses the insert: nothing is created (a write
            // that raced this server becoming a replica), rather than
            // looping until the primary's DEL.
            if (!insert_new(key, std::move(created)) && following()) return false;
        }
    }

    // ---- The write path: every change to the data goes through these, and
    // each produces its record (MutationLog) in one place. ----

    // BF.ADD / BF.MADD / BF.INSERT: adds `items` to the filter under `key`,
    // creating it with make() when it is missing (make may return an empty
    // reference to refuse, and is not called when null). Results as
    // ScalableFilter::add_many, in `results` (resized to what was stored).
    // Each batch of up to ScalableFilter::kBatch items is one record; a
    // record (or the new key) that cannot be allocated stops the adds with
    // out_of_memory before anything of its batch changed. Returns false if
    // the key is missing and was not created.
    bool add_items(std::string_view key, std::span<const std::string_view> items,
                   const bloom::GrowthLimits& limits, const std::function<FilterRef()>* make,
                   std::vector<bloom::AddResult>& results);

    enum class ChunkStatus { loaded, missing, refused };
    // BF.LOADCHUNK data chunk: checked against the filter under `key` first
    // (a refused chunk is neither applied nor recorded), then recorded and
    // its bits set (bloom::apply_chunk). `error` on refusal. Throws
    // std::bad_alloc with nothing changed.
    ChunkStatus load_chunk(std::string_view key, std::int64_t iter, std::string_view data,
                           std::string& error);

    // Redoes adds recorded elsewhere (journal replay, a replica's stream) in
    // `filter`, which this thread alone changes, recording them in this
    // keyspace's own log: bits set and items counted in exactly the layers
    // given. False, with nothing changed, if a layer is beyond what the
    // filter can grow to. Throws std::bad_alloc with nothing changed.
    struct RecordedAdd {
        std::uint32_t layer;
        bloom::ItemHash hash;
    };
    bool redo_adds(bloom::ScalableFilter& filter, std::span<const RecordedAdd> adds);
    // Redoes a recorded chunk; false (nothing changed) if it does not fit.
    bool redo_chunk(bloom::ScalableFilter& filter, std::int64_t iter, std::string_view data,
                    std::string& error);

    // RESTORE and COPY: links `filter`, complete with its bits and item
    // counts and not shared with anything yet, under `key` with deadline
    // `expire_at_ms` (0: none), replacing a live key only if `replace`. Its
    // CREATE record and its bits, as CHUNK records (bloom::dump_chunk's, of
    // up to kRestoreChunkBytes each; chunks of zero words are left out, as
    // replay starts from zero bits) are encoded first and appended with the
    // change, under the shard's lock: no reader sees the key before its
    // bits, and replay and replicas rebuild the filter bit for bit, owing
    // nothing to the filter it was copied from. False, nothing changed, if
    // the key is live and `replace` is false. Throws std::bad_alloc or
    // std::length_error with nothing changed. The key's access clock is set
    // `idle_seconds` back (RESTORE IDLETIME; OBJECT IDLETIME then answers
    // it), now by default, and its use counter to `frequency` (RESTORE
    // FREQ; OBJECT FREQ), a new key's by default.
    static constexpr std::size_t kRestoreChunkBytes = std::size_t{1} << 20;
    bool restore(std::string_view key, FilterRef filter, std::int64_t expire_at_ms, bool replace,
                 std::int64_t idle_seconds = 0,
                 std::uint32_t frequency = key_access::kInitialCount);

    // Inserts `filter` under `key` only if the key is absent (or expired).
    bool insert_new(std::string_view key, FilterRef filter, std::int64_t expire_at_ms = 0);
    // Inserts or replaces.
    void put(std::string_view key, FilterRef filter, std::int64_t expire_at_ms = 0);
    bool erase(std::string_view key);
    bool contains(std::string_view key) const;
    std::optional<KeySnapshot> get(std::string_view key) const;
    // The key's entry whatever its deadline (replay: later records still
    // name a key past its deadline), without using it; nullopt if missing.
    std::optional<KeySnapshot> linked(std::string_view key) const;
    // The key's entry without using it (its access clock stays), under the
    // shard's shared lock; nullopt if it is missing or expired.
    std::optional<KeyDetails> inspect(std::string_view key) const;

    // Deadline management, under the shard's exclusive lock so a conditional
    // change (EXPIRE NX/XX/GT/LT, PERSIST) cannot race another one.
    // decide(current) gets the current deadline (0: none) and returns the new
    // one (0: none) or nullopt to leave it. Enforcing deadlines, a new
    // deadline at or before now deletes the key (with a DEL record, as
    // Redis); following, it is set as given, and a key past its deadline is
    // found (replay redoes PERSIST and EXPIRE as they were decided).
    // Returns nullopt if the key is missing, else whether anything changed.
    std::optional<bool> update_expiry(
        std::string_view key,
        const std::function<std::optional<std::int64_t>(std::int64_t)>& decide);
    // Unconditional form: 0 removes the deadline. False if the key is missing.
    bool set_expiry(std::string_view key, std::int64_t expire_at_ms);
    // nullopt: key missing; 0: no expiry; otherwise the deadline.
    std::optional<std::int64_t> expiry(std::string_view key) const;

    // Moves `from` to `to`, replacing `to`. False if `from` is missing.
    bool rename(std::string_view from, std::string_view to);
    // RENAMENX: moves `from` to `to` only if `to` is absent (or expired), in
    // one step. nullopt if `from` is missing, else whether it moved (a key
    // renamed to itself does not: false).
    std::optional<bool> rename_if_absent(std::string_view from, std::string_view to);

    // MIGRATE: after another server took a copy of `filter` (then `items`
    // items in `num_layers` layers), erases `key` if it still holds that
    // filter unchanged. `changed`, nothing done, if another filter is
    // there or this one took adds or grew since (deleting it would lose
    // them); `gone` if the key is missing (or past its deadline: erased as
    // a lookup erases it).
    enum class EraseIf { erased, gone, changed };
    EraseIf erase_if_unchanged(std::string_view key, const bloom::ScalableFilter* filter,
                               std::uint64_t items, std::size_t num_layers);

    // RANDOMKEY: a live key drawn uniformly: a shard by its key count, then
    // slots of its table at random until one holds a key, so the work is
    // bounded (O(shards) plus a few probes; tables are at least 1/8 full)
    // whatever the key count. A key found past its deadline is erased (as
    // a lookup erases it) and another is drawn, at most kRandomKeyDraws
    // draws in all. nullopt if the keyspace is empty, or if every draw found
    // an expired key (active expiry removes the rest).
    static constexpr int kRandomKeyDraws = 100;
    std::optional<std::string> random_key() const;

    struct Counts {
        std::size_t keys = 0;
        std::size_t with_expiry = 0;
        std::uint64_t items = 0;  // every filter's items inserted, summed
    };
    // Keys, and how many of them have a deadline, as Redis counts them: keys
    // past their deadline that no lookup or expiry cycle has erased yet are
    // still counted. O(shards), read without a lock. `items` may be off by
    // adds that raced the deletion of their filter (they are counted, the
    // filter is gone).
    Counts counts() const;
    std::size_t size() const { return counts().keys; }
    // The mean time to live of the keys with a deadline, in milliseconds (0
    // when none has one): INFO keyspace's avg_ttl. O(shards), one shared
    // lock at a time.
    std::int64_t average_ttl_ms() const;
    // Removes every key at one instant (every shard locked at once, as for
    // view()); returns how many live keys there were. Filters are freed after
    // the locks are released.
    std::size_t clear();

    // Copies the live entries of shard `index` (for KEYS: O(keys)).
    std::vector<KeySnapshot> shard_entries(std::size_t index) const;

    // One SCAN step: appends to `keys` the live keys of up to about `count`
    // buckets from `cursor` and returns the cursor to go on from (0 once
    // every shard was walked). Work is bounded by `count`: it may return
    // fewer keys than `count`, or none, with a cursor that is not 0.
    //
    // The cursor is (bucket, shard): the shard in its low bits, above them
    // a bucket of the shard's table counted in reverse binary, as Redis's
    // dictScan. A bucket is a home slot: the keys whose hash points there,
    // found in the probe run from it. So, as in Redis, a key present for the
    // whole scan is returned at least once, even if tables grow or shrink
    // between calls (a resize may return some keys twice).
    std::uint64_t scan(std::uint64_t cursor, std::size_t count,
                       std::vector<std::string>& keys) const;
    // A consistent copy of every live key (see KeyspaceView). For a
    // snapshot, with a journal attached, it is taken at the journal's cut and
    // keeps the item counts of that instant (KeyspaceView::item_counts);
    // without `for_snapshot` it only copies the keys (no cut, no position).
    KeyspaceView view(bool for_snapshot = true) const;

    // One round of active expiry, as Redis's expire.c: visits the shards in
    // turn (starting where the last round stopped), samples
    // kExpireSample keys that have a deadline in each, erases the expired
    // ones (each with its DEL record), and samples the same shard again
    // while more than a tenth of a sample had expired; stops once `budget`
    // has been spent. Keys without a deadline are never looked at. Returns
    // how many keys it erased. Also frees what earlier writes unlinked while
    // lookups were still reading it.
    static constexpr std::size_t kExpireSample = 20;
    std::size_t active_expire_cycle(
        std::chrono::microseconds budget = std::chrono::milliseconds(25));
    // Frees unlinked nodes, tables and filters no lookup can still see.
    void reclaim() const;
    // Unlinked objects waiting for lookups to leave (for tests).
    std::size_t pending_reclaim() const;
    // Keys erased because their deadline passed, lazily or by the cycle.
    std::uint64_t expired_keys() const { return expired_keys_.load(std::memory_order_relaxed); }
    // Active expiry as INFO stats shows it (Redis's fields): the share of
    // sampled keys found expired, smoothed over rounds; rounds stopped by
    // their time budget; milliseconds spent in rounds.
    struct ExpireStats {
        double stale_percent = 0;
        std::uint64_t time_cap_reached = 0;
        std::uint64_t cycle_milliseconds = 0;
    };
    ExpireStats expire_stats() const;

    // Cluster mode (core/key_slot.hpp): counts keys per hash slot as they are
    // linked and unlinked, for CLUSTER COUNTKEYSINSLOT. Off by default, so a
    // server without cluster mode pays nothing (no slot hash per created key,
    // no 128 KiB of counters); call before any key exists and before clients
    // are served (not thread-safe).
    void enable_slot_counts();
    bool counts_slots() const { return slot_counts_ != nullptr; }
    // Keys linked in `slot`, those past their deadline and not yet erased
    // included (as Redis's count); 0 when slot counts are off.
    std::uint64_t count_keys_in_slot(std::uint16_t slot) const;
    // Up to `limit` live keys of `slot` (CLUSTER GETKEYSINSLOT). Walks the
    // shards, hashing each key, under one shard's shared lock at a time, and
    // stops once it has `limit` keys or, with slot counts on, every key the
    // slot holds: O(keys) at worst, for an operator's command, not a client's.
    std::vector<std::string> keys_in_slot(std::uint16_t slot, std::size_t limit) const;

    // ---- Transactions ----

    // What a transaction holds (see the class comment). Ends when destroyed
    // or by end(): the records it made are appended as one unit, then the
    // shards open again. Movable; one per thread at a time.
    class Transaction {
    public:
        Transaction() = default;  // holds nothing
        Transaction(Transaction&& other) noexcept { *this = std::move(other); }
        Transaction& operator=(Transaction&& other) noexcept;
        ~Transaction() { end(); }
        void end() noexcept;
        bool active() const { return keyspace_ != nullptr; }

    private:
        friend class Keyspace;
        Keyspace* keyspace_ = nullptr;
        std::vector<std::uint32_t> shards_;  // held, in index order
        MutationLog* log_ = nullptr;         // capturing this thread's records
    };
    // Begins a transaction on this thread over the shards of `keys`, or over
    // every shard with `every_shard` (a command without key arguments that
    // touches keys: FLUSHALL, KEYS, SCAN, DBSIZE...). Waits for transactions
    // of other threads on those shards, then for every access already under
    // way, so that once it returns this thread alone sees and changes them.
    // Throws std::bad_alloc with nothing held. Not on a thread that already
    // runs one.
    Transaction begin_transaction(std::span<const std::string_view> keys, bool every_shard);

    // What WATCH remembers of a key: its filter (a key deleted and created
    // again has a new one), its deadline and what was added to the filter
    // (item counts only grow). Equal stamps mean the key holds the same data
    // with the same deadline: nothing a client could tell apart changed. An
    // absent or expired key has an empty stamp. BF.LOADCHUNK data sets bits
    // without counting items, so `chunks` counts the chunks any filter took:
    // one loaded anywhere fails every watch (only while filters are being
    // restored, and a failed EXEC is retried).
    struct WatchStamp {
        bool exists = false;
        std::uint64_t filter_id = 0;
        std::int64_t expire_at_ms = 0;
        std::uint64_t items = 0;
        std::uint64_t chunks = 0;
        bool operator==(const WatchStamp&) const = default;
    };
    WatchStamp watch_stamp(std::string_view key) const;

    // Bytes of nodes and tables (what this keyspace reports to core/memory.hpp
    // as MemoryUse::keyspace); filters are counted by themselves.
    std::uint64_t overhead_bytes() const { return overhead_bytes_.load(std::memory_order_relaxed); }
    // overhead_bytes() by what holds it (MEMORY STATS): the tables and the
    // key entries, the sets of keys with a deadline, the per-slot key counts.
    // O(shards), one shared lock at a time; a moment's figures.
    struct Overhead {
        std::uint64_t main = 0;          // tables, nodes and key names
        std::uint64_t expires = 0;       // ExpirySets
        std::uint64_t slot_to_keys = 0;  // the cluster slot counters
    };
    Overhead overhead() const;

private:
    struct Node;
    // Open addressing with linear probing; a slot is 0 (empty) or a Node*
    // with a 16-bit tag of the key's hash in bits 48-63. The slots follow the
    // header in one allocation, so a lookup loads one pointer to see both.
    struct Table {
        std::size_t mask;  // slot count - 1 (slot count is a power of two)
        std::uint64_t* slots() { return reinterpret_cast<std::uint64_t*>(this + 1); }
        const std::uint64_t* slots() const {
            return reinterpret_cast<const std::uint64_t*>(this + 1);
        }
    };
    struct alignas(64) Shard {
        mutable std::shared_mutex mutex;
        // Read by lock-free lookups; written only under the exclusive lock.
        alignas(64) std::atomic<std::uint64_t> version{0};  // odd while changing
        std::atomic<Table*> table{nullptr};
        // 0, or the token of the transaction that holds the shard (written
        // by that transaction, read by every access).
        std::atomic<std::uint64_t> gate{0};
        // Written under the exclusive lock, read by counts() without it.
        std::atomic<std::size_t> count{0};
        std::atomic<std::size_t> expiring_count{0};
        std::atomic<std::int64_t> linked_items{0};  // items of the linked filters, when linked
        // Under the lock.
        ExpirySet expiring;       // the nodes that have a deadline
        Int128 deadline_sum = 0;  // of their deadlines
        // Where active expiry resumes in `expiring` (only the cycle moves it).
        std::atomic<std::size_t> expire_cursor{0};
        // Held by the transaction that holds the gate for as long as it
        // does: transactions take it in shard order, and an access that
        // finds the gate closed waits on it.
        mutable std::mutex transaction_mutex;
    };
    // What a write unlinked; freed once lookups can no longer see it.
    struct Garbage {
        std::vector<Node*> nodes;
        std::vector<Table*> tables;            // the table only
        std::vector<Table*> tables_and_nodes;  // clear(): every node too
        bool empty() const { return nodes.empty() && tables.empty() && tables_and_nodes.empty(); }
    };
    // The exclusive lock of one shard, with its version odd while held.
    class ShardWrite;

    bool following() const { return following_.load(std::memory_order_acquire); }
    // Whether a write treats `node` as gone: past its deadline while this
    // server enforces deadlines (following, it is there until a DEL).
    bool lapsed(const Node* node, std::int64_t now) const;

    // True while a transaction of another thread holds `shard`.
    static bool gated(const Shard& shard) {
        const std::uint64_t gate = shard.gate.load(std::memory_order_seq_cst);
        return gate != 0 && gate != transaction_token();
    }
    // The token of the transaction this thread runs (0: none).
    static std::uint64_t transaction_token();
    // Waits until no transaction of another thread holds `shard`. The caller
    // holds no shard lock and no epoch guard.
    static void wait_for_gate(const Shard& shard);
    // Shared or exclusive access to one shard once no transaction of
    // another thread holds it.
    std::shared_lock<std::shared_mutex> read_shard(const Shard& shard) const;

    enum class Probe { found, missing, retry, use_lock };
    static constexpr int kOptimisticAttempts = 4;
    // One lock-free lookup attempt (see the class comment).
    Probe probe_unlocked(const Shard& shard, std::string_view key, std::uint64_t hash,
                         bloom::ScalableFilter*& filter) const;

    static std::uint64_t hash_key(std::string_view key);
    const Shard& shard_for(std::uint64_t hash) const;
    Shard& shard_for(std::uint64_t hash);
    // Looks `key` up in `shard` under `lock`, a shared lock on it. An expired
    // entry is reaped (releasing the lock) and reported missing. `touch`: a
    // command uses the key (its access clock moves; OBJECT IDLETIME).
    bloom::ScalableFilter* find_live(const Shard& shard, std::shared_lock<std::shared_mutex>& lock,
                                     std::string_view key, std::uint64_t hash,
                                     bool touch = false) const;
    // Erases `key` if it is still expired (a lookup found it so), with a DEL
    // record; true if it did. Takes the shard's exclusive lock.
    bool reap(std::string_view key, std::uint64_t hash) const;
    // insert_new (replace_live = false) and put (true).
    // `with_bits`: the filter's bits are recorded after its CREATE (restore()).
    bool store(std::string_view key, FilterRef filter, std::int64_t expire_at_ms, bool replace_live,
               bool with_bits = false, std::int64_t idle_seconds = 0,
               std::uint32_t frequency = key_access::kInitialCount);
    enum class Moved { missing, exists, moved };
    Moved move_key(std::string_view from, std::string_view to, bool replace);
    // Table primitives; the caller holds the shard's exclusive lock (a
    // ShardWrite) except for find_slot, which also works under a shared lock.
    Node* make_node(std::string_view key, FilterRef filter, std::int64_t expire_at_ms);
    void free_node(Node* node);
    std::size_t find_slot(const Shard& shard, std::string_view key, std::uint64_t hash) const;
    Node* node_at(const Shard& shard, std::size_t slot) const;
    void insert_slot(Shard& shard, Node* node, std::uint64_t hash, Garbage& garbage);
    void replace_slot(Shard& shard, std::size_t slot, Node* node, std::uint64_t hash);
    void erase_slot(Shard& shard, std::size_t slot, Garbage& garbage);
    // Moves every entry into a fresh table of `slots` (a power of two above
    // the count); false, table unchanged, if it cannot be allocated.
    bool rehash(Shard& shard, std::size_t slots, Garbage& garbage);
    void free_table(Table* table, bool with_nodes);
    // Stamps `garbage` with the epoch and frees what no lookup can see; call
    // with no shard lock held.
    void dispose(Garbage& garbage) const;
    void charge(std::int64_t bytes) const;
    static std::int64_t table_bytes(std::size_t slots);  // header and slots

    // The slot counters' bookkeeping for one linked or unlinked key.
    void count_slot(std::string_view key, std::int64_t by);
    // Every per-shard count for a node linked (+1) or unlinked (-1); under
    // the exclusive lock. A node with a deadline must have room reserved in
    // the shard's ExpirySet before it is linked.
    void account(Shard& shard, const Node* node, int sign);
    // A linked node's deadline changes from `from` to `to`.
    void account_deadline(Shard& shard, const Node* node, std::int64_t from, std::int64_t to);
    void reserve_expiring(Shard& shard, bool needed);
    // Samples one shard for active expiry; returns (sampled, erased).
    std::pair<std::size_t, std::size_t> expire_sample(Shard& shard);

    mutable std::vector<Shard> shards_;  // mutable: lookups reap expired keys
    const core::LfuSettings& lfu_;       // read (relaxed) by every lookup that uses a key
    // Keys per cluster slot (enable_slot_counts), null when off. Several
    // shards hold keys of one slot, so the counters are atomic; they change
    // only when a key is linked or unlinked, under its shard's lock.
    std::unique_ptr<std::atomic<std::uint64_t>[]> slot_counts_;
    std::atomic<MutationLog*> log_{nullptr};
    std::atomic<bool> following_{false};  // Deadlines::follow
    // Item counts at snapshot cuts (KeyspaceView::item_counts); mutable:
    // view() starts a session.
    mutable SnapshotCounts snapshot_counts_;
    mutable std::atomic<std::uint64_t> expired_keys_{0};
    std::atomic<std::uint64_t> chunks_loaded_{0};  // BF.LOADCHUNK data chunks applied
    // Written by active_expire_cycle() (one thread at a time), read by INFO.
    std::atomic<double> expire_stale_percent_{0};
    std::atomic<std::uint64_t> expire_time_cap_reached_{0};
    std::atomic<std::uint64_t> expire_cycle_us_{0};
    // Items counted by adds, one counter per thread (summed by counts()):
    // an add never writes a line another thread writes.
    struct alignas(64) ItemsAdded {
        std::atomic<std::int64_t> value{0};
    };
    static constexpr std::size_t kItemStripes = 64;
    mutable std::unique_ptr<ItemsAdded[]> items_added_ =
        std::make_unique<ItemsAdded[]>(kItemStripes);
    void count_added(std::int64_t items) const;
    std::atomic<std::size_t> expire_shard_{0};  // where the next expiry round starts
    mutable std::atomic<std::uint64_t> overhead_bytes_{0};
    struct Retired {
        Garbage garbage;
        std::uint64_t stamp;
    };
    mutable std::mutex retired_mutex_;
    mutable std::vector<Retired> retired_;
    mutable std::atomic<std::size_t> retired_count_{0};  // retired_.size(), read without the lock
};

}  // namespace bloomery::store
