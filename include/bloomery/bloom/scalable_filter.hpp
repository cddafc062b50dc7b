#pragma once
// A scalable Bloom filter (Almeida et al. 2007), as RedisBloom's: a chain of
// layers; layer i has capacity c·s^i and error p·r^(i+1) with r = 0.5 and
// s = expansion, so the compound false-positive rate stays within p. A
// NONSCALING filter is one layer at error p and refuses adds once full.
// Items are hashed and placed by the filter's scheme (bounds.hpp:
// HashScheme): bloomery's own, or RedisBloom's for filters migrated from it.
//
// Memory: a filter is one allocation holding its header, its first layer and
// that layer's words (224 bytes for a default filter: capacity 100 at 1 %);
// later layers are allocated as the filter grows. Filters are reference
// counted (FilterRef) so a snapshot can keep one alive after the keyspace
// dropped it. Every byte a filter allocates is reported to core/memory.hpp
// (MemoryUse::filters) when allocated and when freed.
//
// Thread safety: add(), contains() and the getters are safe from many threads
// at once. Readers take no lock: layers are published with release / acquire
// on the layer count; only creating a layer takes a growth lock.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>
#include <utility>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/filter.hpp"

namespace bloomery::bloom {

enum class AddResult {
    added,            // the item was new (at least one bit was set)
    exists,           // the filter already reported the item as present
    full,             // NONSCALING filter at capacity: "non scaling filter is full"
    too_many_layers,  // scaling filter has kMaxLayers layers, or the next would leave the bounds
    too_large,        // the next layer would exceed the filter byte limit
    out_of_memory,    // the next layer would exceed maxmemory, or allocation failed
};

// What growing a filter may cost; 0 means no limit.
struct GrowthLimits {
    std::uint64_t max_filter_bytes = 0;  // bit arrays of all layers together
    std::uint64_t maxmemory = 0;         // checked with core::memory_would_exceed
};

// What deleting an item from a counting filter did.
enum class RemoveResult {
    removed,        // it was present in a layer, whose cells were decremented
    absent,         // certainly not present (or not a counting filter): nothing changed
    out_of_memory,  // the recorder could not keep it: nothing changed
};

class FilterRef;
class ScalableFilter;

// Told of each add after its room in a layer is reserved and before any of
// its bits is set, so that whatever it records (store::MutationLog: the
// journal) holds the add before any lookup can see its bits, and says what
// was done: the layer and the hash. record() returning false (it could not
// keep the add: out of memory) cancels that add before anything changed;
// add_many() then reports out_of_memory for it and stops.
class AddRecorder {
public:
    virtual ~AddRecorder() = default;
    virtual bool record(std::uint32_t layer, const ItemHash& hash) noexcept = 0;
};

class ScalableFilter {
public:
    // A new filter with the first layer derived from `options` (bounds.hpp:
    // first_layer). Its bytes are reserved in core/memory.hpp before they
    // are allocated, against `maxmemory` (0: no limit), so clients creating
    // filters at once never together pass the limit: an empty reference if
    // they would. Throws std::bad_alloc. Precondition: check_options() passes
    // and the first layer is within check_layer().
    static FilterRef create(const FilterOptions& options, std::uint64_t maxmemory = 0);
    // A filter with exactly these layers, all bits clear, item counts 0, for
    // loaders; reserved against `maxmemory` as above. Throws std::bad_alloc.
    // Precondition: options and every layer pass their checks,
    // 1 <= layers.size() <= kMaxLayers.
    static FilterRef create(const FilterOptions& options, std::span<const LayerGeometry> layers,
                            std::uint64_t maxmemory = 0);
    // COPY: a new filter with `source`'s options and its first `num_layers`
    // layers (<= source.num_layers(), read once by the caller), their bits
    // and item counts, and a fresh id; reserved against `maxmemory` as
    // above (an empty reference if it would pass it). Safe beside adds to
    // `source`: its counts are read before its words, and bits only go
    // 0 -> 1, so the copy holds every add that finished before the call.
    // Throws std::bad_alloc.
    static FilterRef copy_of(const ScalableFilter& source, std::size_t num_layers,
                             std::uint64_t maxmemory = 0);
    // For loaders that own the filter exclusively (no concurrent add): appends
    // a layer with this geometry, all bits clear. Throws std::bad_alloc and
    // std::length_error past kMaxLayers. `geometry` must pass check_layer().
    BloomLayer& append_layer_for_load(const LayerGeometry& geometry);
    // Bytes create() would allocate for these layers, all layers included
    // (8 more for a filter whose tightening ratio is not the default).
    static std::uint64_t allocation_bytes(std::span<const LayerGeometry> layers);

    // One item, as add_many() with one item.
    AddResult add(std::string_view item, const GrowthLimits& limits,
                  AddRecorder* recorder = nullptr);
    AddResult add(const ItemHash& hash, const GrowthLimits& limits,
                  AddRecorder* recorder = nullptr);
    bool contains(std::string_view item) const;
    bool contains(const ItemHash& hash) const;

