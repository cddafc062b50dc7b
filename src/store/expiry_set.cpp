#include "bloomery/store/expiry_set.hpp"

#include <new>

namespace bloomery::store {
namespace {

constexpr std::size_t kMinSlots = 8;

bool over_full(std::size_t count, std::size_t slots) {
    return count * 4 > slots * 3;
}

}  // namespace

std::size_t ExpirySet::home(std::uintptr_t entry) const {
    // Node addresses are 16-byte aligned and close together: mix them.
    std::uint64_t h = static_cast<std::uint64_t>(entry) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    return static_cast<std::size_t>(h) & mask_;
}

bool ExpirySet::rebuild(std::size_t slots) {
    std::unique_ptr<Slot[]> fresh(new (std::nothrow) Slot[slots]());
    if (!fresh) return false;
    std::unique_ptr<Slot[]> old = std::move(slots_);
    const std::size_t old_slots = old ? mask_ + 1 : 0;
    slots_ = std::move(fresh);
    mask_ = slots - 1;
    for (std::size_t i = 0; i < old_slots; ++i) {
        if (old[i].entry == 0) continue;
        std::size_t k = home(old[i].entry);
        while (slots_[k].entry != 0) k = (k + 1) & mask_;
        slots_[k] = old[i];
    }
    return true;
}

void ExpirySet::reserve(std::size_t more) {
    const std::size_t slots = slots_ ? mask_ + 1 : 0;
    if (slots != 0 && !over_full(count_ + more, slots)) return;
    std::size_t size = slots == 0 ? kMinSlots : slots;
    while (over_full(count_ + more, size)) size *= 2;
    if (!rebuild(size)) throw std::bad_alloc();
}

void ExpirySet::insert(std::uintptr_t entry, std::int64_t deadline) {
    std::size_t i = home(entry);
    while (slots_[i].entry != 0) i = (i + 1) & mask_;
    slots_[i] = Slot{entry, deadline};
    ++count_;
}

ExpirySet::Slot* ExpirySet::find(std::uintptr_t entry) const {
    if (!slots_) return nullptr;
    for (std::size_t i = home(entry);; i = (i + 1) & mask_) {
        if (slots_[i].entry == 0) return nullptr;
        if (slots_[i].entry == entry) return &slots_[i];
    }
}

bool ExpirySet::contains(std::uintptr_t entry) const {
    return find(entry) != nullptr;
}

bool ExpirySet::set_deadline(std::uintptr_t entry, std::int64_t deadline) {
    Slot* slot = find(entry);
    if (slot == nullptr) return false;
    slot->deadline = deadline;
    return true;
}

bool ExpirySet::erase(std::uintptr_t entry) {
    const Slot* found = find(entry);
    if (found == nullptr) return false;
    auto hole = static_cast<std::size_t>(found - slots_.get());
    // Backward-shift deletion, as the keyspace's own table.
    slots_[hole] = Slot{};
    for (std::size_t j = (hole + 1) & mask_; slots_[j].entry != 0; j = (j + 1) & mask_) {
        const std::size_t h = home(slots_[j].entry);
        const bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
        if (stays) continue;
        slots_[hole] = slots_[j];
        slots_[j] = Slot{};
        hole = j;
    }
    --count_;
    const std::size_t slots = mask_ + 1;
    if (count_ == 0) {
        slots_.reset();
        mask_ = 0;
    } else if (slots > kMinSlots && count_ * 8 < slots) {
        std::size_t size = kMinSlots;
        while (over_full(count_, size)) size *= 2;
        rebuild(size);  // if it cannot allocate, the bigger table stays
    }
    return true;
}

void ExpirySet::clear() {
    slots_.reset();
    mask_ = 0;
    count_ = 0;
}

}  // namespace bloomery::store
