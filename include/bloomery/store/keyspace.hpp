#pragma once
// The keyspace: a map from key name to filter (a Bloom or a Cuckoo filter:
// value_ref.hpp), sharded by a hash of the key, one reader/writer lock per
// shard, so clients using different filters do not contend.
//
// Keyspace is the store's one entry point, a facade over parts that each do
// one thing (each header says how):
// - ShardTable (shard_table.hpp): the shards, their open-addressing tables,
//   lock-free lookups (a seqlock and epochs) and the reclamation of what
//   changes unlink; memory per key is described there.
// - ExpiryIndex (expiry_index.hpp): the keys that have a deadline, the rule
//   that says who erases a key past it (Deadlines), active expiry.
// - key_access.hpp and clock.hpp: each key's access clock and use counter
//   (OBJECT IDLETIME, OBJECT FREQ), and the clocks a test can set.
// - ShardGates and Transaction (transaction_gates.hpp): transactions' hold
//   on shards, and what WATCH compares.
// - SlotCounts and AddedItems (key_counts.hpp), SnapshotCounts
//   (snapshot_counts.hpp) and KeyspaceView (keyspace_view.hpp): the counts
//   kept as keys come and go, and the copies snapshots take.
// The facade itself is the write path: every change to the data goes
// through it and produces its record (MutationLog) in one place, and it
// keeps the parts' bookkeeping in step as keys are linked and unlinked.
//
// Counts (keys, keys with a deadline, the sum of deadlines, items) are kept
// per shard as keys come and go, so DBSIZE, INFO keyspace and /metrics cost
// O(shards), whatever the key count; SCAN does work bounded by its COUNT.
//
// Thread safety: every member function may be called from any thread.
// Writers take the shard's lock exclusively. with_filter() (every BF.* on an
// existing key) reads without any lock (ShardTable::probe()), so a hot
// filter's readers and adders write no cache line they share. A lookup that
// keeps colliding with writers, finds an expired key or runs on a thread
// without an epoch slot takes the shard's reader lock instead. Every access
// to a shard a transaction of another thread holds waits for it to end.

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
#include "bloomery/core/result.hpp"
#include "bloomery/store/clock.hpp"
#include "bloomery/store/epoch.hpp"
#include "bloomery/store/expiry_index.hpp"
#include "bloomery/store/key_access.hpp"
#include "bloomery/store/key_counts.hpp"
#include "bloomery/store/keyspace_view.hpp"
#include "bloomery/store/mutation_log.hpp"
#include "bloomery/store/shard_table.hpp"
#include "bloomery/store/snapshot_counts.hpp"
#include "bloomery/store/transaction_gates.hpp"

namespace bloomery::core {
class LfuSettings;  // core/runtime_settings.hpp
}

namespace bloomery::store {

class AgeShifter;  // age_shifter.hpp

using bloom::FilterRef;

// What a write that links a filter does when the key is live: leaves it
// (and reports that nothing was linked) or replaces it.
enum class IfLive { keep, replace };

// RESTORE's and COPY's choices (Keyspace::restore()).
struct RestoreOptions {
    std::int64_t expire_at_ms = 0;  // the deadline; 0: none
    IfLive if_live = IfLive::keep;
    // RESTORE IDLETIME: the key's access clock is set this far back
    // (OBJECT IDLETIME then answers it); now by default.
    std::int64_t idle_seconds = 0;
    // RESTORE FREQ: the key's use counter (OBJECT FREQ); a new key's by
    // default.
    std::uint32_t frequency = key_access::kInitialCount;
};

// What a KeyspaceView is taken for (Keyspace::view()).
enum class ViewFor {
    // A snapshot: with a journal attached, at the journal's cut, keeping
    // the item counts of that instant.
    snapshot,
    // The keys and their filters only: no cut, no position.
    keys,
};

class Keyspace {
public:
    using Transaction = store::Transaction;
    using WatchStamp = store::WatchStamp;
    using ExpireStats = store::ExpireStats;

    // Keys' use counters follow `lfu` (which must outlive the keyspace), or
    // Redis's defaults, never changed, without it.
    explicit Keyspace(std::size_t num_shards = 64);
    Keyspace(std::size_t num_shards, const core::LfuSettings& lfu);
    ~Keyspace();
    Keyspace(const Keyspace&) = delete;
    Keyspace& operator=(const Keyspace&) = delete;

