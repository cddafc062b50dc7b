#include "bloomery/store/epoch.hpp"

namespace bloomery::store {

namespace {

struct alignas(64) Slot {
    std::atomic<std::uint64_t> active{0};  // 0: outside any guard
    std::atomic<bool> owned{false};
};

Slot g_slots[kEpochSlots];
std::atomic<std::uint64_t> g_epoch{1};

// A thread's claim on one slot, given back when the thread exits.
struct Registration {
    Slot* slot = nullptr;
    int depth = 0;  // nested guards on this thread
    Registration() {
        for (Slot& candidate : g_slots) {
            bool expected = false;
            if (!candidate.owned.load(std::memory_order_relaxed) &&
                candidate.owned.compare_exchange_strong(expected, true,
                                                        std::memory_order_acq_rel)) {
                slot = &candidate;
                return;
            }
        }
    }
    ~Registration() {
        if (slot == nullptr) return;
        slot->active.store(0, std::memory_order_release);
        slot->owned.store(false, std::memory_order_release);
    }
};

Registration& registration() {
    thread_local Registration mine;
    return mine;
}

}  // namespace

EpochGuard::EpochGuard() : slot_(nullptr), outermost_(false) {
    Registration& reg = registration();
    if (reg.slot == nullptr) return;
    slot_ = &reg.slot->active;
    // A guard inside a guard keeps the outer one's epoch: it is older, so
    // everything the inner reads stays protected too.
    outermost_ = reg.depth++ == 0;
    if (!outermost_) return;
    // A seq_cst exchange on our own line is the store and the full fence in
    // one instruction (xchg on x86, cheaper than a store and mfence).
    slot_->exchange(g_epoch.load(std::memory_order_relaxed), std::memory_order_seq_cst);
}

EpochGuard::~EpochGuard() {
    if (slot_ == nullptr) return;
    --registration().depth;
    if (outermost_) slot_->store(0, std::memory_order_release);
}

std::uint64_t epoch_retire_stamp() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return g_epoch.fetch_add(1, std::memory_order_seq_cst) + 1;
}

bool epoch_passed(std::uint64_t stamp) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (const Slot& slot : g_slots) {
        const std::uint64_t entered = slot.active.load(std::memory_order_acquire);
        if (entered != 0 && entered < stamp) return false;
    }
    return true;
}

}  // namespace bloomery::store
