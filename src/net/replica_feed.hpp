#pragma once
// A replica's feed (proto/replication.md). Once PSYNC is answered, the
// connection's socket belongs to the feed: it sends +CONTINUE, or
// +FULLRESYNC and a snapshot streamed from a thread of its own, then the
// journal's records as they are written; from the replica it reads only
// REPLCONF (ACK), and nothing goes back. The connection keeps the socket and
// lends it to the feed through FeedTransport: it hands the feed every
// command the replica sends and every completed write.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio/buffer.hpp>

#include "bloomery/command/context.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/net/replication.hpp"
#include "bloomery/persist/manager.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::net {

// What a feed needs of the connection it took over: the replica's client
// state, writing bytes and learning they are written, a read kept in flight
// for acknowledgements, running REPLCONF, and closing. The connection
// implements it; every call is made on the connection's thread unless it
// says otherwise.
class FeedTransport {
public:
    virtual ~FeedTransport() = default;

    // The replica as a client: its address, PSYNC's arguments, the offset it
    // acknowledged, its output buffer (CLIENT LIST). Lives as long as the
    // connection.
    virtual command::ClientState& replica() = 0;
    // Keeps the connection, and so its feed, alive while held. Any thread,
    // while the connection is alive.
    virtual std::shared_ptr<void> keep_alive() = 0;
    // Runs `work` on the connection's thread, the connection kept alive until
    // then. Any thread.
    virtual void post(std::function<void()> work) = 0;

    // Whether a write is in flight. send() starts one of all of `bytes`,
    // which stay valid until it completes; the feed's pump() runs then.
    virtual bool sending() const = 0;
    virtual void send(boost::asio::const_buffer bytes) = 0;
    // Keeps a read in flight for the replica's acknowledgements, unless the
    // connection is closing; each command read comes to on_command().
    virtual void keep_reading() = 0;
    // Runs one command the replica sent (REPLCONF), its reply dropped.
    virtual void run_command(command::Args argv) = 0;
    // Closes the connection if `pending` bytes waiting pass `limit` (its soft
    // limit's clock kept in the replica's state), logged and counted as any
    // client's.
    virtual void close_if_over_output_limit(const core::OutputBufferLimit& limit,
                                            std::uint64_t pending) = 0;

    // Closing: set by mark_closing() or by the connection itself (a kill, a
    // protocol error); nothing more is read, and the feed closes the
    // connection (close()) once nothing is being written.
    virtual bool closing() const = 0;
    virtual void mark_closing() = 0;
    virtual void close() = 0;
    // Closes the connection on its own thread. Any thread.
    virtual void request_close() = 0;
};

// What a feed sends from: the replication source it registers with, the
// journal it streams, and the keyspace a full copy is taken of.
struct FeedSources {
    const core::Config& config;
    const core::RuntimeSettings& settings;  // the replica class's output limit
    store::Keyspace& keyspace;
    ReplicationSource& source;
    persist::Manager& persistence;  // its journal (none: nothing to stream)
};

class ReplicaFeed {
public:
    // Takes over `transport`, which owns the feed and outlives it.
    ReplicaFeed(FeedTransport& transport, const FeedSources& sources);
    // Also when the connection goes without closing (its worker stopped at
    // shutdown): the snapshot thread must not outlive what it reads.
    ~ReplicaFeed();
    ReplicaFeed(const ReplicaFeed&) = delete;
    ReplicaFeed& operator=(const ReplicaFeed&) = delete;

    // Answers PSYNC (resume or full copy), registers with the replication
    // source and starts sending. On the connection's thread.
    void start();
    // A command the replica sent: REPLCONF runs (its reply dropped), any
    // other is dropped unrun. On the connection's thread.
    void on_command(command::Args argv);
    // The commands read so far are handed over: answers the WAITs a new
    // acknowledgement satisfies, then pumps.
    void on_input_end();
    // A read is always pending (acknowledgements), and the next piece of the
    // stream is written whenever no write is. Called when a write completes.
    void pump();
    // The connection closed: stops the snapshot, tells the replication
    // source.
    void on_close();
    // Thread-safe: wakes a feed waiting for data (journal written, snapshot
    // piece queued).
    void wake();
    // Thread-safe: closes the feed's connection on its own thread.
    void request_close() { transport_.request_close(); }
    // The replica as a client. Thread-safe (its fields are atomics, or fixed
    // before the feed exists).
    const command::ClientState& replica() const { return replica_; }
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

    // +CONTINUE: the stream resumes where the replica's copy ends.
    void resume(std::uint64_t offset);
    // +FULLRESYNC: a snapshot streamed from a thread of its own first.
    void begin_full_copy();
    // The next piece of the stream into out_ (nothing if none yet).
    void fill();
    // fill()'s step for each phase; true once there is something to send or
    // the feed is closing.
    bool fill_position();
    bool fill_snapshot();
    bool fill_stream();
    persist::Journal* journal() const { return sources_.persistence.journal(); }

    FeedTransport& transport_;
    command::ClientState& replica_;
    const FeedSources sources_;
    Phase phase_ = Phase::stream;
    bool closed_ = false;  // on_close() ran: nothing more is sent
    std::shared_ptr<SnapshotPipe> pipe_;
    std::thread snapshotter_;
    std::string mark_;              // ends the snapshot ($EOF:<mark>)
    bool dropped_command_ = false;  // a command other than REPLCONF came (logged once)
    bool acknowledged_ = false;     // a REPLCONF moved the acknowledged offset
    std::string replid_;
    std::uint64_t offset_ = 0;  // next stream byte to send
    JournalFileReader reader_;
    std::string out_;      // the next piece
    std::string sending_;  // the piece being written
    std::vector<char> chunk_ = std::vector<char>(std::size_t{256} * 1024);
    // Its buffers in used_memory (the queued snapshot is the pipe's).
    core::MemoryCharge charge_{core::MemoryUse::replica_buffers};
    std::atomic<bool> waiting_{false};         // wake() posts a pump
    std::atomic<bool> online_{false};          // online()
    std::atomic<std::uint64_t> floor_{~0ull};  // floor() before online
};

}  // namespace bloomery::net
