#pragma once
// A connection's replica feed state (connection_feed.cpp): after PSYNC the
// connection sends the replica a snapshot or resumes, then the journal's
// records as they are written, and reads only its REPLCONF ACKs.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/core/memory.hpp"
#include "bloomery/net/replication.hpp"
#include "connection.hpp"

namespace bloomery::net {

struct Connection::Feed {
    enum class Phase { awaiting_position, snapshot, stream };
    Phase phase = Phase::stream;
    std::shared_ptr<SnapshotPipe> pipe;
    std::thread snapshotter;
    std::string mark;              // ends the snapshot ($EOF:<mark>)
    bool dropped_command = false;  // a command other than REPLCONF came (logged once)
    std::string replid;
    std::uint64_t offset = 0;  // next stream byte to send
    JournalFileReader reader;
    std::string out;      // the next piece
    std::string sending;  // the piece being written
    std::vector<char> chunk = std::vector<char>(256 * 1024);
    // Its buffers in used_memory (the queued snapshot is the pipe's).
    core::MemoryCharge charge{core::MemoryUse::output_buffers};

    // Also when the connection goes without close() (its worker stopped at
    // shutdown): the snapshot thread must not outlive what it reads.
    ~Feed() {
        if (pipe) pipe->cancel();
        if (!snapshotter.joinable()) return;
        // The snapshot thread itself may drop the last reference (its wake
        // call holds one for a moment): it is ending, let it end alone.
        if (snapshotter.get_id() == std::this_thread::get_id()) {
            snapshotter.detach();
        } else {
            snapshotter.join();
        }
    }
};

}  // namespace bloomery::net