    std::size_t num_shards() const { return table_.num_shards(); }

    // Enforce (the default) or follow deadlines (expiry_index.hpp).
    // Thread-safe; a lookup racing the change may still go by the old rule.
    // The attached AgeShifter follows the same rule: it decides expiring
    // filters' shifts while deadlines are enforced (AgeShifter::lead()).
    void set_deadlines(Deadlines rule);
    Deadlines deadlines() const { return expiry_.rule(); }
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

    // Calls fn(const ValueRef&) if the key exists and has not expired, with
    // the value kept alive for the call (an epoch guard, or the shard's
    // shared lock on the slow path). Returns whether it did.
    template <class Fn>
    bool with_value(std::string_view key, Fn&& fn) const {
        const std::uint64_t hash = ShardTable::hash_key(key);
        const Shard& shard = table_.shard_for(hash);
        for (;;) {
            {
                // Held on the locked path too, so wait_for_readers() covers
                // it (a transaction waits for it before it begins).
                EpochGuard guard;
                // seq_cst, after the guard's exchange: a transaction that
                // closed the gate first is seen, or waits for this guard.
                if (!ShardGates::closed(shard)) {
                    if (guard.active()) {
                        for (int attempt = 0; attempt < kOptimisticAttempts; ++attempt) {
                            const ValueRef* value = nullptr;
                            const Probe probe = probe_unlocked(shard, key, hash, value);
                            if (probe == Probe::found) {
                                fn(*value);
                                return true;
                            }
                            if (probe == Probe::missing) return false;
                            if (probe == Probe::use_lock) break;
                        }
                    }
                    std::shared_lock lock(shard.mutex);
                    if (!ShardGates::closed(shard)) {
                        const ValueRef* value = find_live(shard, lock, key, hash, Use::touch);
                        if (value == nullptr) return false;
                        fn(*value);
                        return true;
                    }
                }
            }
            // Outside the guard and every lock: the transaction waits for both.
            ShardGates::wait(shard);
        }
    }

    // Like with_value, but if the key is missing (or expired) calls make(),
    // which returns a ValueRef or an empty one to refuse, and inserts that.
    // make() runs outside any lock (a large filter takes a while to
    // allocate); fn runs under the shared lock. Returns false if make()
    // refused, or the key is there past its deadline while deadlines are
    // followed (and fn was not called).
    template <class Make, class Fn>
    bool with_value_or_create(std::string_view key, Make&& make, Fn&& fn) {
        // Each round finds the filter or creates it; only a client deleting
        // the key between the two steps, every time, could keep us looping.
        for (;;) {
            if (with_value(key, fn)) return true;
            ValueRef created = make();
            if (!created) return false;
            // If another client created the key first, its filter wins and
            // ours is dropped: the next lookup finds theirs. Following
            // deadlines, a key past its deadline is hidden from the lookup
            // and still refuses the insert: nothing is created (a write
            // that raced this server becoming a replica), rather than
            // looping until the primary's DEL.
            if (!insert_new(key, std::move(created)) && expiry_.following()) return false;
        }
    }

    // with_value() for a Bloom filter: fn(bloom::ScalableFilter&). A Cuckoo
    // filter under the key throws WrongType (before fn runs).
    template <class Fn>
    bool with_filter(std::string_view key, Fn&& fn) const {
        return with_value(key, [&fn](const ValueRef& value) { fn(value.filter()); });
    }
    template <class Make, class Fn>
    bool with_filter_or_create(std::string_view key, Make&& make, Fn&& fn) {
        return with_value_or_create(
            key, [&make]() -> ValueRef { return make(); },
            [&fn](const ValueRef& value) { fn(value.filter()); });
    }
    // The same for a Cuckoo filter: fn(cuckoo::CuckooObject&); a Bloom
    // filter under the key throws WrongType.
    template <class Fn>
    bool with_cuckoo(std::string_view key, Fn&& fn) const {
        return with_value(key, [&fn](const ValueRef& value) { fn(value.cuckoo()); });
    }

    // ---- The write path: every change to the data goes through these, and
    // each produces its record (MutationLog) in one place. ----

