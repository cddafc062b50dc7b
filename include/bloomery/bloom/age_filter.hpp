#pragma once
// An age-partitioned Bloom filter (age_params.hpp): items that expire.
//
// Slices: k + l = n of them, each m bits (age_slice_bits), in blocks of
// kAgeBlockBits (one cache line). Block b of every slice sits together:
// block b of slice s is line b·n + s of one array. Generations are numbered
// from 0 and never reused; generation L lives in physical slice L mod n, so
// at generation G position p (0 = newest) is slice (G − p) mod n, and the
// slices hold generations G − n + 1 .. G ("live"). An item has one block
// index b (fast range of h1 over m / 512) and, in physical slice s, one bit
// of that block (the top 9 bits of h2 times s's multiplier): each slice has its own bit
// function, whatever generation it holds, and an item's k newest slices are
// k adjacent lines (age_params.hpp: what the shared block index costs).
//
// Adds: an add reads G once and makes the item last a full window from
// then: it sets the item's bit in the k newest slices, generations
// G − k + 1 .. G ("stamped G"), unless all k are set already. So every
// add counts, whatever it answers: an item whose earlier add has aged, or
// which only a false positive made look present, is set again (a filter
// that skipped such an add would let an item added within the window
// answer 0). It answers "added" when the window did not hold the item
// before (BF.EXISTS would have said 0), else "exists". An item stamped L
// is found while every one of its k slices is live, that is while
// G <= L + l: for at least l full generations after its own.
//
// Shifts: shift() makes G + 1 current: it clears slice (G + 1) mod n (the
// oldest, generation G + 1 − n), then publishes G + 1. Its precondition is
// that no add stamped older than G is still running: such an add (stamped
// G + 1 − n + p for some p < k, l generations back or more) could write the
// slice being recycled. The keyspace provides it with its epoch: every add
// runs inside a guard, and a shift waits out the guards entered before G
// was published. One thread shifts a filter at a time.
//
// Counts: each generation takes g items (generation_items) before it wants
// a shift, counted exactly or late, never early, so the window always holds
// at least the last l·g items: adds take room for the current generation
// from per-thread budgets claimed in chunks from the generation's room (one
// shared write per chunk), and take what other slots still hold before
// declaring the generation full. An add that finds no room left still goes
// into the current generation (late), and shift_wanted() says a shift is
// due. Items per generation are counted per thread (two parities: adds in
// flight are stamped G or G − 1 at most), and each shift files the total
// of the generation two back, whose adds have all finished.
//
// Time windows keep the same counts (a burst beyond g still shifts early,
// so the guarantee in items holds); when to shift by the clock is decided
// by the primary's keyspace, which records each shift.
//
// Redoing recorded adds and shifts (replay, replicas), by one thread that
// alone changes the filter: redo_add(L, hash) first advances to L if the
// filter is behind (an add stamped L proves the primary published L), then
// sets the item's bits in those of its slices still live. advance_to()
// shifts to a given generation, every slice cleared at once when it is a
// window or more ahead. So records applied in any order between threads
// give back the primary's bits exactly.
//
// Thread safety: add(), contains() and the getters from any number of
// threads at once, without a lock; shift() from one thread at a time, under
// its precondition; redo_*(), advance_to() and the word writes only by a
// thread that alone changes the filter.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "bloomery/bloom/age_params.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/hash.hpp"
#include "bloomery/core/memory.hpp"

namespace bloomery::bloom {

struct AgeGeometry {
    AgeShape shape;                      // k, l
    std::uint64_t generation_items = 0;  // g: items a generation takes before it wants a shift
    std::uint64_t slice_bits = 0;        // m: age_slice_bits(shape, g)
    double error_rate = 0.0;             // what was asked for
    std::uint64_t window_ms = 0;         // time window; 0 for a count window
    std::uint32_t slices() const { return shape.k + shape.l; }
    // Items the window always holds: l·g.
    std::uint64_t window_items() const { return shape.l * generation_items; }
    // A time window's generation: window / l (0 for count windows).
    std::uint64_t generation_ms() const { return window_ms == 0 ? 0 : window_ms / shape.l; }
};

// The largest slice array an expiring filter may have (bits, all slices):
// a plain layer's.
inline constexpr std::uint64_t kMaxAgeBits = kMaxLayerBits;

// The geometry for a window of `capacity` items (count window) or of
// `capacity` items expected per window (time window, window_ms > 0) at
// `error_rate`: `shape` if given, else choose_age_shape(); g = ⌈capacity/l⌉.
// nullopt if the rate has no shape or the result breaks check_age_geometry.
std::optional<AgeGeometry> age_geometry(double error_rate, std::uint64_t capacity,
                                        std::uint64_t window_ms,
                                        std::optional<AgeShape> shape = std::nullopt);
// Empty if the geometry is one a filter can have (loaders check what they
// read), else what is wrong with it.
std::string_view check_age_geometry(const AgeGeometry& geometry);

class AgeFilterRef;

// Told of each add after its room is taken and before any of its bits is
// set, with the generation it is stamped with; false (could not keep it)
// cancels the add before anything changed.
class AgeRecorder {
public:
    virtual ~AgeRecorder() = default;
    virtual bool record(std::uint64_t generation, const ItemHash& hash) noexcept = 0;
};

class AgeFilter {
public:
    enum class Added { added, exists, not_recorded };

