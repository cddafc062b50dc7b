#pragma once
// Which filters have passed the error rate they were created for: each
// /metrics scrape checks a bounded slice of the keyspace, walking it with
// SCAN's cursor, so the cost of a scrape does not grow with the keyspace
// and a whole sweep takes about keys / kBucketsPerStep scrapes.
//
// A filter is checked with its estimated false-positive rate
// (bloom::ScalableFilter::estimated_false_positive_rate, BF.INFO FPR): per
// layer a read of per-thread counters, or a popcount of at most 4,096 words
// for a layer under 32 KiB. The gauges report the last complete sweep; until
// the first one completes, the sweep in progress.
//
// Thread-safe: steps are serialized by a mutex (scrapes are rare).

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "bloomery/store/keyspace.hpp"

namespace bloomery::net {

// What a sweep found.
struct FalsePositiveGauges {
    std::uint64_t filters_checked = 0;
    std::uint64_t over_target = 0;  // estimated rate above the created-for rate
    double worst_ratio = 0;         // the largest estimated rate / created-for rate
    std::uint64_t sweeps = 0;       // complete sweeps so far
};

class FalsePositiveSweep {
public:
    // SCAN buckets one step walks at most (about that many keys).
    static constexpr std::size_t kBucketsPerStep = 1024;

    // Checks the filters of up to kBucketsPerStep more buckets (ending the
    // sweep when the cursor comes back to 0) and returns the gauges.
    FalsePositiveGauges step(const store::Keyspace& keyspace);

private:
    void check(const store::Keyspace& keyspace, const std::string& key);

    std::mutex mutex_;
    std::uint64_t cursor_ = 0;
    FalsePositiveGauges current_;    // the sweep in progress
    FalsePositiveGauges published_;  // the last complete sweep
    std::vector<std::string> keys_;  // reused between steps
};

}  // namespace bloomery::net
