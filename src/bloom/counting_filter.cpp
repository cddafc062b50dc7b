// A counting filter's own operations (ScalableFilter's counting part:
// scalable_filter.hpp; its cells: counting.hpp).

#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <new>

#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::bloom {

AddResult ScalableFilter::count_add(const ItemHash& hash, const GrowthLimits& limits,
                                    AddRecorder* recorder) {
    // Counted whether present or not (a multiset: each add is one delete's
    // worth), so an item that was a false positive when added still holds
    // cells of its own that deleting another item cannot take.
    const bool present = contains(hash);
    std::size_t n = num_layers();
    while (!layer(n - 1).reserve_item()) {
        if (options().nonscaling) return AddResult::full;
        const AddResult grown = grow(n, limits);
        if (grown != AddResult::added) return grown;
        n = num_layers();
    }
    if (recorder != nullptr && !recorder->record(static_cast<std::uint32_t>(n - 1), hash)) {
        cancel_add(n - 1);
        return AddResult::out_of_memory;
    }
    commit_add(n - 1, hash);
    return present ? AddResult::exists : AddResult::added;
}

RemoveResult ScalableFilter::remove(const ItemHash& hash, AddRecorder* recorder) {
    if (!counting()) return RemoveResult::absent;
    for (std::size_t i = num_layers(); i-- > 0;) {
        BloomLayer& target = layer(i);
        if (!target.contains(hash)) continue;
        if (recorder != nullptr && !recorder->record(static_cast<std::uint32_t>(i), hash)) {
            return RemoveResult::out_of_memory;
        }
        target.remove(hash);
        target.uncount_item();
        return RemoveResult::removed;
    }
    return RemoveResult::absent;
}

bool ScalableFilter::redo_remove(std::size_t layer_index, const ItemHash& hash) {
    BloomLayer& target = layer(layer_index);
    if (!target.remove(hash)) return false;
    target.uncount_item();
    return true;
}

std::uint64_t ScalableFilter::content_hash() const {
    XXH64_state_t* state = XXH64_createState();
    if (state == nullptr) throw std::bad_alloc();
    XXH64_reset(state, 0);
    std::uint64_t words[512];
    for (std::size_t i = 0, n = num_layers(); i < n; ++i) {
        const BloomLayer& l = layer(i);
        const std::uint64_t items = l.items();
        XXH64_update(state, &items, sizeof items);
        for (std::uint64_t first = 0; first < l.num_words(); first += 512) {
            const std::uint64_t count = std::min<std::uint64_t>(512, l.num_words() - first);
            l.copy_words(first, count, words);
            XXH64_update(state, words, count * sizeof words[0]);
        }
    }
    const std::uint64_t digest = XXH64_digest(state);
    XXH64_freeState(state);
    return digest;
}

std::unique_lock<std::mutex> ScalableFilter::counting_lock() const {
    // Shared by a few filters each, as growth's locks are: contention only
    // between counting filters that hash alike, for the length of one batch.
    static std::mutex locks[64];
    const auto address = reinterpret_cast<std::uintptr_t>(this);
    return std::unique_lock(locks[(address >> 6) % 64]);
}

}  // namespace bloomery::bloom
