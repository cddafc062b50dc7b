#pragma once
// What the command layer sees of the journal (command/server.hpp's
// Persistence::journal()): whether it refuses writes now, and why. Journal
// implements it; commands reach nothing else of it.

#include <atomic>
#include <string>

namespace bloomery::persist {

class JournalHealth {
public:
    virtual ~JournalHealth() = default;

    // Writes are refused while this is true (-MISCONF): the last write or
    // fdatasync failed, or more than the journal's buffer limit waits to be
    // written. Lock-free, and not a virtual call: it is asked before every
    // write command. Any thread.
    bool failing() const { return failing_.load(std::memory_order_relaxed); }
    // Why failing() is true, for the error reply ("" when it is not). Any
    // thread.
    virtual std::string failure() const = 0;

protected:
    JournalHealth() = default;
    // The flag failing() reads; the journal sets it as its state changes.
    std::atomic<bool>& failing_flag() { return failing_; }

private:
    std::atomic<bool> failing_{false};
};

}  // namespace bloomery::persist
