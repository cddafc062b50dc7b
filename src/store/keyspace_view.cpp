#include "bloomery/store/keyspace_view.hpp"

namespace bloomery::store {

KeyspaceView::AtCut KeyspaceView::at_cut(std::size_t i) const {
    counted_[i] = true;
    if (const bloom::AgeFilter* age = entries_[i].value.age_or_null()) {
        if (counts_) return counts_->at_cut(*age);
        AtCut state;
        state.generation = age->generation();
        state.shifted_ms = age->shifted_ms();
        state.counts.resize(age->slices());
        for (std::uint64_t b = 0; b < state.counts.size() && b <= state.generation; ++b) {
            state.counts[b] = age->generation_count(state.generation - b);
        }
        return state;
    }
    const bloom::ScalableFilter& filter = entries_[i].value.filter();
    if (counts_) return counts_->at_cut(filter);
    AtCut state;
    state.counts.resize(filter.num_layers());
    for (std::size_t l = 0; l < state.counts.size(); ++l) {
        state.counts[l] = filter.layer(l).items();
    }
    return state;
}

KeyspaceView::~KeyspaceView() {
    if (!counts_) return;
    // A snapshot that stopped early: its session ends first, so settling the
    // filters it never read saves counts only for other running sessions.
    counts_->end();
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        if (counted_[i]) continue;
        if (const bloom::ScalableFilter* filter = entries_[i].value.bloom_or_null()) {
            counts_->settle(*filter);
        } else if (const bloom::AgeFilter* age = entries_[i].value.age_or_null()) {
            counts_->settle(*age);
        }
    }
}

}  // namespace bloomery::store