    // ---- Counting filters ----
    // The options' bit for Layout::counting (scalable_filter.cpp has the
    // others), read inline on every add.
    static constexpr std::uint8_t kCountingFlag = 64;
    bool counting() const { return (flags_ & kCountingFlag) != 0; }
    // Counting filters' adds, deletes and word writes are serialized, and
    // recorded in the order they take effect (saturating counters do not
    // commute): whoever changes one holds this lock (an empty one for other
    // filters) across the change and its record reaching the journal's
    // stream (store::MutationLog::publish_thread()).
    std::unique_lock<std::mutex> serialize_changes() const {
        return counting() ? counting_lock() : std::unique_lock<std::mutex>();
    }
    // BF.DEL: decrements the item's cells in the newest layer that holds it
    // (told to `recorder` first, as an add is) and counts one item less
    // there. Under serialize_changes().
    RemoveResult remove(const ItemHash& hash, AddRecorder* recorder = nullptr);
    // Redoes a recorded delete in layer `layer` (which exists); false if the
    // item is not present there (nothing changed).
    bool redo_remove(std::size_t layer, const ItemHash& hash);
    // XXH64 of every layer's item count and words: whether a counting
    // filter changed (MIGRATE's delete). O(bits); under serialize_changes().
    std::uint64_t content_hash() const;

    // Batches (BF.MADD, BF.INSERT): items are hashed and their words
    // prefetched a group ahead, so the cache misses of a large filter overlap,
    // then added one after another as RedisBloom does: each is looked up
    // (seeing the items before it), and if absent takes room in the newest
    // layer (growing the filter when that is full), is told to `recorder`,
    // sets its bits and is counted there. Stores one result per item in
    // `out` (out.size() >= items.size()), stops after the first result other
    // than added / exists, and returns how many results it stored.
    //
    // Exactness: an add that reached `recorder` is always counted in the
    // layer it recorded, whatever other threads did meanwhile (two threads
    // adding one item at once may both count it). So redoing the recorded
    // adds (redo_add) gives back the same bits and counts.
    std::size_t add_many(std::span<const std::string_view> items, const GrowthLimits& limits,
                         std::span<AddResult> out, AddRecorder* recorder = nullptr);
    // Batches (add_many, contains_many) are taken kBatch items at a time:
    // 128 covers a BF.MADD of 100 in one pass, and the hashes (2 KiB) stay
    // on the stack. Callers that record adds open one record per kBatch.
    static constexpr std::size_t kBatch = 128;

    // The two halves of one add, for callers that record between them:
    // plan_add() looks the item up and, if absent, reserves room for it in
    // the newest layer (growing the filter when that is full) and returns
    // `added` with that layer in `layer`; commit_add() then sets its bits
    // there and counts it. Every `added` plan is followed by exactly one
    // commit_add() or cancel_add() on the same thread.
    AddResult plan_add(const ItemHash& hash, const GrowthLimits& limits, std::size_t& layer);
    void commit_add(std::size_t layer, const ItemHash& hash);
    void cancel_add(std::size_t layer);

    // Redoing recorded adds (replay and replicas), in a filter only this
    // thread changes: redo_layers() grows the chain by the filter's own rule
    // (next_layer) until layer `layer` exists (false, nothing changed, if
    // the options do not allow it; throws std::bad_alloc); redo_add() then
    // sets the item's bits in that layer and counts it, deciding nothing.
    bool redo_layers(std::size_t layer);
    void redo_add(std::size_t layer, const ItemHash& hash);

    // A number that names this filter for the journal: unique among the
    // filters of one server run and of its snapshot and journal (kept by
    // both), unchanged by RENAME, below 2^48 (kMaxFilterId). Set once,
    // before the filter is shared.
    std::uint64_t id() const { return id_and_stamp_.load(std::memory_order_relaxed) & kIdMask; }
    void set_id(std::uint64_t id);
    static constexpr std::uint64_t kMaxFilterId = (std::uint64_t{1} << 48) - 1;
    // Ids for new filters come from one counter; loaders raise it past every
    // id they load.
    static std::uint64_t next_id();
    static void reserve_ids_through(std::uint64_t id);

    // A 16-bit mark kept beside the id for store/snapshot_counts.hpp: the
    // last snapshot cut whose item counts this filter has accounted for.
    // Lock-free; the store decides what it means.
    std::uint16_t count_stamp() const {
        return static_cast<std::uint16_t>(id_and_stamp_.load(std::memory_order_acquire) >> 48);
    }
    void set_count_stamp(std::uint16_t stamp) const;

    // out[i] = contains(items[i]) ? 1 : 0; out.size() >= items.size().
    void contains_many(std::span<const std::string_view> items, std::span<std::uint8_t> out) const;

    FilterOptions options() const;
    HashScheme scheme() const;
    // The item's hash in this filter's scheme (what add and contains use,
    // and what an add records).
    ItemHash hash(std::string_view item) const;
    std::size_t num_layers() const { return num_layers_.load(std::memory_order_acquire); }
    const BloomLayer& layer(std::size_t i) const;
    BloomLayer& layer(std::size_t i);

    // Holders of this filter now (the keyspace, snapshots being written,
    // copies taken by commands): OBJECT REFCOUNT. Relaxed; a moment's count.
    std::uint32_t references() const { return refs_.load(std::memory_order_relaxed); }

