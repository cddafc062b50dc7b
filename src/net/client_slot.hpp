#pragma once
// One of --maxclients' slots (worker_pool.hpp).

#include <atomic>
#include <cstddef>
#include <utility>

namespace bloomery::net {

// The acceptor takes a slot before a connection exists; the connection owns
// it and gives it back when it is destroyed, whichever way it ends.
// Move-only; an empty slot (default, or moved from) gives back nothing.
class ClientSlot {
public:
    ClientSlot() = default;
    ClientSlot(ClientSlot&& other) noexcept : taken_(std::exchange(other.taken_, nullptr)) {}
    ClientSlot& operator=(ClientSlot&& other) noexcept {
        if (this != &other) {
            release();
            taken_ = std::exchange(other.taken_, nullptr);
        }
        return *this;
    }
    ClientSlot(const ClientSlot&) = delete;
    ClientSlot& operator=(const ClientSlot&) = delete;
    ~ClientSlot() { release(); }

    // Takes a slot if fewer than `limit` of `taken` are held; empty if not.
    // Lock-free and atomic: however many threads try at once, `taken` never
    // exceeds `limit`. `taken` must outlive the slot.
    static ClientSlot acquire(std::atomic<std::size_t>& taken, std::size_t limit) {
        std::size_t now = taken.load(std::memory_order_relaxed);
        do {
            if (now >= limit) return {};
        } while (!taken.compare_exchange_weak(now, now + 1, std::memory_order_relaxed));
        return ClientSlot(taken);
    }
    explicit operator bool() const { return taken_ != nullptr; }

private:
    explicit ClientSlot(std::atomic<std::size_t>& taken) : taken_(&taken) {}
    void release() {
        if (taken_ != nullptr) taken_->fetch_sub(1, std::memory_order_relaxed);
        taken_ = nullptr;
    }

    std::atomic<std::size_t>* taken_ = nullptr;
};

}  // namespace bloomery::net
