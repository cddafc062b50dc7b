#include "bloomery/store/keyspace_view.hpp"

namespace bloomery::store {

std::vector<std::uint64_t> KeyspaceView::item_counts(std::size_t i) const {
    counted_[i] = true;
    const bloom::ScalableFilter& filter = *entries_[i].filter;
    if (counts_) return counts_->counts_at_cut(filter);
    std::vector<std::uint64_t> counts(filter.num_layers());
    for (std::size_t l = 0; l < counts.size(); ++l) counts[l] = filter.layer(l).items();
    return counts;
}

KeyspaceView::~KeyspaceView() {
    if (!counts_) return;
    // A snapshot that stopped early: its session ends first, so settling the
    // filters it never read saves counts only for other running sessions.
    counts_->end();
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        if (!counted_[i]) counts_->settle(*entries_[i].filter);
    }
}

}  // namespace bloomery::store
