#pragma once
// What the process's memory allocator reports, for INFO memory, and a way to
// hand freed memory back to the kernel at once. The server binary links
// jemalloc (chosen for fragmentation and for returning memory: see README,
// "Memory"); sanitizer builds and the unit tests run on the C library's
// allocator. Both are detected at run time, so this module needs neither.
//
// Thread safety: all functions may be called from any thread.

#include <cstdint>
#include <string>

namespace bloomery::core {

// "jemalloc-5.3.0" or "libc", as Redis's mem_allocator.
std::string allocator_name();

struct AllocatorStats {
    std::uint64_t allocated = 0;  // bytes handed out to the program
    std::uint64_t active = 0;     // bytes in pages holding them (allocated + fragmentation)
    std::uint64_t resident = 0;   // bytes of the allocator's memory that are resident
};
// Fresh figures (jemalloc refreshes its statistics epoch first).
AllocatorStats allocator_stats();

// The allocator's own statistics report (jemalloc's malloc_stats_print, as
// MEMORY MALLOC-STATS shows it); empty when the allocator has none.
std::string allocator_stats_text();

// Returns free pages to the kernel now instead of after the allocator's decay
// time; called after large frees (FLUSHALL, DEL of many keys). A few ms.
void allocator_release_free_memory();

// Configures the allocator once at start (jemalloc: background purging
// thread, so memory freed by a burst of deletes goes back to the kernel
// within seconds even if no further allocation happens).
void allocator_configure();

}  // namespace bloomery::core
