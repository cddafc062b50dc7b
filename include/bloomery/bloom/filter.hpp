#pragma once
// One fixed-size Bloom filter ("layer" / sub-filter of a scalable filter).
//
// Storage: a layer's bit array lives right behind the layer object in the
// same allocation (small layers: a default filter is one allocation of a few
// hundred bytes), or from kMappedLayerBytes up in a page-aligned block of its
// own with the per-thread counters behind the words: from the allocator up
// to 1 MiB, above that an anonymous mapping whose zero pages the kernel
// commits only when a bit is first set (with transparent huge pages from
// 2 MiB) and which is returned to the kernel at once when the layer is
// destroyed. ("Mapped" below means a block of its own, either kind.)
//
// Counting: items() is the number of items this layer took (adds that set a
// new bit), and the layer refuses more than capacity() of them: an add first
// reserves room (reserve_item), then commits or cancels it, so a layer holds
// exactly capacity() items when it reports itself full, even under
// concurrent adds. set_bits() is the number of bits set, for BF.CARD.
//   Small layers (inline words) keep one atomic item count and popcount their
//   words when asked (a few thousand words at most).
//   Large layers (mapped) keep everything per thread, one cache line per
//   counter slot, so adders on different threads never write a shared line:
//   each slot holds the items it committed, the bits it flipped, and a budget
//   of room claimed in chunks from the layer's unclaimed capacity (one shared
//   write per chunk, not per item). When nothing is left unclaimed, a slot
//   takes room left in other slots' budgets, so no room is ever stranded.
//
// Layout (bounds.hpp): classic layers spread an item's k probes over the
// whole array (hash.hpp: probe_position); blocked layers put them in one
// block (512 to 4,096 bits) chosen by h1, at positions from h2
// (BasicBlockProbes).
// Counting layers (counting.hpp) are blocked in the same way, with 128
// 4-bit cells to a block; their "bits set" are the non-zero cells.
// Layers of the RedisBloom scheme (redisbloom.hpp) are classic with
// RedisBloom's probes, (h1 + i·h2) mod M; they keep RedisBloom's bpe and n2
// in 16 bytes right behind their words (inline) or their counters (mapped).
//
// Touched regions: mapped layers also keep one bit per kRegionWords words
// (a 2.6 GB layer: 630 KB, behind the counters), set before any word of its
// region first becomes non-zero, by every write (add, store_words,
// or_words), so the bits cover every non-zero word; a counting layer's
// deletes leave them set (a superset). Snapshots and dumps visit only the
// touched regions (next_touched(), touched_end()), so a large layer that is
// mostly empty costs in proportion to what it holds, not to its size.
//
// Thread safety: add(), contains() and every getter may be called from any
// number of threads at once without a lock: bits are set with an atomic
// fetch_or on 64-bit words, and only when a plain load shows them clear
// (bits only go 0 -> 1). store_words() (loading) is atomic per word.
// Counting layers: contains() and the getters from any thread at any time;
// add(), remove() and every word write from one thread at a time, as
// saturating increments and decrements do not commute (whoever records
// them serializes them: ScalableFilter::serialize_changes()).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/counting.hpp"
#include "bloomery/bloom/hash.hpp"

namespace bloomery::bloom {

// Bit arrays of at least this many bytes get a block of their own with
// per-thread counters; smaller ones live inline, keep one shared item count
// and popcount. 32 KiB: the 1 KiB of counter slots and the page rounding
// cost under 16 % there, and a filter that size (27k items at 1 %) is
// already worth adding to from several threads at once (one shared count
// made a 64 KiB filter slower from 2 threads than from one;
// tests/bench/README.md).
inline constexpr std::uint64_t kMappedLayerBytes = 32 * 1024;

class BloomLayer {
public:
    // Bytes to reserve right behind a layer object for its words (and a
    // RedisBloom layer's description), when they are stored inline (0 when
    // the layer will be mapped).
    static std::size_t inline_bytes(const LayerGeometry& geometry);

    // Builds a layer over `inline_words` (the inline_bytes(geometry) bytes
    // right behind it, zeroed by the caller) or, when inline_bytes(geometry)
    // is 0, over a new mapping (`inline_words` is then ignored). Throws
    // std::bad_alloc if the mapping fails. `geometry` must satisfy check_layer().
    BloomLayer(const LayerGeometry& geometry, std::uint64_t* inline_words);
    ~BloomLayer();
    BloomLayer(const BloomLayer&) = delete;
    BloomLayer& operator=(const BloomLayer&) = delete;