    // BF.ADD / BF.MADD / BF.INSERT: adds `items` to the filter under `key`,
    // creating it with make() when it is missing (make may return an empty
    // reference to refuse, and is not called when null). Results as
    // ScalableFilter::add_many, in `results` (resized to what was stored).
    // An expiring filter under the key takes them as add_age_items does.
    // Each batch of up to ScalableFilter::kBatch items is one record; a
    // record (or the new key) that cannot be allocated stops the adds with
    // out_of_memory before anything of its batch changed. Returns false if
    // the key is missing and was not created.
    bool add_items(std::string_view key, std::span<const std::string_view> items,
                   const bloom::GrowthLimits& limits, const std::function<FilterRef()>* make,
                   std::vector<bloom::AddResult>& results);

    // BF.DEL: deletes `items` from the counting filter under `key`
    // (ScalableFilter::remove, in order, serialized with its other changes),
    // each batch of up to ScalableFilter::kBatch one REMOVE record. Results
    // in `results` (resized to what was done: a record that cannot be
    // allocated stops there with out_of_memory). nullopt if the key is
    // missing; false if its filter is not a counting one (nothing done).
    std::optional<bool> remove_items(std::string_view key, std::span<const std::string_view> items,
                                     std::vector<bloom::RemoveResult>& results);

    // BF.LOADCHUNK data chunk: checked against the filter under `key` first
    // (a refused chunk is neither applied nor recorded), then recorded and
    // its bits set (bloom::apply_chunk). `loaded`, `missing` (no live key),
    // or the reason the chunk does not fit the filter (bloom's wording,
    // without a reply prefix). Throws std::bad_alloc with nothing changed.
    enum class ChunkStatus { loaded, missing };
    core::Result<ChunkStatus> load_chunk(std::string_view key, std::int64_t iter,
                                         std::string_view data);

    // Redoes adds recorded elsewhere (journal replay, a replica's stream) in
    // `filter`, which this thread alone changes, recording them in this
    // keyspace's own log: bits set and items counted in exactly the layers
    // given. Fails, with nothing changed, if a layer is beyond what the
    // filter can grow to. Throws std::bad_alloc with nothing changed.
    struct RecordedAdd {
        std::uint32_t layer;
        bloom::ItemHash hash;
    };
    core::Status redo_adds(bloom::ScalableFilter& filter, std::span<const RecordedAdd> adds);
    // Redoes recorded deletes of a counting filter the same way; fails with
    // nothing changed if a layer does not exist or the filter is not a
    // counting one.
    core::Status redo_removes(bloom::ScalableFilter& filter, std::span<const RecordedAdd> removes);
    // Redoes a recorded chunk; fails (nothing changed) with the reason it
    // does not fit.
    core::Status redo_chunk(bloom::ScalableFilter& filter, std::int64_t iter,
                            std::string_view data);

    // ---- Cuckoo filters (cuckoo/cuckoo_object.hpp) ----
    // One change to the Cuckoo filter under `key` (created by make() when
    // missing and make is not null), made under the filter's lock and
    // recorded in the same step, so its record reaches the stream in the
    // order of the filter's changes: change(filter) makes it and returns
    // what it did (nullopt: nothing changed, nothing is recorded). A chunk
    // change has at most `data_bytes` bytes. Returns false if the key is
    // missing and was not created. Throws WrongType for a Bloom filter's
    // key, std::bad_alloc with nothing changed.
    using CuckooEdit = std::function<std::optional<CuckooChange>(cuckoo::CuckooFilter&)>;
    bool change_cuckoo(std::string_view key, const std::function<ValueRef()>* make,
                       std::size_t data_bytes, const CuckooEdit& change);
    // Redoes a recorded change numbered `seq` (replay, replicas) and
    // records it in this keyspace's log: a fill (seq 0) always, a change
    // the filter already holds (seq at or below its last, from a snapshot
    // taken after the change) not at all, the next one in full. Fails with
    // nothing changed if the record does not fit the filter or a change
    // is missing before it.
    core::Status redo_cuckoo(cuckoo::CuckooObject& object, std::uint64_t seq,
                             const CuckooChange& change);

