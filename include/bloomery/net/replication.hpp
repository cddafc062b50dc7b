#pragma once
// Replication (proto/replication.md; README "Replication").
//
// Primary side: a replica connects like a client, says REPLCONF
// listening-port, then PSYNC. Its connection becomes a feed
// (src/net/replica_feed.hpp): +FULLRESYNC and the snapshot streamed from the
// keyspace (no file on this server's disk), or +CONTINUE, then the journal's
// records as the journal's writer puts them in its segment files, read back
// from those files. The files are the backlog: a replica cut off resumes from
// its offset while the segments holding it are kept (ReplicationSource keeps
// them for connected replicas, and for those gone less than
// --repl-backlog-ttl, up to --repl-backlog-size). Replicas acknowledge
// (REPLCONF ACK offset); WAIT counts those acknowledgements.
//
// Replica side: ReplicaLink, one thread of its own, connects, synchronizes
// and applies the stream (persist::StreamApplier) as the replica's only
// writer; clients' writes answer -READONLY.
//
// Replication ids are random per run of a primary (and new at promotion), so
// a replica resumes only from the same run of its primary; offsets are byte
// positions in that primary's journal.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio.hpp>

#include "bloomery/command/server.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/core/result.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/persist/journal_reader.hpp"
#include "bloomery/persist/manager.hpp"
#include "bloomery/store/keyspace.hpp"

namespace boost::asio::ssl {
class context;
}

namespace bloomery::net {

class LinkStream;
class ReplicaFeed;

// A fresh replication id: 40 random hex digits, as Redis's.
std::string new_replication_id();

// Reads the journal's stream back from its segment files, for one feed.
class JournalFileReader {
public:
    JournalFileReader() = default;
    ~JournalFileReader();
    JournalFileReader(const JournalFileReader&) = delete;
    JournalFileReader& operator=(const JournalFileReader&) = delete;
    // Up to `max` bytes of the stream from `offset` (below journal.written())
    // into `out`: how many (0: none yet), or -1 when they are no longer on
    // disk (the segment was dropped: the replica must resynchronize fully).
    std::int64_t read(persist::Journal& journal, std::uint64_t offset, char* out, std::size_t max);

private:
    bool open_for(persist::Journal& journal, std::uint64_t offset);
    int fd_ = -1;
    std::uint64_t start_ = 0;    // stream offset of the open segment's first byte
    std::uint64_t end_ = ~0ull;  // where the next segment starts (unknown: max)
};

// A snapshot on its way from a thread that writes it to a feed that sends
// it: a bounded queue of chunks (the thread waits while the replica is slow,
// so a snapshot costs this server a few MiB however large).
class SnapshotPipe {
public:
    static constexpr std::size_t kMaxQueuedBytes = 8 * 1024 * 1024;
    explicit SnapshotPipe(std::function<void()> wake) : wake_(std::move(wake)) {}
    ~SnapshotPipe();  // gives back what is still queued (used_memory)
    SnapshotPipe(const SnapshotPipe&) = delete;
    SnapshotPipe& operator=(const SnapshotPipe&) = delete;
    // Producer. False once the consumer cancelled.
    bool push(const unsigned char* data, std::size_t size);
    void set_position(std::uint64_t offset);
    // The snapshot is complete, or failed and why.
    void finish(core::Status outcome);
    // Consumer (the feed's thread). Takes what is queued (empty if none).
    std::string take();
    // The stream offset the snapshot stands at, once the producer set it.
    std::optional<std::uint64_t> position() const;
    // How the snapshot ended, once it is finished and everything queued was
    // taken; nothing before.
    std::optional<core::Status> outcome() const;
    void cancel();

private:
    mutable std::mutex mutex_;
    std::condition_variable room_;
    std::deque<std::string> chunks_;
    std::size_t queued_ = 0;
    std::optional<std::uint64_t> position_;
    std::optional<core::Status> outcome_;  // set by finish()
    bool cancelled_ = false;
    std::function<void()> wake_;
};

// The primary side: replicas' feeds, WAIT, the backlog kept on disk,
// keepalives. Thread-safe.
class ReplicationSource {
public:
    ReplicationSource(const core::Config& config, persist::Manager& persistence);
    ~ReplicationSource();

    // A history this server's data continues: a primary's replication id
    // and the offset of its stream reached (the data is that primary's as
    // it was there), and where this server's own stream stood at that point.
    struct History {
        std::string replid;
        std::uint64_t offset = 0;
        std::uint64_t own_offset = 0;
    };

