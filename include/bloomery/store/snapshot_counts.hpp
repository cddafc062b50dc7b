#pragma once
// Item counts as they were at a snapshot's cut.
//
// A snapshot names the journal offset it covers (its cut) and copies filters
// while clients keep adding; replaying the records after the cut must give
// back exactly the live filters. Bits are no problem (they only go 0 -> 1,
// and setting one twice changes nothing), but a layer's item count must be
// the count of the adds recorded before the cut, not of whatever was added
// by the time the writer reached the filter. Reading every count at the cut
// would stall writes for O(keys); instead each filter is copied on first
// change: the first add to count into a filter after a cut saves the
// filter's counts for that snapshot before changing them, and the snapshot
// reads the saved counts, or the live ones of a filter nobody changed since.
//
// A cut is a number (an epoch); each filter carries the epoch of the last cut
// it has accounted for (ScalableFilter::count_stamp(), 16 bits compared
// modulo 2^16). Snapshots end within seconds and each settles every filter
// it holds, so no stamp falls anywhere near 2^15 cuts behind.
//
// Cost: an add compares its filter's stamp with the newest epoch (both
// read-mostly) once per batch; the first change per filter after a cut
// takes a mutex and saves 8 bytes per layer for each running snapshot.
//
// Counting filters' cells are no bits: a counter incremented after the cut
// and again by replay would count twice. So for a counting filter the first
// change after a cut (or the snapshot reaching it first) saves a copy of
// the whole filter (ScalableFilter::copy_of), and the snapshot writes that
// copy: a snapshot taken while counting filters change holds, at most, one
// more copy of each of them (counted in used_memory as filters), as a
// forked Redis's copy-on-write pages do.
//
// Expiring filters (bloom/age_filter.hpp) are saved the same way, their
// generation, the time of their last shift and the count of each live
// generation: a shift clears a slice, but replaying the records after the
// cut from that generation gives back the live bits whatever moment the
// snapshot copied the words at (proto/journal.md, "Expiring filters").
//
// Thread safety: every member may be called from any thread.

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::store {

class SnapshotCounts {
public:
    class Session;

    SnapshotCounts() = default;
    SnapshotCounts(const SnapshotCounts&) = delete;
    SnapshotCounts& operator=(const SnapshotCounts&) = delete;

    // Starts a session at a cut: called while no count can change (the
    // journal's cut(), every shard locked). The session lasts as long as the
    // returned object.
    std::shared_ptr<Session> begin();

    // The stamp a filter linked now starts with (under its shard's lock):
    // nothing before the newest cut is owed by it.
    std::uint16_t current_stamp() const;

    // Called before the first change this batch makes to `filter`'s counts
    // (or a counting filter's cells), inside a data scope (MutationLog).
    // Saves its counts (and a counting filter's copy) for every running
    // session that needs them; false (nothing changed) if that could not be
    // allocated.
    bool before_count_change(const bloom::ScalableFilter& filter) noexcept;
    // The same before an expiring filter's add or shift.
    bool before_count_change(const bloom::AgeFilter& filter) noexcept;

    class Session {
    public:
        ~Session();
        // The per-layer item counts `filter` (in the snapshot's view) had at
        // the cut (layers created after it count 0), and for a counting
        // filter its copy as it was then. Each filter is asked once.
        // An expiring filter's: `counts` holds generation − i's for
        // i < slices, and its generation and last shift are set.
        struct AtCut {
            std::vector<std::uint64_t> counts;
            bloom::FilterRef copy;  // counting filters only
            std::uint64_t generation = 0;
            std::uint64_t shifted_ms = 0;
        };
        AtCut at_cut(const bloom::ScalableFilter& filter);
        AtCut at_cut(const bloom::AgeFilter& filter);
        // Ends the session: later changes save nothing for it.
        void end();
        // After end(): brings `filter`'s stamp to the newest cut (saving its
        // counts for the other running sessions that need them), so no stamp
        // falls behind while a snapshot that stopped early never read it.
        void settle(const bloom::ScalableFilter& filter);
        void settle(const bloom::AgeFilter& filter);

    private:
        friend class SnapshotCounts;
        template <class Filter>
        AtCut take(const Filter& filter);
        template <class Filter>
        void settle_one(const Filter& filter);
        Session(SnapshotCounts& owner, std::uint32_t epoch) : owner_(owner), epoch_(epoch) {}
        void end_locked();  // under owner_.mutex_
        SnapshotCounts& owner_;
        const std::uint32_t epoch_;
        // Saved on first change, under owner_.mutex_.
        std::unordered_map<const void*, AtCut> saved_;
        std::uint64_t saved_bytes_ = 0;  // counted in core/memory.hpp (other)
        bool ended_ = false;
    };

private:
    // Whether stamp `a` is after stamp `b` (modulo 2^16).
    static bool after(std::uint16_t a, std::uint16_t b) {
        return static_cast<std::int16_t>(static_cast<std::uint16_t>(a - b)) > 0;
    }
    static std::vector<std::uint64_t> live_counts(const bloom::ScalableFilter& filter);
    // live_counts, and a counting filter's copy. Throws std::bad_alloc.
    static Session::AtCut live_state(const bloom::ScalableFilter& filter);
    static Session::AtCut live_state(const bloom::AgeFilter& filter);
    // Under mutex_: if `filter`'s stamp is behind the newest cut, saves its
    // (unchanged since) counts for every running session after the stamp,
    // then stamps it with the newest cut. The only way a stamp moves
    // forward, so a running session never misses a filter's counts. Throws
    // std::bad_alloc (the stamp then stays).
    template <class Filter>
    void save_locked(const Filter& filter);
    template <class Filter>
    bool before_change(const Filter& filter) noexcept;

    mutable std::mutex mutex_;
    std::atomic<std::uint32_t> newest_{0};
    std::vector<Session*> sessions_;  // under mutex_
};

}  // namespace bloomery::store
