#pragma once
// A scalable Bloom filter (Almeida et al. 2007), as RedisBloom's: a chain of
// layers; layer i has capacity c·s^i and error p·r^(i+1) with r = 0.5 and
// s = expansion, so the compound false-positive rate stays within p. A
// NONSCALING filter is one layer at error p and refuses adds once full.
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

class FilterRef;
class ScalableFilter;

// An add about to set bits: the item's hash and the layer it goes into.
struct LoggedAdd {
    std::uint32_t layer;
    ItemHash hash;
};

// Told of adds after their room is reserved and before any of their bits is
// set, so whatever it records (the journal, persist/journal.hpp) precedes
// every lookup that can see those bits. Called from any worker thread.
class AddLog {
public:
    virtual ~AddLog() = default;
    virtual void adding(const ScalableFilter& filter, std::span<const LoggedAdd> adds) = 0;
};

class ScalableFilter {
public:
    // A new filter with the first layer derived from `options` (bounds.hpp:
    // first_layer). Throws std::bad_alloc. Precondition: check_options()
    // passes and the first layer is within check_layer().
    static FilterRef create(const FilterOptions& options);
    // A filter with exactly these layers, all bits clear, item counts 0, for
    // loaders. Throws std::bad_alloc. Precondition: options and every layer
    // pass their checks, 1 <= layers.size() <= kMaxLayers.
    static FilterRef create(const FilterOptions& options, std::span<const LayerGeometry> layers);
    // For loaders that own the filter exclusively (no concurrent add): appends
    // a layer with this geometry, all bits clear. Throws std::bad_alloc and
    // std::length_error past kMaxLayers. `geometry` must pass check_layer().
    BloomLayer& append_layer_for_load(const LayerGeometry& geometry);
    // Bytes create() would allocate for these layers, all layers included.
    static std::uint64_t allocation_bytes(std::span<const LayerGeometry> layers);

    // With a `log`, every item about to be added is told to it first (see
    // AddLog); an item the filter already holds is not.
    AddResult add(std::string_view item, const GrowthLimits& limits, AddLog* log = nullptr);
    AddResult add(const ItemHash& hash, const GrowthLimits& limits, AddLog* log = nullptr);
    bool contains(std::string_view item) const;
    bool contains(const ItemHash& hash) const;

    // Batches (BF.MADD, BF.MEXISTS, BF.INSERT): every item is hashed first and
    // its words prefetched before any is probed, so the cache misses of a
    // large filter overlap instead of being paid one after another.
    // add_many stores one result per item in `out` (out.size() >= items.size())
    // and stops after the first result other than added / exists, as
    // RedisBloom's MADD does; it returns how many results it stored.
    // With a `log`, one adding() call per batch of up to kBatch items.
    std::size_t add_many(std::span<const std::string_view> items, const GrowthLimits& limits,
                         std::span<AddResult> out, AddLog* log = nullptr);

    // Replays a journaled add (persist/journal.hpp) into a filter the caller
    // owns exclusively: grows the chain as the original did until `layer`
    // exists, then adds the item there unless some layer already holds it.
    // False if `layer` is beyond what the filter's options allow.
    bool replay_add(std::size_t layer, const ItemHash& hash);

    // A number that names this filter for the journal: unique among the
    // filters of one server run and of its snapshot and journal (kept by
    // both), unchanged by RENAME. Set once, before the filter is shared.
    std::uint64_t id() const { return id_; }
    void set_id(std::uint64_t id) { id_ = id; }
    // Ids for new filters come from one counter; loaders raise it past every
    // id they load.
    static std::uint64_t next_id();
    static void reserve_ids_through(std::uint64_t id);
    // out[i] = contains(items[i]) ? 1 : 0; out.size() >= items.size().
    void contains_many(std::span<const std::string_view> items, std::span<std::uint8_t> out) const;

    FilterOptions options() const;
    std::size_t num_layers() const { return num_layers_.load(std::memory_order_acquire); }
    const BloomLayer& layer(std::size_t i) const;
    BloomLayer& layer(std::size_t i);

    std::uint64_t capacity() const;  // sum of layer capacities
    std::uint64_t items() const;     // sum of layer item counts
    // Bytes this filter holds: header, every layer, every bit array (what
    // BF.INFO reports as Size and INFO counts in used_memory).
    std::uint64_t allocated_bytes() const;
    std::uint64_t bits_size() const;  // bit arrays only, in bytes
    // sum over layers of round((m/k)·ln(m/m0)); see estimate_items().
    std::uint64_t estimate_cardinality() const;

private:
    friend class FilterRef;
    ScalableFilter(const FilterOptions& options, const LayerGeometry& first,
                   std::uint64_t* first_words);
    ~ScalableFilter();
    static FilterRef allocate(const FilterOptions& options, const LayerGeometry& first);
    void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() const;
    // Appends a layer (growth or loading); the caller holds the growth lock
    // or owns the filter exclusively.
    void append_layer(LayerPtr layer);
    AddResult grow(std::size_t seen_layers, const GrowthLimits& limits);
    // The two halves of an add: prepare_add finds the item absent and
    // reserves room in the newest layer (growing it if full), returning
    // `added` with that layer's index; finish_add sets the bits.
    AddResult prepare_add(const ItemHash& hash, const GrowthLimits& limits, std::size_t& layer);
    AddResult finish_add(std::size_t layer, const ItemHash& hash);
    // Batches (add_many, contains_many) are taken kBatch items at a time:
    // 128 covers a BF.MADD of 100 in one pass, and the hashes (2 KiB) stay
    // on the stack.
    static constexpr std::size_t kBatch = 128;
    // Hashes items[first, first + n) into hashes[0, n) and calls probe(i)
    // for each i in order, with the words of items ahead prefetched in the
    // newest layer, so misses overlap (adds, and lookups in classic layers).
    template <class Probe>
    void hash_and_probe(std::span<const std::string_view> items, std::size_t first, std::size_t n,
                        ItemHash* hashes, Probe&& probe) const;

    mutable std::atomic<std::uint32_t> refs_{1};
    std::atomic<std::uint8_t> num_layers_{1};
    std::uint8_t flags_;       // kNonscaling | kBlocked (the layout new layers use)
    std::uint16_t expansion_;  // <= kMaxExpansion
    double error_rate_;
    std::uint64_t capacity_;
    // Layers 1..kMaxLayers-1, allocated on the first growth and never moved;
    // published before the layer count that makes an entry visible.
    std::atomic<BloomLayer**> more_layers_{nullptr};
    std::uint64_t id_;
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

private:
    friend class ScalableFilter;
    explicit FilterRef(ScalableFilter* adopted) : filter_(adopted) {}
    ScalableFilter* filter_ = nullptr;
};

}  // namespace bloomery::bloom