    std::string replid() const;
    // A new id (promotion, or a primary that becomes a replica). A promoted
    // replica passes the history it held (`previous`, its second id): a
    // replica of the same old primary that stands exactly where it stood,
    // or that old primary itself, resumes from `previous.own_offset`.
    void renew_replid(std::optional<History> previous = std::nullopt);

    // PSYNC: where this server's stream continues `replid`/`offset` (its
    // own id and an offset still on disk, or the second id at exactly its
    // offset), or nothing: a full copy. Counted in INFO's sync_partial_ok /
    // _err and sync_full.
    std::optional<std::uint64_t> can_continue(const std::string& replid, std::int64_t offset);
    // Whether another server may hold this server's history: a replica
    // copied it, or it continues one (a promoted replica). Only then does
    // this server, becoming a replica, ask its new primary to continue it.
    bool history_shared() const;
    void count_full_sync();

    // Feeds register when they start and are forgotten when they close.
    void add_feed(const std::shared_ptr<ReplicaFeed>& feed);
    void remove_feed(const ReplicaFeed* feed, std::uint64_t acked_offset);
    // Every feed closes (this server becomes a replica).
    void close_feeds();
    // The journal's writer wrote up to `written`: wakes feeds that wait.
    void on_written(std::uint64_t written);
    // A replica acknowledged: answers the WAITs it satisfies.
    void on_ack();
    void wait(std::int64_t count, std::int64_t timeout_ms, std::function<void(std::int64_t)> done,
              boost::asio::io_context& timers);
    // Every 100 ms, on the server's cron thread only: keepalives, the
    // backlog floor, WAIT timeouts.
    void cron();
    // Primary-side fields of INFO replication.
    void fill_info(command::ReplicationInfo& info);
    // Replicas connected now, and how many of them have not acknowledged
    // `offset` yet (one still receiving its snapshot has not): a shutdown
    // waits for them.
    std::size_t replica_count();
    // Replicas online whose last acknowledgement is at most `max_lag_seconds`
    // old (whole seconds, as Redis's lag): min-replicas-to-write's count.
    std::int64_t good_replicas(std::int64_t max_lag_seconds);
    std::size_t replicas_behind(std::uint64_t offset);

private:
    struct Waiter {
        std::uint64_t target;
        std::int64_t count;
        std::int64_t deadline_ms;  // 0: none
        std::function<void(std::int64_t)> done;
    };
    struct Departed {
        std::uint64_t offset;
        std::int64_t when_ms;
    };
    std::vector<std::shared_ptr<ReplicaFeed>> live_feeds();
    std::int64_t acked_at_least(std::uint64_t target);
    // Answers the WAITs their replicas satisfied or whose time is up.
    void answer_waiters();
    // The oldest offset replicas may ask for, told to the persistence
    // manager (any thread).
    void update_floor();

    const core::Config& config_;
    persist::Manager& persistence_;
    mutable std::mutex mutex_;
    std::string replid_;
    std::optional<History> previous_;  // INFO's master_replid2
    bool shared_ = false;              // history_shared()
    std::vector<std::weak_ptr<ReplicaFeed>> feeds_;
    std::vector<Departed> departed_;
    std::vector<Waiter> waiters_;
    std::int64_t last_ping_ms_ = 0;  // cron thread only
    std::atomic<std::uint64_t> full_syncs_{0};
    std::atomic<std::uint64_t> partial_ok_{0};
    std::atomic<std::uint64_t> partial_err_{0};
};

// The file a replica receives its primary's snapshot into, in --dir.
std::string sync_file_path(const std::string& dir);
// Removes every replica-sync-*.tmp in `dir` but `keep`: files of a replica
// that was killed during a full synchronization are never finished, and one
// each could fill the disk. A data directory serves one server, so none of
// them can be another live process's. Returns how many were removed.
std::size_t remove_stale_sync_files(const std::string& dir, const std::string& keep = {});

// What a primary sends its replica, from the answers to the handshake to the
// stream, decoded without I/O (proto/replication.md): ReplicaLink feeds it
// what it reads and acts on what next() says, and a fuzz target
// (tests/fuzz/replica_stream_fuzz.cpp) feeds it arbitrary bytes. Every line
// is checked before anything in it is used (ids, offsets, the snapshot's
// mark); one the protocol does not allow ends the session with a reason
// worth showing in INFO's master_link_last_error, never an exception.
class PrimaryStreamDecoder {
public:
    // Longest line taken from a primary (a handshake answer, the snapshot's
    // header); Redis's PROTO_INLINE_MAX_SIZE.
    static constexpr std::size_t kMaxLineBytes = 64 * 1024;

