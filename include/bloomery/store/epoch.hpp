#pragma once
// Epoch-based reclamation for the keyspace's lock-free lookups.
//
// A lookup on the hot path (BF.ADD / BF.EXISTS on an existing key) must not
// write any cache line other threads share, so it cannot take the shard's
// reader lock (an atomic read-modify-write on the lock word every thread
// touches) nor bump the filter's reference count. Instead it runs inside an
// EpochGuard: the thread publishes the global epoch in its own cache line
// while it reads, and the keyspace frees an unlinked node, table or filter
// only once no thread is still inside a guard entered before the unlink.
//
//   reader:  exchange(slot, epoch) seq_cst; load shard version seq_cst;
//            ...read...; slot = 0
//   writer:  unlink; publish shard version (release); fence seq_cst;
//            stamp = ++epoch; later (after another seq_cst fence) free if
//            every slot is 0 or >= stamp
//
// In the single order of seq_cst operations either the reader's exchange
// comes before the writer's fence, and the writer's scan sees the reader's
// slot (and waits), or after it, and the reader's seq_cst version load sees
// the version published after the unlink, so its reads see the unlink and
// never reach the object. (On x86 that is one xchg and a plain load.)
//
// Threads get one of kEpochSlots slots on first use and give it back when
// they exit. A thread that finds none free (more than kEpochSlots threads
// reading at once) gets an inactive guard and its caller takes the locked
// path, which stays correct.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace bloomery::store {

inline constexpr std::size_t kEpochSlots = 256;

class EpochGuard {
public:
    EpochGuard();
    ~EpochGuard();
    EpochGuard(const EpochGuard&) = delete;
    EpochGuard& operator=(const EpochGuard&) = delete;
    // False when this thread has no slot: the caller must not read without a lock.
    bool active() const { return slot_ != nullptr; }

private:
    std::atomic<std::uint64_t>* slot_;
    bool outermost_;
};

// Advances the global epoch after the caller unlinked something; returns the
// stamp to pass to epoch_passed() before freeing it.
std::uint64_t epoch_retire_stamp();
// True once no thread is inside a guard entered before `stamp` was taken.
bool epoch_passed(std::uint64_t stamp);

}  // namespace bloomery::store