    // ---- Expiring filters (bloom/age_filter.hpp; keyspace_age.cpp) ----
    // BF.ADD / BF.MADD / BF.INSERT on the expiring filter under `key`: each
    // batch of up to ScalableFilter::kBatch items one AGE-ADD record, each
    // add recorded with the generation it read before its bits are set.
    // One result per item in `results`; out_of_memory for the first item of
    // a batch whose record could not be allocated (nothing of it changed),
    // and no result after it. `full` is set when a generation had no room
    // left (a shift is due). False if the key is missing. Throws WrongType
    // for a key of another kind.
    enum class AgeAdded : std::uint8_t { added, exists, out_of_memory };
    bool add_age_items(std::string_view key, std::span<const std::string_view> items,
                       std::vector<AgeAdded>& results, bool& full);
    // Shifts `filter` from generation `from` to the next at `now_ms` and
    // records it (AGE-SHIFT), in one data scope: no snapshot cut between the
    // two; false, nothing done, if the filter is no longer at `from` (another
    // thread shifted it). The caller read `from` current, then waited out
    // every add that had begun (wait_for_readers(): AgeFilter::shift()'s
    // precondition). Throws std::bad_alloc with nothing changed.
    bool shift_age(bloom::AgeFilter& filter, std::uint64_t now_ms, std::uint64_t from);
    // Redoes recorded adds and shifts (replay, replicas) in `filter`, which
    // this thread alone changes, recording them in this keyspace's own log.
    struct RecordedAgeAdd {
        std::uint64_t generation;
        bloom::ItemHash hash;
    };
    void redo_age_adds(bloom::AgeFilter& filter, std::span<const RecordedAgeAdd> adds);
    void redo_age_shift(bloom::AgeFilter& filter, std::uint64_t generation,
                        std::uint64_t shifted_ms);
    // BF.LOADCHUNK's data chunk `iter` (bloom/age_header.hpp: chunk iter − 2)
    // ORed into an expiring filter and recorded (AGE-WORDS) at its
    // generation; refused, nothing recorded, if it does not fit. Replay and
    // replicas redo the record (AgeFilter::redo_words).
    core::Status load_age_words(bloom::AgeFilter& filter, std::int64_t iter, std::string_view data);
    core::Status redo_age_words(bloom::AgeFilter& filter, std::uint64_t generation,
                                std::uint64_t first, std::string_view data);
    // The shifter this keyspace tells of expiring filters linked (it tracks
    // time windows) and of generations found full (it shifts them), and
    // whose role follows set_deadlines(); null: none. Set while nothing
    // else runs (at start) and cleared before the shifter is destroyed.
    void attach_age_shifter(AgeShifter* shifter);
    AgeShifter* age_shifter() const { return age_shifter_.load(std::memory_order_acquire); }

    // RESTORE and COPY: links a filter (`value`), complete with its bits and
    // item counts and not shared with anything yet, under `key` with the
    // options' deadline, access clock and use counter. Its CREATE record and
    // its bits, as CHUNK records (bloom::dump_chunk's, of up to
    // kRestoreChunkBytes each; chunks of zero words are left out, as replay
    // starts from zero bits) are encoded first and appended with the
    // change, under the shard's lock: no reader sees the key before its
    // bits, and replay and replicas rebuild the filter bit for bit, owing
    // nothing to the filter it was copied from. (A Cuckoo filter: its
    // CREATE and its slots as fill records, the same way.) False, nothing changed, if
    // the key is live and options.if_live is keep. Throws std::bad_alloc or
    // std::length_error with nothing changed.
    static constexpr std::size_t kRestoreChunkBytes = std::size_t{1} << 20;
    bool restore(std::string_view key, ValueRef value, const RestoreOptions& options = {});

    // Inserts `filter` under `key` only if the key is absent (or expired).
    bool insert_new(std::string_view key, ValueRef value, std::int64_t expire_at_ms = 0);
    // Inserts or replaces.
    void put(std::string_view key, ValueRef value, std::int64_t expire_at_ms = 0);
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
    // a lookup erases it). A counting filter must also still have
    // `contents` (ScalableFilter::content_hash()).
    enum class EraseIf { erased, gone, changed };
    EraseIf erase_if_unchanged(std::string_view key, const bloom::ScalableFilter* filter,
                               std::uint64_t items, std::size_t num_layers,
                               std::uint64_t contents = 0);
    // The same for a Cuckoo filter copied when it had made `changes`
    // changes (CuckooObject::changes()).
    EraseIf erase_if_unchanged(std::string_view key, const cuckoo::CuckooObject* filter,
                               std::uint64_t changes);

    // Removes every key at one instant (every shard locked at once, as for
    // view()); returns how many live keys there were. Filters are freed after
    // the locks are released.
    std::size_t clear();

    // ---- Walks and counts ----

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
        std::uint64_t items = 0;    // every Bloom filter's items inserted, summed
        std::size_t key_bytes = 0;  // the keys' names, summed
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

