#pragma once
// The store's clocks: the wall clock every deadline is measured against
// (now_ms()), and the access clock that stamps each use of a key
// (key_access.hpp: OBJECT IDLETIME, OBJECT FREQ's decay).
//
// Both follow the system clock unless a ManualClock exists: then they stand
// where it puts them, so a test moves past a deadline or an idle time
// instead of sleeping. The clock is the process's, not one keyspace's:
// every layer that compares with a deadline (a command computing a TTL, the
// snapshot loader dropping expired keys, the keyspace itself) reads
// now_ms() and must see the same time.
//
// Cost: now_ms() loads one word that only a ManualClock writes before it
// reads the system clock; lookups read the access clock, a word the
// server's cron moves once a second, and never the system clock.
//
// Thread safety: every function may be called from any thread.

#include <chrono>
#include <cstdint>

namespace bloomery::store {

// Milliseconds since the Unix epoch (wall clock), the unit of every deadline.
std::int64_t now_ms();

// The access clock: unix seconds, as of the last tick_access_clock(). A
// lookup writes a key's word only when the clock moved on since its last
// use or its counter goes up (rarely, once it is past a few uses).
std::uint32_t access_clock();
// Moves the access clock to now_ms(); the server's cron calls it every
// 100 ms.
void tick_access_clock();

// For tests against a running server (DEBUG JUMP-CLOCK, only with
// enable-debug-command): moves both clocks forward by `ms` from then on,
// with the system clock still running under them. The offset only grows.
void jump_clock(std::int64_t ms);
std::int64_t clock_jumped_ms();

// For tests: stops both clocks at `start_ms` until destroyed, then gives
// them back to the system clock. set() and advance() move both clocks (the
// access clock to the whole second, as a tick would). One at a time per
// process; never in the server.
class ManualClock {
public:
    explicit ManualClock(std::int64_t start_ms = now_ms());
    ~ManualClock();
    ManualClock(const ManualClock&) = delete;
    ManualClock& operator=(const ManualClock&) = delete;

    std::int64_t now() const;
    void set(std::int64_t ms);
    void advance(std::chrono::milliseconds by);
};

}  // namespace bloomery::store
