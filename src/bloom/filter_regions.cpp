// A layer's words in bulk (filter.hpp): reading single words and copies,
// storing and OR-ing runs of them (loaders, merges), and the touched
// regions snapshots, dumps and copies walk, with the check that they cover
// every non-zero word.

#include <atomic>
#include <bit>

#include "bloomery/bloom/counting.hpp"
#include "bloomery/bloom/filter.hpp"

namespace bloomery::bloom {

namespace {
using WordRef = std::atomic_ref<std::uint64_t>;
}  // namespace

std::uint64_t BloomLayer::load_word(std::uint64_t index) const {
    return WordRef(words_[index]).load(std::memory_order_relaxed);
}

void BloomLayer::copy_words(std::uint64_t first, std::uint64_t count, std::uint64_t* out) const {
    for (std::uint64_t i = 0; i < count; ++i) {
        out[i] = WordRef(words_[first + i]).load(std::memory_order_relaxed);
    }
}

void BloomLayer::store_words(std::uint64_t first, std::uint64_t count, const std::uint64_t* in) {
    std::int64_t delta = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
        WordRef word(words_[first + i]);
        if (in[i] == 0) {
            // A zero over a zero is not written: loading a mostly empty
            // layer leaves its untouched pages uncommitted.
            if (word.load(std::memory_order_relaxed) == 0) continue;
        } else {
            touch(first + i);
        }
        // exchange, not store: the popcount difference must be against the
        // word actually replaced for set_bits() to stay exact.
        const std::uint64_t old = word.exchange(in[i], std::memory_order_relaxed);
        delta += static_cast<std::int64_t>(ones(in[i])) - static_cast<std::int64_t>(ones(old));
    }
    if (delta != 0) count_flipped(delta);
}

void BloomLayer::or_words(std::uint64_t first, std::uint64_t count, const std::uint64_t* in) {
    std::int64_t flipped = 0;
    if (counting()) {
        for (std::uint64_t i = 0; i < count; ++i) {
            if (in[i] == 0) continue;
            touch(first + i);
            WordRef word(words_[first + i]);
            const std::uint64_t old = word.load(std::memory_order_relaxed);
            const std::uint64_t sum = cells::saturating_add(old, in[i]);
            word.store(sum, std::memory_order_relaxed);
            flipped += cells::count_nonzero(sum) - cells::count_nonzero(old);
        }
        if (flipped != 0) count_flipped(flipped);
        return;
    }
    for (std::uint64_t i = 0; i < count; ++i) {
        if (in[i] == 0) continue;
        WordRef word(words_[first + i]);
        // As set_bit(): a word already holding every bit is not written.
        const std::uint64_t seen = word.load(std::memory_order_acquire);
        if ((seen & in[i]) == in[i]) continue;
        if (seen == 0) touch(first + i);  // as set_bit()
        const std::uint64_t old = word.fetch_or(in[i], std::memory_order_acq_rel);
        flipped += std::popcount(in[i] & ~old);
    }
    if (flipped != 0) count_flipped(flipped);
}

std::uint64_t BloomLayer::next_touched(std::uint64_t from) const {
    const std::uint64_t n = num_words();
    if (!mapped_ || from >= n) return from < n ? from : n;
    std::uint64_t* const bits = summary();
    const std::uint64_t total = summary_words(n);
    std::uint64_t region = from / kRegionWords;
    std::uint64_t at = region / 64;
    std::uint64_t word =
        WordRef(bits[at]).load(std::memory_order_relaxed) & (~std::uint64_t{0} << (region & 63));
    while (word == 0) {
        if (++at == total) return n;
        word = WordRef(bits[at]).load(std::memory_order_relaxed);
    }
    region = at * 64 + static_cast<std::uint64_t>(std::countr_zero(word));
    const std::uint64_t first = region * kRegionWords;
    return first >= n ? n : (first > from ? first : from);
}

std::uint64_t BloomLayer::touched_end(std::uint64_t from) const {
    const std::uint64_t n = num_words();
    if (!mapped_ || from >= n) return n;
    std::uint64_t* const bits = summary();
    const std::uint64_t total = summary_words(n);
    std::uint64_t region = from / kRegionWords;
    std::uint64_t at = region / 64;
    // The clear bits at or after the region of `from`.
    std::uint64_t word =
        ~WordRef(bits[at]).load(std::memory_order_relaxed) & (~std::uint64_t{0} << (region & 63));
    while (word == 0) {
        if (++at == total) return n;
        word = ~WordRef(bits[at]).load(std::memory_order_relaxed);
    }
    region = at * 64 + static_cast<std::uint64_t>(std::countr_zero(word));
    const std::uint64_t end = region * kRegionWords;
    return end >= n ? n : end;
}

bool BloomLayer::summary_covers_nonzero() const {
    const std::uint64_t n = num_words();
    for (std::uint64_t i = 0; i < n; ++i) {
        if (load_word(i) != 0 && next_touched(i) != i) return false;
    }
    return true;
}

}  // namespace bloomery::bloom
