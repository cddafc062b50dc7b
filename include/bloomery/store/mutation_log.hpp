#pragma once
// What the keyspace tells a journal (persist/journal.hpp) about its changes.
// Each call is made while the change takes effect, under the lock of every
// shard it touches, so the order of the calls for one key is the order in
// which the changes happened, and a KeyspaceView's position() (taken with
// every shard locked) splits the calls into those it holds and those after.
//
// Adds to a filter are told by the filter itself (bloom::AddLog), by id,
// before their bits are set.

#include <cstdint>
#include <string_view>

#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::store {

class MutationLog {
public:
    virtual ~MutationLog() = default;
    // A new filter was linked under `key` (BF.RESERVE, BF.INSERT, BF.ADD
    // creating it, BF.LOADCHUNK's header); it holds no item yet beyond the
    // counts its layers were created with.
    virtual void created(std::string_view key, const bloom::ScalableFilter& filter,
                         std::int64_t expire_at_ms) = 0;
    virtual void deleted(std::string_view key) = 0;
    virtual void renamed(std::string_view from, std::string_view to) = 0;
    // The key's deadline is now `expire_at_ms` (0: none).
    virtual void expiry_set(std::string_view key, std::int64_t expire_at_ms) = 0;
    virtual void cleared() = 0;
    // The journal's identity and the offset just past its last record
    // (every record of a call made before this one included).
    virtual std::uint64_t log_id() const = 0;
    virtual std::uint64_t position() = 0;
};

}  // namespace bloomery::store
