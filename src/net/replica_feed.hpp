#pragma once
// A replica's feed (proto/replication.md). Once PSYNC is answered, the
// connection's socket belongs to the feed: it sends +CONTINUE, or
// +FULLRESYNC and a snapshot streamed from a thread of its own, then the
// journal's records as they are written; from the replica it reads only
// REPLCONF (ACK), and nothing goes back. The connection keeps the transport
// and hands every read and write completion to the feed.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/core/memory.hpp"
#include "bloomery/net/replication.hpp"

namespace bloomery::net {

class Connection;

class ReplicaFeed {
public:
    // Takes over `connection`, which owns the feed and outlives it.
    explicit ReplicaFeed(Connection& connection) : conn_(connection) {}
    // Also when the connection goes without close() (its worker stopped at
    // shutdown): the snapshot thread must not outlive what it reads.
    ~ReplicaFeed();
    ReplicaFeed(const ReplicaFeed&) = delete;
    ReplicaFeed& operator=(const ReplicaFeed&) = delete;

    // Answers PSYNC (resume or full copy), registers with the replication
    // source and starts sending. On the connection's thread.
    void start();
    // Bytes read: runs the replica's REPLCONFs (their replies dropped), then
    // pumps.
    void on_input();
    // A read is always pending (acknowledgements), and the next piece of the
    // stream is written whenever no write is.
    void pump();
    // The connection closes: stops the snapshot, tells the replication source.
    void end();
    // Thread-safe: wakes a feed waiting for data (journal written, snapshot
    // piece queued).
    void wake();
    // Past the snapshot: WAIT counts its acknowledgements. Thread-safe.
    bool online() const { return online_.load(std::memory_order_relaxed); }
    // The oldest stream offset it may still ask for (kept on disk for it).
    // Thread-safe.
    std::uint64_t floor() const;
    // Bytes of the stream the replica has still to receive: its output
    // buffer as Redis counts a replica's (the writes since the point it has
    // reached, kept by the journal here, and the piece being written). 0
    // until its snapshot's position is known. On the connection's thread.
    std::uint64_t pending_bytes() const;
    // Publishes pending_bytes() (CLIENT LIST) and closes the feed past the
    // replica class's client-output-buffer-limit (a hard limit below
    // --repl-backlog-size counts as that size, as Redis's). On the
    // connection's thread.
    void check_output_limit();

private:
    enum class Phase { awaiting_position, snapshot, stream };

    // The next piece of the stream into out_ (nothing if none yet).
    void fill();

    Connection& conn_;
    Phase phase_ = Phase::stream;
    std::shared_ptr<SnapshotPipe> pipe_;
    std::thread snapshotter_;
    std::string mark_;              // ends the snapshot ($EOF:<mark>)
    bool dropped_command_ = false;  // a command other than REPLCONF came (logged once)
    std::string replid_;
    std::uint64_t offset_ = 0;  // next stream byte to send
    JournalFileReader reader_;
    std::string out_;      // the next piece
    std::string sending_;  // the piece being written
    std::vector<char> chunk_ = std::vector<char>(256 * 1024);
    // Its buffers in used_memory (the queued snapshot is the pipe's).
    core::MemoryCharge charge_{core::MemoryUse::replica_buffers};
    std::atomic<bool> waiting_{false};         // wake() posts a pump
    std::atomic<bool> online_{false};          // online()
    std::atomic<std::uint64_t> floor_{~0ull};  // floor() before online
};

}  // namespace bloomery::net
