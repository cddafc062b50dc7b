// store::ExpiryIndex: the keys that have a deadline, and active expiry.

#include "bloomery/store/expiry_index.hpp"

#include <cstdint>

#include "bloomery/core/memory.hpp"

namespace bloomery::store {

ExpiryIndex::ExpiryIndex(std::size_t num_shards)
    : shards_(std::make_unique<Shard[]>(num_shards)), num_shards_(num_shards) {}

ExpiryIndex::~ExpiryIndex() {
    core::memory_add(core::MemoryUse::keyspace, -static_cast<std::int64_t>(bytes()));
}

void ExpiryIndex::charge_since(const Shard& shard, std::size_t before) {
    const std::int64_t bytes =
        static_cast<std::int64_t>(shard.keys.bytes()) - static_cast<std::int64_t>(before);
    if (bytes == 0) return;
    bytes_.fetch_add(static_cast<std::uint64_t>(bytes), std::memory_order_relaxed);
    core::memory_add(core::MemoryUse::keyspace, bytes);
}

void ExpiryIndex::reserve(std::size_t index) {
    Shard& shard = shards_[index];
    const std::size_t before = shard.keys.bytes();
    shard.keys.reserve(1);
    charge_since(shard, before);
}

void ExpiryIndex::change(std::size_t index, std::uintptr_t entry, std::int64_t from,
                         std::int64_t to) {
    Shard& shard = shards_[index];
    const std::size_t before = shard.keys.bytes();
    if (from == 0 && to != 0) {
        shard.keys.insert(entry, to);
    } else if (from != 0 && to == 0) {
        shard.keys.erase(entry);
    } else if (from != 0) {
        shard.keys.set_deadline(entry, to);
    }
    shard.deadline_sum += static_cast<Int128>(to) - static_cast<Int128>(from);
    shard.count.store(shard.keys.size(), std::memory_order_relaxed);
    charge_since(shard, before);
}

void ExpiryIndex::clear(std::size_t index) {
    Shard& shard = shards_[index];
    const std::size_t before = shard.keys.bytes();
    shard.keys.clear();
    shard.count.store(0, std::memory_order_relaxed);
    shard.deadline_sum = 0;
    charge_since(shard, before);
}

std::size_t ExpiryIndex::sample_expired(std::size_t index, std::int64_t now,
                                        const std::function<void(std::uintptr_t)>& fn) {
    Shard& shard = shards_[index];
    std::size_t sampled = 0;
    const std::size_t resume =
        shard.keys.sample(shard.cursor.load(std::memory_order_relaxed), kSample, kSample * 20,
                          [&](std::uintptr_t entry, std::int64_t deadline) {
                              ++sampled;
                              if (deadline <= now) fn(entry);
                          });
    shard.cursor.store(resume, std::memory_order_relaxed);
    return sampled;
}

void ExpiryIndex::visit_expired(std::size_t index, std::int64_t now,
                                const std::function<void(std::uintptr_t)>& fn) const {
    const ExpirySet& keys = shards_[index].keys;
    // Every slot of the set once.
    keys.sample(0, SIZE_MAX, keys.slots(), [&](std::uintptr_t entry, std::int64_t deadline) {
        if (deadline <= now) fn(entry);
    });
}

std::size_t ExpiryIndex::run_round(std::chrono::microseconds budget,
                                   const std::function<Sampled(std::size_t shard)>& sample_shard) {
    const auto started = std::chrono::steady_clock::now();
    const auto spent = [&] { return std::chrono::steady_clock::now() - started >= budget; };
    std::size_t removed = 0;
    std::size_t looked_at = 0;
    bool out_of_time = false;
    for (std::size_t visited = 0; visited < num_shards_; ++visited) {
        const std::size_t shard = next_shard_.fetch_add(1, std::memory_order_relaxed) % num_shards_;
        if (count(shard) == 0) continue;
        for (;;) {
            const Sampled sampled = sample_shard(shard);
            removed += sampled.erased;
            looked_at += sampled.looked_at;
            // Again while more than a tenth of the sample had expired (the
            // shard likely holds many more), as Redis's acceptable staleness.
            if (sampled.looked_at == 0 || sampled.erased * 10 <= sampled.looked_at || spent()) {
                break;
            }
        }
        if (spent()) {
            out_of_time = true;
            break;
        }
        // Enough looked at, and too few of them expired to go on.
        if (looked_at >= kSample && removed * 10 <= looked_at) break;
    }
    // INFO stats, as Redis keeps them: the share of sampled keys found
    // expired, smoothed over rounds (5 % weight for each new round), rounds
    // stopped by their time budget, and the time spent.
    const double current =
        looked_at == 0 ? 0.0
                       : static_cast<double>(removed) * 100.0 / static_cast<double>(looked_at);
    const double stale = stale_percent_.load(std::memory_order_relaxed);
    stale_percent_.store(current * 0.05 + stale * 0.95, std::memory_order_relaxed);
    if (out_of_time) {
        time_cap_reached_.store(time_cap_reached_.load(std::memory_order_relaxed) + 1,
                                std::memory_order_relaxed);
    }
    const auto took = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - started);
    round_us_.store(
        round_us_.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(took.count()),
        std::memory_order_relaxed);
    return removed;
}

ExpireStats ExpiryIndex::stats() const {
    return {stale_percent_.load(std::memory_order_relaxed),
            time_cap_reached_.load(std::memory_order_relaxed),
            round_us_.load(std::memory_order_relaxed) / 1000};
}

}  // namespace bloomery::store