    std::uint64_t capacity() const;  // sum of layer capacities
    std::uint64_t items() const;     // sum of layer item counts
    // Bytes this filter holds: header, every layer, every bit array (what
    // BF.INFO reports as Size and INFO counts in used_memory).
    std::uint64_t allocated_bytes() const;
    std::uint64_t bits_size() const;  // bit arrays only, in bytes
    // What BF.INFO reports as Size: allocated_bytes(), or for a RedisBloom-
    // scheme filter RedisBloom's own count (redisbloom.hpp), so BF.INFO
    // answers as RedisBloom did for the same filter.
    std::uint64_t info_size() const;
    // sum over layers of round((m/k)·ln(m/m0)); see estimate_items().
    std::uint64_t estimate_cardinality() const;
    // The false-positive rate the filter has now, estimated from its layers'
    // fill: 1 − Π(1 − f_i^k_i), f_i the fraction of layer i's bits set
    // (params.hpp: fill_false_positive_rate). Reads each layer's set_bits():
    // per-thread counters for large layers, a popcount of at most 8192 words
    // for small ones.
    double estimated_false_positive_rate() const;

private:
    friend class FilterRef;
    ScalableFilter(const FilterOptions& options, const LayerGeometry& first,
                   std::uint64_t* first_words);
    ~ScalableFilter();
    class MemoryReservation;
    static FilterRef allocate(const FilterOptions& options, const LayerGeometry& first,
                              MemoryReservation* reserved);
    void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() const;
    // Appends a layer (growth or loading); the caller holds the growth lock
    // or owns the filter exclusively. Its bytes come out of `reserved` as far
    // as it holds them; the rest is counted here.
    void append_layer(LayerPtr layer, MemoryReservation* reserved = nullptr);
    AddResult grow(std::size_t seen_layers, const GrowthLimits& limits);
    // add() of a counting filter.
    AddResult count_add(const ItemHash& hash, const GrowthLimits& limits, AddRecorder* recorder);
    static constexpr std::uint64_t kIdMask = kMaxFilterId;
    // The lock of serialize_changes(), one of a pool shared by address.
    std::unique_lock<std::mutex> counting_lock() const;
    // Hashes items[first, first + n) into hashes[0, n) and calls probe(i)
    // for each i in order, with the words of items ahead prefetched in the
    // newest layer, so misses overlap (adds, and lookups in classic layers).
    template <class Probe>
    void hash_and_probe(std::span<const std::string_view> items, std::size_t first, std::size_t n,
                        ItemHash* hashes, Probe&& probe) const;

    mutable std::atomic<std::uint32_t> refs_{1};
    std::atomic<std::uint8_t> num_layers_{1};
    std::uint8_t flags_;  // kNonscaling | kBlocked, kAutomatic or kCounting (layout) | scheme bits
    std::uint16_t expansion_;  // <= kMaxExpansion
    double error_rate_;
    std::uint64_t capacity_;
    // Layers 1..kMaxLayers-1, allocated on the first growth and never moved;
    // published before the layer count that makes an entry visible.
    std::atomic<BloomLayer**> more_layers_{nullptr};
    // The id in the low 48 bits, the count stamp in the high 16.
    mutable std::atomic<std::uint64_t> id_and_stamp_;
    BloomLayer first_;
    // The first layer's words follow the object when they are inline.
};

// An owning, thread-safe reference to a filter (intrusive count: one atomic
// add per copy, no control block).
class FilterRef {
public:
    FilterRef() = default;
    FilterRef(const FilterRef& other) : filter_(other.filter_) {
        if (filter_) filter_->retain();
    }
    FilterRef(FilterRef&& other) noexcept : filter_(std::exchange(other.filter_, nullptr)) {}
    FilterRef& operator=(FilterRef other) noexcept {
        std::swap(filter_, other.filter_);
        return *this;
    }
    ~FilterRef() {
        if (filter_) filter_->release();
    }

    ScalableFilter* get() const { return filter_; }
    ScalableFilter& operator*() const { return *filter_; }
    ScalableFilter* operator->() const { return filter_; }
    explicit operator bool() const { return filter_ != nullptr; }
    void reset() { FilterRef().swap(*this); }
    void swap(FilterRef& other) noexcept { std::swap(filter_, other.filter_); }
    friend bool operator==(const FilterRef& ref, std::nullptr_t) { return ref.filter_ == nullptr; }
    // For a holder that keeps the pointer itself (store::ValueRef): gives up
    // this reference's count without releasing it, and takes one back.
    ScalableFilter* release_ownership() { return std::exchange(filter_, nullptr); }
    static FilterRef adopt(ScalableFilter* filter) { return FilterRef(filter); }
    // A new reference to a filter another holder keeps alive.
    static FilterRef share(ScalableFilter& filter) {
        filter.retain();
        return FilterRef(&filter);
    }

private:
    friend class ScalableFilter;
    explicit FilterRef(ScalableFilter* adopted) : filter_(adopted) {}
    ScalableFilter* filter_ = nullptr;
};

}  // namespace bloomery::bloom
