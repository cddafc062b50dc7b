#pragma once
// What the keyspace (keyspace.hpp) hands out about its keys: a copy of one
// entry, its details for OBJECT and MEMORY USAGE, and a consistent copy of
// every key for snapshots.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/store/snapshot_counts.hpp"
#include "bloomery/store/value_ref.hpp"

namespace bloomery::store {

using bloom::FilterRef;

// One key as seen by SCAN, KEYS or get(): a copy of its entry.
struct KeySnapshot {
    std::string key;
    ValueRef value;
    std::int64_t expire_at_ms;
};

// One key as OBJECT and MEMORY USAGE see it (Keyspace::inspect).
struct KeyDetails {
    ValueRef value;
    std::int64_t expire_at_ms = 0;
    std::uint32_t accessed = 0;     // how it is used (key_access.hpp)
    std::uint64_t entry_bytes = 0;  // its node (with the key) and its table slot
    long references = 0;            // holders of its filter (the key, snapshots, ...)
};

// A consistent copy of every live key (for snapshots): taken with every
// shard's lock held at once, so a key renamed, deleted, re-created or expired
// while it was taken appears exactly as it was at one instant. Holds a
// reference to each filter, not a copy of its bits.
class KeyspaceView {
public:
    struct Entry {
        std::uint64_t key_offset;
        std::uint32_t key_size;
        std::int64_t expire_at_ms;
        ValueRef value;
    };
    std::size_t size() const { return entries_.size(); }
    // The journal attached when the view was taken (0, 0 without one): its
    // id, and the offset that splits its records into those this view holds
    // (before it) and those that came after.
    std::uint64_t log_id() const { return log_id_; }
    std::uint64_t log_position() const { return log_position_; }
    std::string_view key(std::size_t i) const {
        return std::string_view(keys_).substr(entries_[i].key_offset, entries_[i].key_size);
    }
    const Entry& entry(std::size_t i) const { return entries_[i]; }
    // For a Bloom filter entry: the per-layer item counts entry i's filter
    // had at the view's position (with a journal: exactly those of the adds
    // recorded before it, however many were added since; without one: the
    // counts now), and for a counting filter a copy of it as it was then, to
    // write instead of the live one. Asked once per entry, in any order;
    // layers created since count 0. Throws std::bad_alloc. (A Cuckoo filter
    // is written as it is when the writer reaches it, with the number of its
    // last change: cuckoo_object.hpp.)
    using AtCut = SnapshotCounts::Session::AtCut;
    AtCut at_cut(std::size_t i) const;
    std::vector<std::uint64_t> item_counts(std::size_t i) const { return at_cut(i).counts; }

    KeyspaceView() = default;
    KeyspaceView(KeyspaceView&&) = default;
    KeyspaceView& operator=(KeyspaceView&&) = default;
    // Entries whose counts were never asked for are settled with the counts
    // session (a snapshot that stopped early).
    ~KeyspaceView();

private:
    friend class Keyspace;
    std::string keys_;  // every key, back to back
    std::vector<Entry> entries_;
    std::uint64_t log_id_ = 0;
    std::uint64_t log_position_ = 0;
    std::shared_ptr<SnapshotCounts::Session> counts_;  // with a journal
    mutable std::vector<bool> counted_;                // item_counts asked, per entry
};

}  // namespace bloomery::store