    // A new filter, all slices clear, at `generation`, its last shift at
    // `shifted_ms`. Throws std::bad_alloc. `geometry` must pass
    // check_age_geometry().
    static AgeFilterRef create(const AgeGeometry& geometry, std::uint64_t generation = 0,
                               std::uint64_t shifted_ms = 0);

    AgeGeometry geometry() const { return geometry_; }
    std::uint32_t slices() const { return geometry_.slices(); }
    std::uint64_t slice_words() const { return geometry_.slice_bits / 64; }
    std::uint64_t num_words() const { return slices() * slice_words(); }

    // The current generation, G.
    std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
    // When the last shift happened (the primary's clock, ms), for time windows.
    std::uint64_t shifted_ms() const { return shifted_ms_.load(std::memory_order_relaxed); }

    // Sets `*full` when the item took the current generation's last room,
    // or found none left (it is added all the same: the shift comes late,
    // never early): a shift is due.
    // An add whose k newest bits are all set already changes nothing and
    // is not recorded.
    Added add(const ItemHash& hash, AgeRecorder* recorder = nullptr, bool* full = nullptr);
    bool contains(const ItemHash& hash) const;
    // out[i] = contains(hashes[i]), each item's first probes prefetched a few
    // items ahead.
    void contains_many(const ItemHash* hashes, std::size_t n, std::uint8_t* out) const;

    // True when the current generation has taken its g items.
    bool shift_wanted() const;
    // Makes generation() + 1 current (see the top), its time `now_ms`.
    void shift(std::uint64_t now_ms);

    // ---- Redoing records (one thread alone changes the filter) ----
    void redo_add(std::uint64_t generation, const ItemHash& hash);
    // Shifts until `generation` is current, the last at `shifted_ms`; a
    // window or more ahead, every slice is cleared in one step. Nothing if
    // the filter is past it; if it is current (an add stamped with it came
    // first and made the step), only the time is taken.
    void advance_to(std::uint64_t generation, std::uint64_t shifted_ms);

    // Items in the generations whose items are all still found (G − l .. G),
    // exact once concurrent adds have finished.
    std::uint64_t items() const;
    // Items stamped `generation` (0 for one not live).
    std::uint64_t generation_count(std::uint64_t generation) const;
    // Sets the counts (loaders, before the filter is shared): counts[i] is
    // generation G − i's, for i < slices().
    void set_counts(const std::uint64_t* counts, std::size_t n);
    // Bits set in physical slice s (a popcount: O(m)).
    std::uint64_t slice_set_bits(std::uint32_t s) const;
    // The false-positive rate now: the paper's run probability over the
    // slices' measured fill (O(n·m) popcounts).
    double estimated_false_positive_rate() const;
    // Estimated distinct items in the window: the newest slice's fill gives
    // the current generation's items ((m)·ln(m/m0), m0 its clear bits), the
    // counts of the older live generations are added.
    std::uint64_t estimate_cardinality() const;

    // Word access (dumps, snapshots; host order). Writers: loaders, alone.
    std::uint64_t load_word(std::uint64_t index) const;
    void copy_words(std::uint64_t first, std::uint64_t count, std::uint64_t* out) const;
    void store_words(std::uint64_t first, std::uint64_t count, const std::uint64_t* in);
    // As BloomLayer's, for writers of runs (persist/filter_body.hpp): an
    // expiring filter keeps no touched-regions summary, so every word may
    // be non-zero.
    std::uint64_t next_touched(std::uint64_t from) const { return from; }
    std::uint64_t touched_end(std::uint64_t) const { return num_words(); }

    // BF.LOADCHUNK: ORs `data` (little-endian words, 8 bytes each) into the
    // words from `first`, which the caller checked fit. Made under
    // lock_whole_changes(), so no shift runs meanwhile: recorded with the
    // generation it was made at, it is redone exactly by redo_words().
    void or_words(std::uint64_t first, std::string_view data);
    // Redoes or_words() made at `generation`: advances to it first if
    // behind; ahead of it, leaves out the words of slices recycled since
    // (the primary's later shifts cleared them).
    void redo_words(std::uint64_t generation, std::uint64_t first, std::string_view data);
    // Serializes the changes that are not adds: shifts and or_words().
    std::unique_lock<std::mutex> lock_whole_changes() const {
        return std::unique_lock(whole_changes_);
    }