    // Sets the item's k bits (counting: increments its k cells, a cell
    // probed twice twice, 15 stays). Returns true if at least one bit (cell)
    // went from 0.
    bool add(const ItemHash& hash);
    // Counting layers only: if every one of the item's cells is non-zero,
    // decrements each (one at 15 stays, none goes below 0) and returns
    // true; otherwise changes nothing and returns false.
    bool remove(const ItemHash& hash);
    // True if all k bits are set (maybe present); false means definitely absent.
    bool contains(const ItemHash& hash) const;
    // Asks the CPU to fetch the words add/contains of this item will touch
    // (its block, or its first probes), so batches overlap their misses.
    void prefetch(const ItemHash& hash) const;
    // Blocked layers only (blocked_layout()): found[i] = contains(hashes[i])
    // for i in [0, n), in order, each item's block (all its cache lines)
    // prefetched 16 items ahead (about what a core's fill buffers hold for
    // one-line blocks; 8, 24, 32 and 48 were slower or no faster).
    // One call for the batch, so the loop keeps the layer's fields in
    // registers.
    void contains_blocked(const ItemHash* hashes, std::size_t n, std::uint8_t* found) const;

    LayerGeometry geometry() const;
    Layout layout() const { return static_cast<Layout>(layout_); }
    HashScheme scheme() const {
        return redisbloom_ != 0 ? HashScheme::redisbloom : HashScheme::bloomery;
    }
    std::uint64_t capacity() const { return capacity_; }
    double error_rate() const { return error_rate_; }
    std::uint64_t bits() const { return bits_; }
    bool counting() const { return layout_ == static_cast<std::uint8_t>(Layout::counting); }
    // Bits, or a counting layer's cells: the m of the fill and the estimates.
    std::uint64_t cells() const { return counting() ? bits_ / kCellBits : bits_; }
    std::uint32_t hashes() const { return static_cast<std::uint32_t>(hashes_); }
    std::uint64_t num_words() const { return bits_ / 64; }
    std::uint64_t byte_size() const { return bits_ / 8; }  // the bit array
    bool mapped() const { return mapped_ != 0; }
    // Bytes this layer holds outside the object that contains it (its mapping,
    // counters included); 0 for inline words.
    std::uint64_t mapped_bytes() const;

    // Items taken: committed adds (exact once concurrent adds have finished).
    std::uint64_t items() const;
    // For loaders that own the layer exclusively: the item count, with room
    // for capacity() - n more (none if n >= capacity()). Called before the
    // words are loaded: a large layer whose n items touch fewer than one
    // 4 KiB page in 8 gets no huge pages (filter.cpp), so loading it commits
    // only the pages its words are on.
    void set_items(std::uint64_t n);

    // Reserves room for one item; false when the layer already holds
    // capacity() items (counting reservations not yet committed). A
    // reservation is followed by exactly one commit_item() (the item was new)
    // or cancel_item() (it was not), on the same thread.
    bool reserve_item();
    void commit_item();
    void cancel_item();
    // Counts an item without a reservation (redoing a recorded add): the
    // room it takes comes out of what is left, if any is.
    void count_item();
    // Counting layers: one item less (a delete), its room given back.
    void uncount_item();

    // Number of bits set, or of a counting layer's non-zero cells (exact once
    // concurrent adds and loads have finished).
    std::uint64_t set_bits() const;

    // Word access for dumps and snapshots. Words are host-order uint64_t.
    std::uint64_t load_word(std::uint64_t index) const;
    // Copies `count` words starting at `first` into `out` (relaxed atomic loads).
    void copy_words(std::uint64_t first, std::uint64_t count, std::uint64_t* out) const;
    // Overwrites `count` words starting at `first`, keeping set_bits() exact
    // (loaders, on a layer nobody else uses yet).
    void store_words(std::uint64_t first, std::uint64_t count, const std::uint64_t* in);
    // Sets the bits of `in` in `count` words starting at `first` (bits only
    // go 0 -> 1), keeping set_bits() exact; safe beside concurrent adds.
    // Counting layers add `in`'s cells to theirs instead, saturating (a
    // merge; serialized as add() is).
    void or_words(std::uint64_t first, std::uint64_t count, const std::uint64_t* in);

