// Reading a layer's words (filter.hpp): single words, copies, and the
// touched regions snapshots, dumps and copies walk, with the check that
// they cover every non-zero word.

#include <atomic>
#include <bit>

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