    enum class Event {
        need_more,      // nothing to act on until more bytes are appended
        auth_ok,        // +OK to AUTH: send REPLCONF
        replconf_ok,    // +OK to REPLCONF: send PSYNC
        resume,         // +CONTINUE: the stream follows from the replica's own offset;
                        // replid() is the primary's id (it may have changed)
        full_sync,      // +FULLRESYNC: replid() and offset() name the copy; the snapshot follows
        snapshot_data,  // data(): the next bytes of the snapshot
        snapshot_end,   // the snapshot is complete; the stream follows from offset()
        stream,         // data(): stream bytes not consumed yet (whole records, the last one
                        // maybe cut); call consume() with what was applied
        failed,         // error(): why the session must end; every later next() says failed
    };

    // Whether the replica sends AUTH before REPLCONF (--masterauth is set).
    enum class Handshake { replconf_first, auth_first };
    // What the replica's PSYNC asks for: a full copy (? -1), or to resume
    // from the replication id and offset of the copy it holds.
    enum class SyncRequest { full_copy, resume };

    // A new session, beginning with `handshake` and asking for `request`.
    void start(Handshake handshake, SyncRequest request);
    bool resuming() const { return request_ == SyncRequest::resume; }
    void append(std::string_view bytes);
    Event next();
    // snapshot_data and stream: valid until the next call of any member.
    std::string_view data() const { return data_; }
    // stream: the first `bytes` of data() were applied.
    void consume(std::size_t bytes);
    const std::string& replid() const { return replid_; }
    std::uint64_t offset() const { return offset_; }
    // resume: where the stream continues when the primary named it (its
    // second id: not the offset asked for); nothing: the offset asked for.
    const std::optional<std::uint64_t>& resume_offset() const { return resume_offset_; }
    const std::string& error() const { return error_; }
    // Bytes received and not consumed (the stream's cut record).
    std::size_t buffered() const { return input_.size(); }
    std::size_t capacity() const { return input_.capacity(); }

private:
    enum class Phase { auth, replconf, psync, snapshot_header, snapshot, stream, failed };
    // The next line without its CRLF; false if none is complete (or the
    // line is too long: then the decoder has failed).
    bool take_line(std::string& line);
    Event on_line(const std::string& line);
    Event on_psync_answer(const std::string& line);
    Event snapshot_bytes();
    Event fail(std::string why);

    Phase phase_ = Phase::failed;
    SyncRequest request_ = SyncRequest::full_copy;
    std::string input_;       // received, not consumed
    std::size_t handed_ = 0;  // snapshot bytes handed out by the last next()
    std::size_t seen_ = 0;    // stream bytes handed out already
    std::string_view data_;
    std::string mark_;  // ends the snapshot
    std::string replid_;
    std::uint64_t offset_ = 0;
    std::optional<std::uint64_t> resume_offset_;
    std::string error_;
};

class SyncFile;  // replication.cpp: the file a full copy is received into

// The replica side: the link to the primary, on a thread of its own. A
// chain of asynchronous steps (connect, AUTH, REPLCONF, PSYNC, the snapshot,
// the stream) rather than a coroutine: Boost 1.74's coroutines do not build
// with clang 14 (the fuzz build), and GCC 12 miscompiled temporaries in them.
// What the primary sends is decoded by a PrimaryStreamDecoder. Each step
// carries the number of the session it belongs to; a step of a session that
// failed meanwhile does nothing.
class ReplicaLink {
public:
    // A link to HOST:PORT; start() connects (and reconnects until stop()).
    // With `tls_context` (net/tls.hpp: make_tls_client_context; it must
    // outlive the link) the link is TLS: the primary's certificate chain is
    // verified before anything is sent, and a handshake that fails is a
    // failed session like any other (logged, retried a second later).
    // `before_start` runs on the link's own thread before it first connects:
    // it stops the link this one replaces (REPLICAOF to another primary), so
    // that the two never apply at once and whoever replaces a link never
    // waits for it (its stop can take as long as a snapshot load). It says
    // which history the data here continues, if one: the first PSYNC asks
    // to resume it (a new primary promoted from the same history can
    // continue it), else for a full copy.
    using Resumable = std::optional<ReplicationSource::History>;
    ReplicaLink(const core::Config& config, store::Keyspace& keyspace,
                persist::Manager& persistence, command::ReplicaGate& gate, std::string host,
                std::uint16_t port, boost::asio::ssl::context* tls_context,
                std::function<Resumable()> before_start = {});
    ~ReplicaLink();
    ReplicaLink(const ReplicaLink&) = delete;
    ReplicaLink& operator=(const ReplicaLink&) = delete;