    // The expiring filters of live keys, one shard's shared lock at a time
    // (AgeShifter::lead(): O(keys), once per start or promotion).
    std::vector<bloom::AgeFilterRef> expiring_filters() const;
    // Copies the live entries of shard `index` (for KEYS: O(keys)).
    std::vector<KeySnapshot> shard_entries(std::size_t index) const;

    // One SCAN step: appends to `keys` the live keys of up to about `count`
    // buckets from `cursor` and returns the cursor to go on from (0 once
    // every shard was walked). Work is bounded by `count`: it may return
    // fewer keys than `count`, or none, with a cursor that is not 0.
    //
    // The cursor is (bucket, shard): the shard in its low bits, above them
    // a bucket of the shard's table counted in reverse binary, as Redis's
    // dictScan (ShardTable::scan()). So, as in Redis, a key present for the
    // whole scan is returned at least once, even if tables grow or shrink
    // between calls (a resize may return some keys twice).
    std::uint64_t scan(std::uint64_t cursor, std::size_t count,
                       std::vector<std::string>& keys) const;
    // A consistent copy of every live key (see KeyspaceView), for a
    // snapshot or only of the keys (ViewFor).
    KeyspaceView view(ViewFor purpose = ViewFor::snapshot) const;

    // One round of active expiry (ExpiryIndex::run_round()): samples keys
    // that have a deadline, ExpiryIndex::kSample of a shard at a time, the
    // shards in turn, and erases the expired ones, each with its DEL record,
    // until few of those it looked at had expired or `budget` has been
    // spent. Keys without a deadline are never looked at. Returns
    // how many keys it erased. Also frees what earlier writes unlinked while
    // lookups were still reading it.
    std::size_t active_expire_cycle(
        std::chrono::microseconds budget = std::chrono::milliseconds(25));
    // Frees unlinked nodes, tables and filters no lookup can still see.
    void reclaim() const { table_.reclaim(); }
    // Unlinked objects waiting for lookups to leave (for tests).
    std::size_t pending_reclaim() const { return table_.pending_reclaim(); }
    // Keys erased because their deadline passed, lazily or by the cycle.
    std::uint64_t expired_keys() const { return expiry_.expired_keys(); }
    ExpireStats expire_stats() const { return expiry_.stats(); }

    // Cluster mode: counts keys per hash slot (SlotCounts). Call before any
    // key exists and before clients are served (not thread-safe).
    void enable_slot_counts() { slot_counts_.enable(); }
    bool counts_slots() const { return slot_counts_.enabled(); }
    // Keys linked in `slot`, those past their deadline and not yet erased
    // included (as Redis's count); 0 when slot counts are off.
    std::uint64_t count_keys_in_slot(std::uint16_t slot) const { return slot_counts_.count(slot); }
    // Up to `limit` live keys of `slot` (CLUSTER GETKEYSINSLOT). Walks the
    // shards, hashing each key, under one shard's shared lock at a time, and
    // stops once it has `limit` keys or, with slot counts on, every key the
    // slot holds: O(keys) at worst, for an operator's command, not a client's.
    std::vector<std::string> keys_in_slot(std::uint16_t slot, std::size_t limit) const;

    // ---- Transactions (transaction_gates.hpp) ----

    // Begins a transaction on this thread over the shards of `keys`, or over
    // every shard (TransactionScope::every_shard; `keys` is not read). See
    // Transaction::begin(); not on a thread that already runs one.
    Transaction begin_transaction(std::span<const std::string_view> keys,
                                  TransactionScope scope = TransactionScope::keys);
    WatchStamp watch_stamp(std::string_view key) const;

    // Bytes of nodes, tables and the parts' indexes (what this keyspace
    // reports to core/memory.hpp as MemoryUse::keyspace); filters are
    // counted by themselves.
    std::uint64_t overhead_bytes() const {
        return table_.bytes() + expiry_.bytes() + slot_counts_.bytes();
    }
    // overhead_bytes() by what holds it (MEMORY STATS).
    struct Overhead {
        std::uint64_t main = 0;          // tables, nodes and key names
        std::uint64_t expires = 0;       // ExpirySets
        std::uint64_t slot_to_keys = 0;  // the cluster slot counters
    };
    Overhead overhead() const { return {table_.bytes(), expiry_.bytes(), slot_counts_.bytes()}; }

private:
    using Shard = ShardTable::Shard;
    using Node = ShardTable::Node;
    using Garbage = ShardTable::Garbage;
    // One change to one key, with the preamble every such change shares
    // (keyspace_write.hpp).
    class KeyWrite;

