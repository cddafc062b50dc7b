#pragma once
// One fixed-size Bloom filter ("layer" / sub-filter of a scalable filter).
//
// Thread safety: add(), contains() and every getter may be called from any
// number of threads at once without a lock: bits are set with a relaxed atomic
// fetch_or on 64-bit words (bits only go 0 -> 1), and the set-bit count is kept
// in cache-line-padded stripes chosen by word index, so concurrent adders do not
// contend on one counter. store_words() (used when loading) is atomic per word.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "bloomery/bloom/hash.hpp"

namespace bloomery::bloom {

class BloomLayer {
public:
    // Sized from the math in params.hpp. Memory is zero pages from the OS,
    // committed only as bits are set. Throws std::bad_alloc if it cannot allocate.
    BloomLayer(std::uint64_t capacity, double error_rate);
    // Explicit geometry, for loading a dump or snapshot. `bits` must be a
    // positive multiple of 64 and `hashes` >= 1 (checked by the caller).
    BloomLayer(std::uint64_t capacity, double error_rate, std::uint64_t bits, std::uint32_t hashes);
    ~BloomLayer();
    BloomLayer(const BloomLayer&) = delete;
    BloomLayer& operator=(const BloomLayer&) = delete;

    // Sets the item's k bits. Returns true if at least one bit went 0 -> 1.
    bool add(const ItemHash& hash);
    // True if all k bits are set (maybe present); false means definitely absent.
    bool contains(const ItemHash& hash) const;

    std::uint64_t capacity() const { return capacity_; }
    double error_rate() const { return error_rate_; }
    std::uint64_t bits() const { return bits_; }
    std::uint32_t hashes() const { return hashes_; }
    std::uint64_t num_words() const { return bits_ / 64; }
    std::uint64_t byte_size() const { return bits_ / 8; }

    // Count of adds to this layer that reported a new item (kept by the owner).
    std::uint64_t items() const { return items_.load(std::memory_order_relaxed); }
    void add_items(std::uint64_t n) { items_.fetch_add(n, std::memory_order_relaxed); }
    void set_items(std::uint64_t n) { items_.store(n, std::memory_order_relaxed); }

    // Number of bits set (exact once concurrent adds have finished).
    std::uint64_t set_bits() const;

    // Word access for dumps and snapshots. Words are host-order uint64_t.
    std::uint64_t load_word(std::uint64_t index) const;
    // Copies `count` words starting at `first` into `out` (relaxed atomic loads).
    void copy_words(std::uint64_t first, std::uint64_t count, std::uint64_t* out) const;
    // Overwrites `count` words starting at `first`, keeping set_bits() exact.
    void store_words(std::uint64_t first, std::uint64_t count, const std::uint64_t* in);

private:
    static constexpr std::size_t kCounterStripes = 16;
    struct alignas(64) Stripe {
        std::atomic<std::int64_t> count{0};
    };

    std::uint64_t capacity_;
    double error_rate_;
    std::uint64_t bits_;
    std::uint32_t hashes_;
    std::uint64_t* words_;  // calloc'ed; accessed only through std::atomic_ref
    std::atomic<std::uint64_t> items_{0};
    std::unique_ptr<Stripe[]> set_bit_stripes_;
};

}  // namespace bloomery::bloom
