#include "bloomery/store/key_counts.hpp"

#include "bloomery/core/key_slot.hpp"
#include "bloomery/core/memory.hpp"

namespace bloomery::store {

namespace {
constexpr std::uint64_t kCountersBytes = core::kSlotCount * sizeof(std::atomic<std::uint64_t>);
}  // namespace

SlotCounts::~SlotCounts() {
    core::memory_add(core::MemoryUse::keyspace, -static_cast<std::int64_t>(bytes()));
}

void SlotCounts::enable() {
    if (counts_) return;
    counts_ = std::make_unique<std::atomic<std::uint64_t>[]>(core::kSlotCount);
    core::memory_add(core::MemoryUse::keyspace, static_cast<std::int64_t>(kCountersBytes));
}

void SlotCounts::add(std::string_view key, std::int64_t by) {
    if (!counts_) return;
    counts_[core::key_slot(key)].fetch_add(static_cast<std::uint64_t>(by),
                                           std::memory_order_relaxed);
}

std::uint64_t SlotCounts::count(std::uint16_t slot) const {
    if (!counts_ || slot >= core::kSlotCount) return 0;
    return counts_[slot].load(std::memory_order_relaxed);
}

void SlotCounts::clear() {
    if (!counts_) return;
    for (std::uint32_t slot = 0; slot < core::kSlotCount; ++slot) {
        counts_[slot].store(0, std::memory_order_relaxed);
    }
}

std::uint64_t SlotCounts::bytes() const {
    return counts_ ? kCountersBytes : 0;
}

void AddedItems::add(std::int64_t items) {
    if (items == 0) return;
    // Threads take stripes in turn, so up to kStripes threads each have
    // their own line.
    static std::atomic<std::size_t> next_stripe{0};
    thread_local const std::size_t stripe =
        next_stripe.fetch_add(1, std::memory_order_relaxed) % kStripes;
    stripes_[stripe].value.fetch_add(items, std::memory_order_relaxed);
}

std::int64_t AddedItems::sum() const {
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < kStripes; ++i)
        sum += stripes_[i].value.load(std::memory_order_relaxed);
    return sum;
}

}  // namespace bloomery::store