    // Sets the replica's flags (writes refused, data unsynchronized) and
    // starts the thread.
    void start();
    // Closes the link and joins its thread (after `before_start`, if it
    // had not ended yet); what was applied stays. The replication flags are
    // the owner's to change.
    void stop();
    // From now on the link clears no replication flag (it is being
    // replaced: whatever it synchronizes is not the new primary's copy).
    // Thread-safe; the owner sets the flags its successor needs after this.
    void retire();
    const std::string& host() const { return host_; }
    std::uint16_t port() const { return port_; }
    void fill_info(command::ReplicationInfo& info) const;
    // Once stopped: the primary's history the data here is a copy of (its
    // id and the offset after the last change applied), if the link held a
    // whole copy.
    Resumable history() const;

private:
    using Step = std::function<void()>;
    using Event = PrimaryStreamDecoder::Event;
    using Handshake = PrimaryStreamDecoder::Handshake;
    using SyncRequest = PrimaryStreamDecoder::SyncRequest;
    void begin_session();
    void on_tcp_connected();
    void on_connected();
    void send_psync();
    // Reads, then acts on what the decoder makes of it.
    void read_more();
    void on_input();
    void on_resume();
    void begin_full_sync();
    void finish_full_sync();
    void go_up();
    void apply_stream();
    // Writes go one after another (commands, acknowledgements); `then` runs
    // once `text` is written.
    void write(std::string text, Step then = {});
    void write_next();
    void acknowledge();
    void schedule_ack();
    // Replaces the data with the snapshot received into `path`.
    void load_received(const std::string& path, std::uint64_t bytes);
    void arm_watchdog();
    // Ends the session: logs `why`, closes, reconnects a second later.
    void fail(std::string why);
    bool stale(std::uint64_t session) const { return session != session_ || stopping_.load(); }
    // The port REPLCONF listening-port names: where this server serves the
    // way its link came (its TLS port over TLS, as Redis).
    std::uint16_t listening_port() const;
    std::uint64_t applied_offset() const;

    const core::Config& config_;
    store::Keyspace& keyspace_;
    persist::Manager& persistence_;
    command::ReplicaGate& gate_;
    const std::string host_;
    const std::uint16_t port_;
    std::function<Resumable()> before_start_;  // link thread only, until it has run

    boost::asio::io_context io_{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
        io_.get_executor()};
    boost::asio::ip::tcp::resolver resolver_{io_};
    std::unique_ptr<LinkStream> stream_;  // plain TCP or TLS
    boost::asio::steady_timer watchdog_{io_};
    boost::asio::steady_timer ack_timer_{io_};
    boost::asio::steady_timer pause_{io_};
    std::thread thread_;
    std::atomic<bool> stopping_{false};

    // Link thread only.
    std::uint64_t session_ = 0;
    PrimaryStreamDecoder decoder_;
    std::vector<char> chunk_ = std::vector<char>(256 * 1024);
    std::deque<std::pair<std::shared_ptr<std::string>, Step>> writes_;
    bool writing_ = false;
    bool ack_pending_ = false;  // an acknowledgement is queued or being written
    std::uint64_t acked_ = 0;   // offset last acknowledged
    std::unique_ptr<SyncFile> sync_file_;
    std::unique_ptr<persist::StreamApplier> applier_;
    core::MemoryCharge buffer_charge_{core::MemoryUse::query_buffers};

    mutable std::mutex info_mutex_;  // guards the fields below
    std::string replid_;             // the primary's, once synchronized
    std::uint64_t offset_ = 0;       // applied up to here
    // The offset after the last record applied that changed data (the
    // keepalives after it change nothing): history()'s offset, which a
    // primary promoted from the same history matches.
    std::uint64_t changes_offset_ = 0;
    std::uint64_t read_offset_ = 0;
    bool up_ = false;
    bool syncing_ = false;
    std::uint64_t sync_bytes_ = 0;
    std::uint64_t received_bytes_ = 0;  // from the primary, snapshots included
    std::int64_t last_io_ms_ = 0;
    std::int64_t down_since_ms_ = 0;
    std::string last_error_;
    bool retired_ = false;
};

}  // namespace bloomery::net
