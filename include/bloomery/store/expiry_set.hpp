#pragma once
// The keys of one keyspace shard that have a deadline, kept apart from the
// others so active expiry looks only at them (as Redis keeps its `expires`
// dictionary): an open-addressing set of node addresses, each beside its
// deadline (16 bytes a slot, so a sample reads the slots only and touches a
// node only once its deadline has passed), between 1/8 and 3/4 full. Not
// thread-safe: the shard's lock guards it.
//
// Memory: insert() never allocates; reserve() makes room first and is the
// only call that can throw (std::bad_alloc, nothing changed), so a caller
// reserves before it changes anything else. erase() shrinks the table when
// it can allocate a smaller one, and keeps it otherwise.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace bloomery::store {

class ExpirySet {
public:
    ExpirySet() = default;
    ExpirySet(const ExpirySet&) = delete;
    ExpirySet& operator=(const ExpirySet&) = delete;

    std::size_t size() const { return count_; }
    // Bytes of the table (what the keyspace counts as its overhead).
    std::size_t bytes() const { return slots() * sizeof(Slot); }
    std::size_t slots() const { return slots_ ? mask_ + 1 : 0; }

    // Room for `more` inserts without allocating.
    void reserve(std::size_t more);
    // `entry` must not be present; room must have been reserved (and no
    // erase() since, which may shrink the table).
    void insert(std::uintptr_t entry, std::int64_t deadline);
    // A new deadline for a present entry; false if it is not present.
    bool set_deadline(std::uintptr_t entry, std::int64_t deadline);
    // True if it was present.
    bool erase(std::uintptr_t entry);
    bool contains(std::uintptr_t entry) const;
    void clear();

    // Visits entries from slot `cursor` on, calling fn(entry, deadline) for up to
    // `max_entries` of them and looking at no more than `max_slots` slots,
    // nor at any slot twice; returns the slot to resume from (wrapping
    // around the table). A
    // sampler, not an iterator: entries moved by erase() meanwhile may be
    // skipped or seen twice.
    template <class Fn>
    std::size_t sample(std::size_t cursor, std::size_t max_entries, std::size_t max_slots,
                       Fn&& fn) const {
        if (!slots_ || count_ == 0) return 0;
        std::size_t i = cursor & mask_;
        const std::size_t slots = std::min(max_slots, mask_ + 1);
        for (std::size_t looked = 0; looked < slots && max_entries > 0; ++looked) {
            if (slots_[i].entry != 0) {
                fn(slots_[i].entry, slots_[i].deadline);
                --max_entries;
            }
            i = (i + 1) & mask_;
        }
        return i;
    }

private:
    struct Slot {
        std::uintptr_t entry = 0;  // 0: free
        std::int64_t deadline = 0;
    };
    std::size_t home(std::uintptr_t entry) const;
    // The slot holding `entry`, or null.
    Slot* find(std::uintptr_t entry) const;
    bool rebuild(std::size_t slots);  // false if it cannot allocate
    std::unique_ptr<Slot[]> slots_;
    std::size_t mask_ = 0;
    std::size_t count_ = 0;
};

}  // namespace bloomery::store
