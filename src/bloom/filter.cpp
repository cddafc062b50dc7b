#include "bloomery/bloom/filter.hpp"

#include <array>
#include <bit>
#include <cstdlib>
#include <new>

#include "bloomery/bloom/params.hpp"

namespace bloomery::bloom {

namespace {

using WordRef = std::atomic_ref<std::uint64_t>;
static_assert(WordRef::required_alignment <= alignof(std::max_align_t),
              "calloc's alignment must satisfy atomic_ref<uint64_t>");

std::uint64_t* allocate_words(std::uint64_t bits) {
    // calloc, not new[] + memset: for large sizes glibc serves it with mmap,
    // whose zero pages are committed only when first written. A 1.2 GB filter
    // (10^9 items at 1 %) then costs RSS in proportion to the bits set, and
    // creating it is O(1) instead of touching every page.
    const std::uint64_t words = bits / 64;
    void* p = std::calloc(static_cast<std::size_t>(words), sizeof(std::uint64_t));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<std::uint64_t*>(p);
}

}  // namespace

BloomLayer::BloomLayer(std::uint64_t capacity, double error_rate)
    : BloomLayer(capacity, error_rate, optimal_bits(capacity, error_rate),
                 optimal_hashes(error_rate)) {}

BloomLayer::BloomLayer(std::uint64_t capacity, double error_rate, std::uint64_t bits,
                       std::uint32_t hashes)
    : capacity_(capacity),
      error_rate_(error_rate),
      bits_(bits),
      hashes_(hashes),
      words_(allocate_words(bits)),
      set_bit_stripes_(new (std::nothrow) Stripe[kCounterStripes]) {
    if (!set_bit_stripes_) {
        std::free(words_);
        throw std::bad_alloc();
    }
}

BloomLayer::~BloomLayer() {
    std::free(words_);
}

bool BloomLayer::add(const ItemHash& hash) {
    bool added = false;
    for (std::uint32_t i = 0; i < hashes_; ++i) {
        const std::uint64_t pos = probe_position(hash, i, bits_);
        const std::uint64_t index = pos >> 6;
        const std::uint64_t mask = std::uint64_t{1} << (pos & 63);
        WordRef word(words_[index]);
        // Read before writing: re-adding a present item (common for crawlers)
        // then never dirties a shared cache line, as in RocksDB's DynamicBloom.
        if ((word.load(std::memory_order_relaxed) & mask) != 0) continue;
        const std::uint64_t old = word.fetch_or(mask, std::memory_order_relaxed);
        if ((old & mask) == 0) {
            // Only the thread that flipped the bit counts it, so the stripes
            // sum to the exact popcount once concurrent adds finish.
            set_bit_stripes_[index % kCounterStripes].count.fetch_add(1, std::memory_order_relaxed);
            added = true;
        }
    }
    return added;
}

bool BloomLayer::contains(const ItemHash& hash) const {
    for (std::uint32_t i = 0; i < hashes_; ++i) {
        const std::uint64_t pos = probe_position(hash, i, bits_);
        const std::uint64_t mask = std::uint64_t{1} << (pos & 63);
        if ((WordRef(words_[pos >> 6]).load(std::memory_order_relaxed) & mask) == 0) return false;
    }
    return true;
}

std::uint64_t BloomLayer::set_bits() const {
    std::int64_t total = 0;
    for (std::size_t i = 0; i < kCounterStripes; ++i) {
        total += set_bit_stripes_[i].count.load(std::memory_order_relaxed);
    }
    // A stripe can be transiently negative while store_words() races with
    // add(); the sum of a quiescent filter is exact and never negative.
    return total < 0 ? 0 : static_cast<std::uint64_t>(total);
}

std::uint64_t BloomLayer::load_word(std::uint64_t index) const {
    return WordRef(words_[index]).load(std::memory_order_relaxed);
}

void BloomLayer::copy_words(std::uint64_t first, std::uint64_t count, std::uint64_t* out) const {
    for (std::uint64_t i = 0; i < count; ++i) {
        out[i] = WordRef(words_[first + i]).load(std::memory_order_relaxed);
    }
}

void BloomLayer::store_words(std::uint64_t first, std::uint64_t count, const std::uint64_t* in) {
    std::array<std::int64_t, kCounterStripes> delta{};
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::uint64_t index = first + i;
        // exchange, not store: the popcount difference must be against the
        // word actually replaced for set_bits() to stay exact.
        const std::uint64_t old = WordRef(words_[index]).exchange(in[i], std::memory_order_relaxed);
        delta[index % kCounterStripes] += std::popcount(in[i]) - std::popcount(old);
    }
    for (std::size_t s = 0; s < kCounterStripes; ++s) {
        if (delta[s] != 0) {
            set_bit_stripes_[s].count.fetch_add(delta[s], std::memory_order_relaxed);
        }
    }
}

}  // namespace bloomery::bloom