    // Touched regions (see the top of this file). Words per region: 512
    // bytes, so one summary word covers 32 KiB of words.
    static constexpr std::uint64_t kRegionWords = 64;
    // Words of the touched-regions bitmap (mapped layers) of a layer of `num_words` words.
    static constexpr std::uint64_t summary_words(std::uint64_t num_words) {
        return ((num_words + kRegionWords - 1) / kRegionWords + 63) / 64;
    }
    // The first word at or after `from` that may be non-zero: `from` itself
    // if its region is touched, else the first word of the next touched
    // region; num_words() if there is none. Inline layers keep no summary:
    // `from` (every word may be non-zero).
    std::uint64_t next_touched(std::uint64_t from) const;
    // The end of the run of touched regions holding `from`: the first word of
    // the next untouched region, or num_words(). Inline layers: num_words().
    std::uint64_t touched_end(std::uint64_t from) const;
    // Whether every non-zero word lies in a touched region (tests and fuzz
    // targets; reads every word). Always true for inline layers.
    bool summary_covers_nonzero() const;

private:
    struct alignas(64) Counter {
        std::atomic<std::int64_t> flipped{0};  // bits set (stores may make it negative)
        std::atomic<std::uint64_t> items{0};   // items committed
        std::atomic<std::uint64_t> budget{0};  // room claimed, not yet reserved
    };
    Counter* counters() const;  // mapped layers only: behind the words
    Counter& my_counter() const;
    void count_flipped(std::int64_t n);
    bool reserve_from_chunk(Counter& mine);
    bool reserve_from_others();

    // A RedisBloom layer's own fields, kept verbatim (LayerGeometry).
    struct RedisBloomFields {
        double bpe;
        std::uint8_t n2;
    };
    static_assert(sizeof(RedisBloomFields) == 16);
    RedisBloomFields* redisbloom_fields() const;
    // RedisBloom probes are reduced modulo this: 2^n2, or the bit count.
    std::uint64_t redisbloom_modulus() const;

    // Packed into one word (capacity <= 2^48, hashes <= 128) so a filter's
    // header keeps room for its id within 80 bytes (scalable_filter.cpp).
    std::uint64_t capacity_ : 49;
    std::uint64_t hashes_ : 8;
    std::uint64_t mapped_ : 1;  // 1: words_ and counters are a block of mapped_bytes() of their own
    std::uint64_t layout_ : 4;  // Layout
    std::uint64_t redisbloom_ : 1;    // HashScheme::redisbloom
    std::uint64_t pow2_modulus_ : 1;  // RedisBloom layer with n2 != 0
    double error_rate_;
    std::uint64_t bits_;
    // Blocked and counting layouts: the first word of an item's block (blocked layers are
    // whole blocks, in their own page-aligned storage: on cache lines).
    std::uint64_t block_start(const ItemHash& hash) const;
    // Bits set in a word, or a counting layer's non-zero cells.
    std::uint64_t ones(std::uint64_t word) const;
    // Mapped layers: the touched-regions bitmap, behind the counters and a
    // RedisBloom layer's fields.
    std::uint64_t* summary() const;
    // Marks the region of word `index` touched (mapped layers; a no-op for
    // inline ones). Called before the word is written non-zero.
    void touch(std::uint64_t index);
    // Sets bit `pos` of the words; 1 if this call flipped it.
    std::int64_t set_bit(std::uint64_t pos);
    // Inline layers: items taken (reserved or committed). Mapped layers:
    // room not yet claimed by any counter slot.
    std::atomic<std::uint64_t> taken_or_unclaimed_;
    std::uint64_t* words_;  // accessed only through std::atomic_ref
};

// A layer that owns its allocation (layers after a scalable filter's first,
// and tests): created with make_layer(), freed with the unique_ptr.
struct LayerDeleter {
    void operator()(BloomLayer* layer) const;
};
using LayerPtr = std::unique_ptr<BloomLayer, LayerDeleter>;
// Throws std::bad_alloc. `geometry` must satisfy check_layer().
LayerPtr make_layer(const LayerGeometry& geometry);
// Bytes make_layer(geometry) allocates in all (object, words, mapping).
std::uint64_t layer_allocation_bytes(const LayerGeometry& geometry);

}  // namespace bloomery::bloom