    // Bytes held (object, words, counters).
    std::uint64_t allocated_bytes() const;
    std::uint64_t id() const { return id_; }
    void set_id(std::uint64_t id) { id_ = id; }
    std::uint32_t references() const { return refs_.load(std::memory_order_relaxed); }
    // store/snapshot_counts.hpp's mark: the last snapshot cut whose counts
    // this filter has accounted for (as ScalableFilter::count_stamp()).
    // Shifts of a time window made early because a generation filled
    // before its time (a burst beyond the expected items), counted by the
    // shifter that made them since it began leading; not persisted.
    std::uint64_t early_shifts() const { return early_shifts_.load(std::memory_order_relaxed); }
    void count_early_shift() { early_shifts_.fetch_add(1, std::memory_order_relaxed); }

    std::uint16_t count_stamp() const { return count_stamp_.load(std::memory_order_acquire); }
    void set_count_stamp(std::uint16_t stamp) const {
        count_stamp_.store(stamp, std::memory_order_release);
    }

private:
    friend class AgeFilterRef;
    struct alignas(64) Slot {
        std::atomic<std::uint64_t> budget{0};          // packed: generation tag, room
        std::atomic<std::uint64_t> count[2] = {0, 0};  // items by stamp parity
    };
    AgeFilter(const AgeGeometry& geometry, std::uint64_t generation, std::uint64_t shifted_ms);
    ~AgeFilter();
    void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() const;

    std::uint32_t physical(std::uint64_t generation) const {
        return static_cast<std::uint32_t>(generation % slices());
    }
    std::uint64_t blocks() const { return geometry_.slice_bits / kAgeBlockBits; }
    // The first word of the item's block in slice 0 (its group of n lines).
    std::uint64_t* group(const ItemHash& hash) const;
    bool bit(const std::uint64_t* group, std::uint32_t slice, const ItemHash& hash) const;
    void set_bit(std::uint64_t* group, std::uint32_t slice, const ItemHash& hash) const;
    bool found(std::uint64_t generation, const ItemHash& hash) const;
    // The item's bits are set in the k newest slices.
    bool newest_hold(std::uint64_t generation, const ItemHash& hash) const;
    // The word of slice `slice`'s block `block`, and of word `i` in it.
    std::uint64_t word_index(std::uint64_t block, std::uint32_t slice, std::uint32_t i) const {
        return (block * slices() + slice) * (kAgeBlockBits / 64) + i;
    }
    bool take_room(std::uint64_t generation);
    bool took_last_room(std::uint64_t generation) const;
    bool take_from_others(std::uint64_t generation, std::size_t mine);
    void give_back_room(std::uint64_t generation);
    void clear_slice(std::uint32_t slice);
    // Every word zero (advance_to a window or more ahead).
    void clear_all();
    // Files generation `generation`'s per-thread counts into counts_ and
    // clears them (their parity is reused two generations on).
    void file_counts(std::uint64_t generation);
    void count_item(std::uint64_t generation);

    mutable std::atomic<std::uint32_t> refs_{1};
    mutable std::atomic<std::uint16_t> count_stamp_{0};
    std::atomic<std::uint64_t> early_shifts_{0};
    mutable std::mutex whole_changes_;
    std::uint64_t id_ = 0;
    AgeGeometry geometry_;
    std::atomic<std::uint64_t> generation_;
    std::atomic<std::uint64_t> shifted_ms_;
    alignas(64) std::atomic<std::uint64_t> room_;  // packed: generation tag, room
    std::uint64_t* words_ = nullptr;
    Slot* slots_ = nullptr;
    // Filed counts by physical slice of their generation; written by the
    // shifter (or the one redoing thread), read by anyone.
    std::atomic<std::uint64_t>* counts_ = nullptr;
    // Each physical slice's multiplier for the bit in its block (fixed: part
    // of the format).
    std::uint64_t* multipliers_ = nullptr;
    bool mapped_ = false;
    core::MemoryCharge charge_;
};

// An owning, thread-safe reference (intrusive count, as bloom::FilterRef).
class AgeFilterRef {
public:
    AgeFilterRef() = default;
    AgeFilterRef(const AgeFilterRef& other) : filter_(other.filter_) {
        if (filter_ != nullptr) filter_->retain();
    }
    AgeFilterRef(AgeFilterRef&& other) noexcept : filter_(std::exchange(other.filter_, nullptr)) {}
    AgeFilterRef& operator=(AgeFilterRef other) noexcept {
        std::swap(filter_, other.filter_);
        return *this;
    }
    ~AgeFilterRef() {
        if (filter_ != nullptr) filter_->release();
    }
    AgeFilter* get() const { return filter_; }
    AgeFilter& operator*() const { return *filter_; }
    AgeFilter* operator->() const { return filter_; }
    explicit operator bool() const { return filter_ != nullptr; }
    AgeFilter* release_ownership() { return std::exchange(filter_, nullptr); }
    static AgeFilterRef adopt(AgeFilter* filter) { return AgeFilterRef(filter); }
    static AgeFilterRef share(AgeFilter& filter) {
        filter.retain();
        return AgeFilterRef(&filter);
    }

private:
    friend class AgeFilter;
    explicit AgeFilterRef(AgeFilter* adopted) : filter_(adopted) {}
    AgeFilter* filter_ = nullptr;
};

}  // namespace bloomery::bloom
