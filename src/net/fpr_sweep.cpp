#include "bloomery/net/fpr_sweep.hpp"

#include <algorithm>
#include <optional>

#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::net {

void FalsePositiveSweep::check(const store::Keyspace& keyspace, const std::string& key) {
    // inspect(): the key's filter without counting a use of the key (its
    // LFU clock stays as the clients left it).
    const std::optional<store::KeyDetails> details = keyspace.inspect(key);
    // Bloom filters only: a Cuckoo filter has no fill to estimate from.
    const bloom::ScalableFilter* found = details ? details->value.bloom_or_null() : nullptr;
    if (found == nullptr) return;
    const bloom::ScalableFilter& filter = *found;
    const double target = filter.options().error_rate;
    const double ratio = filter.estimated_false_positive_rate() / target;
    ++current_.filters_checked;
    if (ratio > 1.0) ++current_.over_target;
    current_.worst_ratio = std::max(current_.worst_ratio, ratio);
}

FalsePositiveGauges FalsePositiveSweep::step(const store::Keyspace& keyspace) {
    std::lock_guard lock(mutex_);
    // SCAN's steps of this many buckets, until the step's budget is spent or
    // the sweep ends.
    constexpr std::size_t kBucketsPerScan = 128;
    for (std::size_t spent = 0; spent < kBucketsPerStep; spent += kBucketsPerScan) {
        keys_.clear();
        cursor_ = keyspace.scan(cursor_, kBucketsPerScan, keys_);
        for (const std::string& key : keys_) check(keyspace, key);
        if (cursor_ == 0) {
            current_.sweeps = published_.sweeps + 1;
            published_ = current_;
            current_ = FalsePositiveGauges{};
            return published_;
        }
    }
    if (published_.sweeps == 0) return current_;
    return published_;
}

}  // namespace bloomery::net
