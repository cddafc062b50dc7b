#pragma once
// Process-wide accounting of the bytes the server holds, by what holds them.
// INFO memory's used_memory is their sum, and --maxmemory is checked against
// it. Every holder reports its own allocations and frees (a filter when it is
// created, grown or destroyed; a connection when a buffer's capacity changes),
// so the sum is what is really held, not an estimate from outside.
//
// Thread safety: all functions may be called from any thread. Each use has its
// own cache line and is updated with one relaxed atomic add; holders update
// only when an allocation changes size, never per command. The peak is
// taken by every growth of kPeakNotedAtOnce bytes or more, by each
// reservation against a limit, and otherwise sampled as Redis samples
// used_memory_peak: by the server's cron and by every reading of it.

#include <cstdint>

namespace bloomery::core {

enum class MemoryUse : unsigned {
    filters,          // filter objects and their bit arrays, at their allocated size
    keyspace,         // key entries and hash tables
    query_buffers,    // client input buffers (capacity)
    output_buffers,   // client reply buffers (capacity)
    other,            // anything else worth counting (snapshot buffers, ...)
    replica_buffers,  // replicas' feeds: the stream piece being sent, a snapshot queued
};
inline constexpr unsigned kMemoryUses = 6;
// Growths this large update the peak at once (see above).
inline constexpr std::int64_t kPeakNotedAtOnce = 64 * 1024;

// Adds `delta` bytes (negative when freed) to `use`.
void memory_add(MemoryUse use, std::int64_t delta);
// Bytes held for `use` now (never negative).
std::uint64_t memory_used(MemoryUse use);
// The sum over every use: used_memory.
std::uint64_t memory_used_total();
// The largest sum seen since start (used_memory_peak), the sum now included.
std::uint64_t memory_peak();
// Takes the sum now into the peak (the server's cron, every 100 ms).
void memory_note_peak();
// MEMORY STATS's startup.allocated: the sum when the server had set itself
// up, before loading data (memory_mark_startup(), called once by main).
void memory_mark_startup();
std::uint64_t memory_startup();

// The process's resident set (RSS) in bytes, from /proc/self/statm: what
// used_memory_rss reports. A file read: not for hot paths.
std::uint64_t resident_bytes();

// True if `limit` is set (non-zero) and holding `extra` more bytes would put
// the total above it. With extra = 0 this is Redis's "used > maxmemory" check.
bool memory_would_exceed(std::uint64_t limit, std::uint64_t extra = 0);

// Adds `bytes` to `use` unless that would put the total above `limit` (0: no
// limit); true if it did. Atomic against other callers: concurrent
// reservations never together pass the limit (one may be refused that a
// moment later would have fitted). For reserving before allocating.
bool memory_try_add(MemoryUse use, std::uint64_t bytes, std::uint64_t limit);

// Keeps a holder's reported size in step with its allocation: set(n) reports
// the difference to the last size, and the destructor reports the release.
class MemoryCharge {
public:
    explicit MemoryCharge(MemoryUse use, std::uint64_t bytes = 0) : use_(use) { set(bytes); }
    ~MemoryCharge() { set(0); }
    MemoryCharge(const MemoryCharge&) = delete;
    MemoryCharge& operator=(const MemoryCharge&) = delete;

    void set(std::uint64_t bytes) {
        if (bytes != bytes_) {
            memory_add(use_, static_cast<std::int64_t>(bytes) - static_cast<std::int64_t>(bytes_));
            bytes_ = bytes;
        }
    }
    std::uint64_t bytes() const { return bytes_; }

private:
    MemoryUse use_;
    std::uint64_t bytes_ = 0;
};

}  // namespace bloomery::core