    // ---- Lookups (keyspace.cpp) ----
    enum class Probe { found, missing, retry, use_lock };
    static constexpr int kOptimisticAttempts = 4;
    // One lock-free lookup attempt (ShardTable::probe()), with the rule for
    // deadlines applied and the key's use counted.
    Probe probe_unlocked(const Shard& shard, std::string_view key, std::uint64_t hash,
                         const ValueRef*& value) const;
    // Whether a lookup is a command's use of the key (its access clock moves;
    // OBJECT IDLETIME) or only a look at it.
    enum class Use { touch, look };
    // Looks `key` up in `shard` under `lock`, a shared lock on it. An expired
    // entry is reaped (releasing the lock) and reported missing.
    const ValueRef* find_live(const Shard& shard, std::shared_lock<std::shared_mutex>& lock,
                              std::string_view key, std::uint64_t hash, Use use = Use::look) const;
    // Erases `key` if it is still expired (a lookup found it so), with a DEL
    // record; true if it did. Takes the shard's exclusive lock.
    bool reap(std::string_view key, std::uint64_t hash) const;

    // ---- Linking and unlinking (keyspace.cpp): the table's change and
    // every part's bookkeeping, in one place; under the exclusive lock. ----
    // Links `node`, its key absent; throws std::bad_alloc with nothing linked.
    void link(Shard& shard, Node* node, std::uint64_t hash, Garbage& garbage);
    // Links `node` in place of the node at `slot`; room for its deadline
    // reserved by the caller.
    void relink(Shard& shard, std::size_t slot, Node* node, std::uint64_t hash, Garbage& garbage);
    void unlink(Shard& shard, std::size_t slot, Garbage& garbage);
    // Every count for a node linked or unlinked.
    enum class Linked { in, out };
    void account(Shard& shard, const Node& node, Linked linked);
    // Room for one more key with a deadline in `shard` when `deadline` is one.
    void reserve_deadline(const Shard& shard, std::int64_t deadline);

    // ---- Writes (keyspace_writes.cpp) ----
    // What a filter is linked with: its CREATE record alone, or its bits
    // too (restore()).
    enum class Record { create, create_and_bits };
    struct Link {
        std::int64_t expire_at_ms = 0;
        IfLive if_live = IfLive::keep;
        Record record = Record::create;
        std::uint32_t accessed = 0;  // the key's access word
    };
    // insert_new, put and restore.
    bool store(std::string_view key, ValueRef value, const Link& how);
    enum class Moved { missing, exists, moved };
    Moved move_key(std::string_view from, std::string_view to, IfLive if_live);

    // ---- Expiring filters' adds (keyspace_age.cpp says how) ----
    enum class AtFull { go_on, stop };
    void add_to_age(bloom::AgeFilter& filter, std::span<const std::string_view> items,
                    std::vector<AgeAdded>& results, bool& full, AtFull at_full);
    std::size_t add_age_chunk(bloom::AgeFilter& filter, std::span<const std::string_view> items,
                              std::size_t from, std::vector<bloom::AddResult>& results,
                              bloom::AgeFilterRef& due);
    void continue_age_adds(std::string_view key, std::span<const std::string_view> items,
                           std::size_t done, std::vector<bloom::AddResult>& results,
                           bloom::AgeFilterRef due);

    // ---- Walks (keyspace_walks.cpp) ----
    // Samples one shard for active expiry.
    ExpiryIndex::Sampled expire_sample(std::size_t shard);

    mutable ShardTable table_;  // mutable: lookups reap expired keys
    mutable ExpiryIndex expiry_;
    const core::LfuSettings& lfu_;  // read (relaxed) by every lookup that uses a key
    SlotCounts slot_counts_;
    AddedItems items_added_;
    // Item counts at snapshot cuts (KeyspaceView::item_counts); mutable:
    // view() starts a session.
    mutable SnapshotCounts snapshot_counts_;
    std::atomic<MutationLog*> log_{nullptr};
    std::atomic<AgeShifter*> age_shifter_{nullptr};
    std::atomic<std::uint64_t> chunks_loaded_{0};  // BF.LOADCHUNK data chunks applied
};

}  // namespace bloomery::store
