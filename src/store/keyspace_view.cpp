#include "bloomery/store/keyspace_view.hpp"

namespace bloomery::store {

KeyspaceView::AtCut KeyspaceView::at_cut(std::size_t i) const {
    counted_[i] = true;
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
        const bloom::ScalableFilter* filter = entries_[i].value.bloom_or_null();
        if (!counted_[i] && filter != nullptr) counts_->settle(*filter);
    }
}

}  // namespace bloomery::store
