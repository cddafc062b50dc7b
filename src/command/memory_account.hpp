#pragma once
// The server's memory by its own account (core/memory.hpp) as INFO memory
// and MEMORY STATS / DOCTOR report it, and the arithmetic of their ratios.

#include <algorithm>
#include <cstdint>

#include "bloomery/core/allocator.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/persist/status.hpp"

namespace bloomery::command {

struct MemoryAccount {
    std::uint64_t used = 0;     // used_memory: all that is accounted
    std::uint64_t peak = 0;     // the most `used` has been, at least `used`
    std::uint64_t startup = 0;  // what the server held once started, at most `used`
    std::uint64_t filters = 0;
    std::uint64_t keyspace = 0;         // key entries and tables
    std::uint64_t client_buffers = 0;   // clients' query and output buffers
    std::uint64_t replica_buffers = 0;  // replicas' feeds
    std::uint64_t journal_buffer = 0;   // the journal's bytes not yet written
    std::uint64_t rss = 0;              // the process's resident memory
    core::AllocatorStats allocator;
};

inline MemoryAccount memory_account(const persist::PersistenceInfo& persistence) {
    using core::MemoryUse;
    MemoryAccount m;
    m.used = core::memory_used_total();
    m.peak = std::max(core::memory_peak(), m.used);
    m.startup = std::min(core::memory_startup(), m.used);
    m.filters = core::memory_used(MemoryUse::filters);
    m.keyspace = core::memory_used(MemoryUse::keyspace);
    m.client_buffers =
        core::memory_used(MemoryUse::query_buffers) + core::memory_used(MemoryUse::output_buffers);
    m.replica_buffers = core::memory_used(MemoryUse::replica_buffers);
    m.journal_buffer = persistence.journal.enabled ? persistence.journal.buffer_length : 0;
    m.rss = core::resident_bytes();
    m.allocator = core::allocator_stats();
    return m;
}

// part / whole, 0 for an empty whole.
inline double share(std::uint64_t part, std::uint64_t whole) {
    return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

// a - b, negative when b is larger.
inline std::int64_t difference(std::uint64_t a, std::uint64_t b) {
    return static_cast<std::int64_t>(a) - static_cast<std::int64_t>(b);
}

}  // namespace bloomery::command
