#pragma once
// The append-only journal: every change to the data, as what it did (the
// 128-bit hash of each added item and the layer it went to, never the item
// itself), written to DIR/<appendfilename>.<start offset> segment files and
// made durable by group commit. The format is specified byte by byte in
// proto/journal.md. It is the keyspace's store::MutationLog: the keyspace
// hands it every record, encoded before the change it describes.
//
// Order and exactness: keyspace records (CREATE, DEL, RENAME, EXPIRE,
// FLUSHALL) enter the stream under the shard locks of their keys; data
// records (ADD, CHUNK) are written into a buffer of the writing thread's own
// inside a scope that holds that buffer from before the first change to
// after the last, and reach the stream when the buffer is taken (by the
// writer at most once a millisecond, by position(), cut() and
// write_through(), by the thread itself when the buffer passes
// kLocalFlushBytes or before it appends a keyspace record). Records of data
// commute (bits are OR-ed, counts added), so their order among threads does
// not matter; a cut() waits for every scope to close, so the records before
// it are exactly the changes before it. An offset is a byte position in the
// stream of records of one journal (an id), across its segments.
//
// Durability (--appendfsync):
// - always: durable() passes a record only after fdatasync; the network layer
//   holds every reply until durable() reaches position() as it was when the
//   command batch ended (when_durable). One fdatasync covers every record
//   appended by any thread meanwhile (group commit).
// - everysec: no reply leaves before the records its batch made or may have
//   seen are written (write_through(), as Redis writes its AOF before it
//   answers), so a crash of the process loses nothing answered; fdatasync
//   once a second, so a crash of the machine loses at most about the last
//   two seconds. The writer thread writes what no reply waited for within
//   about a millisecond.
// - no: written likewise, fdatasync only when a segment is sealed and at exit.
//
// Failure (ENOSPC, EIO, EROFS, EFBIG...): the unwritten records stay in
// memory, failing() turns true (writes are refused with -MISCONF by the
// command layer), and the writer retries once a second. With always, after a
// failed fdatasync the segment is cut back to its last durable size and
// rewritten from memory, since the kernel may have dropped the pages (no
// client was answered yet); everysec keeps nothing it wrote, so there a
// failed fdatasync may lose the second the policy allows. Nothing durable is
// touched.
//
// Thread safety: every member may be called from any thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/persist/journal_health.hpp"
#include "bloomery/persist/journal_turn.hpp"
#include "bloomery/persist/status.hpp"
#include "bloomery/store/keyspace.hpp"
#include "bloomery/store/mutation_log.hpp"

namespace bloomery::persist {

enum class FsyncPolicy { always, everysec, no };

// Bytes before a segment's first record (proto/journal.md): a reader of the
// stream finds offset X of a segment starting at S at file byte 40 + X - S.
inline constexpr std::size_t kJournalSegmentHeaderBytes = 40;
bool parse_fsync_policy(std::string_view text, FsyncPolicy& out);
const char* fsync_policy_name(FsyncPolicy policy);

// The journal's facade: the keyspace's store::MutationLog, and what the
// command layer sees of it (JournalHealth).
class Journal final : public store::MutationLog, public JournalHealth {
public:
    // `buffer_limit`: bytes appended but not yet durable past which failing()
    // turns true, so a disk slower than the clients bounds memory.
    Journal(std::string dir, std::string basename, FsyncPolicy policy, std::uint64_t buffer_limit);
    ~Journal() override;
    Journal(const Journal&) = delete;
    Journal& operator=(const Journal&) = delete;

    // Starts appending to journal `id` at `offset`: to the existing segment
    // `existing` (a path, already cut to `offset`), or to a new segment. A
    // closed journal may be opened again (a replica's full synchronization
    // starts a new history in the same object, so pointers to it stay valid).
    bool open(std::uint64_t id, std::uint64_t offset, const std::string& existing,
              std::string& error);
    // Writes and fdatasyncs whatever is appended, then stops the writer and
    // gives back its buffers.
    void close();

    // store::MutationLog (keyspace.hpp calls these; see mutation_log.hpp).
    store::EncodedRecord encode_created(std::string_view key, const bloom::ScalableFilter& filter,
                                        std::int64_t expire_at_ms) override;
    store::EncodedRecord encode_deleted(std::string_view key) override;
    store::EncodedRecord encode_renamed(std::string_view from, std::string_view to) override;
    store::EncodedRecord encode_expiry(std::string_view key, std::int64_t expire_at_ms) override;
    store::EncodedRecord encode_cleared() override;
    store::EncodedRecord encode_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                                      std::string_view data) override;
    void append(store::EncodedRecord record) noexcept override;
    bloom::AddRecorder& begin_adds(const bloom::ScalableFilter& filter,
                                   std::size_t max_items) override;
    void begin_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                     std::string_view data) override;
    void end_data() noexcept override;
    void begin_transaction() override;
    void end_transaction() noexcept override;
    std::uint64_t log_id() const override { return id_.load(std::memory_order_acquire); }
    // Moves every thread's buffered records into the stream, then appended().
    std::uint64_t position() override;
    std::uint64_t cut(const std::function<void()>& at_cut) override;

    FsyncPolicy policy() const { return policy_; }
    // The offset after the last record in the stream (records still in a
    // thread's buffer are not yet in it; position() moves them first).
    std::uint64_t appended() const { return appended_.load(std::memory_order_acquire); }
    std::uint64_t durable() const { return durable_.load(std::memory_order_acquire); }
    // Calls `fn` on the writer thread once durable() >= offset of history
    // `id` (at once, on the caller's thread, if it already is, or if the
    // journal was closed and opened on another history since: close() made
    // the old one durable). For --appendfsync always.
    void when_durable(std::uint64_t id, std::uint64_t offset, std::function<void()> fn);
    // --appendfsync everysec and no: whether any record is appended (or in a
    // thread's buffer, or in an open scope) and not yet written. Lock-free;
    // a caller that saw a bit of an add and then asks sees that add's
    // records (as position()).
    bool holds_unwritten() const;
    // --appendfsync everysec and no: writes every record appended so far
    // (every thread's buffer taken) to the current segment, on the calling
    // thread, unless another thread's write covers them first; the network
    // layer calls it before a batch's replies leave. Does nothing while the
    // journal fails (the writer retries then) or is closed. Returns whether
    // every record appended before the call is now written (or the journal
    // is closed, which wrote them): false while the journal fails, and
    // then a reply that waits for a record must wait for when_durable().
    bool write_through();
    // Registers `turn` for the calling thread: a thread that ends each turn
    // of its work with write_through() (journal_turn.hpp). Null unregisters
    // it. The registration is the thread's, for every journal.
    static void set_thread_turn(JournalTurn* turn);
    // JournalHealth: failing() is true while the last write or fdatasync
    // failed, or more than buffer_limit bytes wait.
    std::string failure() const override;

    // Seals the current segment (written and fdatasynced) and starts a new
    // one at appended(); returns the new segment's start offset, or the
    // current one's if nothing was appended to it or the new file could not
    // be made. Used before a snapshot, so that the segments before the one
    // returned are wholly covered by it.
    std::uint64_t rotate();
    // Deletes the sealed segments that end at or before `offset` (a
    // snapshot covering everything before it is durable).
    void drop_covered(std::uint64_t offset);

    persist::JournalInfo info() const;

    // ---- Feeding replicas (net/replication.hpp) ----
    // The offset up to which records are in segment files (written, maybe
    // not yet durable). Lock-free; only grows.
    std::uint64_t written() const { return written_offset_.load(std::memory_order_acquire); }
    struct SegmentFile {
        std::uint64_t start;  // stream offset of the first byte after its header
        std::string path;
    };
    // The segments on disk, oldest first; the last is being written.
    std::vector<SegmentFile> segment_files() const;
    // Called after each write (on the writer thread or a thread in
    // write_through(), outside the journal's locks), with written() as the
    // write left it. Set before the journal is shared (Manager does it).
    void set_write_listener(std::function<void(std::uint64_t)> listener) {
        write_listener_ = std::move(listener);
    }
    // Appends a PING record: a keepalive for replicas, skipped by replay.
    void ping();

    // A thread's buffer is moved into the stream once it holds this much.
    static constexpr std::size_t kLocalFlushBytes = 64 * 1024;
    // Threads with a buffer of their own; more share one more buffer.
    static constexpr std::size_t kLocalBuffers = 128;

private:
    struct Segment {
        std::uint64_t start;
        std::string path;
    };
    // A list of record blocks, in stream order.
    struct BlockList {
        store::RecordBlock* head = nullptr;
        store::RecordBlock* tail = nullptr;
        std::uint64_t bytes = 0;
        bool empty() const { return head == nullptr; }
        void push(store::RecordBlock* block) noexcept;  // one block or a chain
        void splice(BlockList& other) noexcept;         // other's blocks after ours
        void clear() noexcept;                          // frees every block
    };
    class LocalBuffer;
    struct Transaction;
    // The transaction this thread runs in this journal, or null.
    Transaction* transaction() const;
    // This thread's buffer (its transaction's, while it runs one), claimed on first use (under
    // mutex_, so no cut() runs while a thread claims one).
    LocalBuffer& local_buffer();
    // Under mutex_ and local's lock: moves its records into pending_; false
    // if it held none.
    bool take_local(LocalBuffer& local) noexcept;
    // Under mutex_: take_local for every claimed buffer (waiting for open
    // scopes to close); true if any held records.
    bool take_all_locals();
    // Marks the caller's scope open before any change it records.
    static void mark_open(LocalBuffer& local);
    // Whether a thread's buffer holds records (or, `or_open`, has a scope
    // open that may be recording some).
    bool locals_pending(bool or_open = false) const;
    // Under mutex_: books `bytes` just moved into pending_.
    void appended_bytes(std::uint64_t bytes) noexcept;
    // Appends a keyspace record (after this thread's own buffered records);
    // cannot fail.
    void append_block(store::RecordBlock* block) noexcept;
    // After an append outside mutex_: wakes the writer if it sleeps.
    void wake_writer();
    // After this thread appended a record: marks its registered turn, and
    // returns it if the turn's write-through writes the record instead of
    // the writer thread (everysec and no); null otherwise.
    JournalTurn* note_appended() const;
    // Under mutex_: true (and the writer marked awake) if it sleeps; the
    // caller then notifies wake_.
    bool claim_idle_writer();
    // The writer thread: rounds of wait, take, write, sync, settle.
    void run();
    // What the writer remembers from one round to the next.
    struct WriterRound {
        std::size_t released = 0;                           // replies the last fdatasync let go
        std::int64_t last_sync_us = 0;                      // how long it took
        std::chrono::steady_clock::time_point last_take{};  // threads' buffers last taken
        bool all_written = true;                            // nothing taken was left unwritten
    };
    // Under mutex_ (`lock`): waits until there are records to write, a
    // rotation, a stop, or an everysec fdatasync due.
    void wait_for_records(std::unique_lock<std::mutex>& lock, const WriterRound& round);
    // Outside mutex_: takes every thread's records, writes them, fdatasyncs
    // if due, rotates if asked. False if a write or fdatasync failed.
    bool write_and_sync(bool stopping, bool rotating, WriterRound& round);
    // Under io_mutex_ (not mutex_): moves every thread's records and
    // pending_ into unwritten_, in stream order.
    void take_for_writing();
    // Under mutex_: the round's outcome for the failure state and rotate().
    void settle_round(bool ok, bool rotating);
    // Under mutex_ (`lock`): false when the writer is done; backs off after a
    // failure.
    bool another_round(std::unique_lock<std::mutex>& lock, bool ok, bool stopping,
                       bool all_written);
    // Under io_mutex_; writer thread or open().
    bool open_segment(std::uint64_t start, std::string& error);
    // Under io_mutex_: writes unwritten_; `wrote` is set to whether any byte
    // went out (the write listener is then due, outside the locks).
    bool write_unwritten(bool& wrote);
    // Under io_mutex_ (`io`), writer thread: fdatasyncs the current segment.
    // With everysec and no, `io` is let go during the fdatasync unless
    // `hold` (a rotation seals the segment), so replies do not wait for it.
    bool sync(std::unique_lock<std::mutex>& io, bool hold);
    void set_failure(const std::string& what);
    std::size_t notify_durable();  // runs the waiters now due; returns how many
    void release_locals();         // after close: gives back the threads' buffers

    const std::string dir_;
    const std::string basename_;
    const FsyncPolicy policy_;
    const std::uint64_t buffer_limit_;
    std::atomic<std::uint64_t> id_{0};

    mutable std::mutex mutex_;  // appenders and the writer: pending_, flags below
    std::condition_variable wake_;
    std::condition_variable rotated_;
    BlockList pending_;  // appended, not yet taken by the writer
    std::atomic<std::uint64_t> appended_{0};
    // Set (under mutex_) while the writer sleeps; read without it by threads
    // that buffered a record (seq_cst both ways, see wake_writer()).
    std::atomic<bool> writer_idle_{false};
    bool stop_ = false;
    bool rotate_requested_ = false;
    std::uint64_t rotations_done_ = 0;
    std::uint64_t rotated_to_ = 0;
    std::vector<Segment> segments_;  // oldest first; the last is being written
    std::string failure_;
    std::atomic<bool>& failing_ = failing_flag();  // JournalHealth's
    bool write_failed_ = false;

    // The file side, under io_mutex_: the writer thread and threads in
    // write_through() write; the order is io_mutex_, then mutex_, then a
    // thread buffer's mutex.
    mutable std::mutex io_mutex_;
    bool accepting_ = false;  // open, the writer running: write_through() may write
    int fd_ = -1;
    std::string current_path_;
    BlockList unwritten_;               // taken from pending_, not yet written
    std::size_t unwritten_offset_ = 0;  // bytes of unwritten_'s first block already written
    BlockList unsynced_;                // written since the last fdatasync (always only)
    std::uint64_t written_ = 0;         // offset after the last byte written
    std::uint64_t segment_size_ = 0;    // bytes in the current segment file
    std::uint64_t synced_segment_size_ = 0;
    std::int64_t last_sync_ms_ = 0;  // writer thread only
    // Written and not yet fdatasynced: the writer's everysec timer runs.
    // Set by whoever writes, cleared by sync(); read by the sleeping writer
    // (seq_cst, paired with writer_idle_ as in wake_writer()).
    std::atomic<bool> unsynced_data_{false};

    std::atomic<std::uint64_t> durable_{0};
    std::atomic<std::uint64_t> written_offset_{0};  // written_, for other threads
    std::function<void(std::uint64_t)> write_listener_;
    std::atomic<std::uint64_t> file_bytes_{0};      // all segments, headers included
    std::atomic<std::uint64_t> base_bytes_{0};      // file_bytes_ after open or the last drop
    std::atomic<std::uint64_t> buffered_{0};        // pending + unwritten + unsynced
    std::atomic<std::uint64_t> delayed_fsyncs_{0};  // fdatasyncs over 2 s
    std::atomic<std::uint64_t> fsyncs_{0};
    std::atomic<std::int64_t> last_fsync_ms_{0};       // how long the last fdatasync took
    std::atomic<std::int64_t> last_fsync_unix_ms_{0};  // when the last one succeeded (0: never)
    std::atomic<bool> syncing_{false};

    // kLocalBuffers of their own, then one shared by the threads beyond.
    const std::unique_ptr<LocalBuffer[]> locals_;
    std::atomic<std::size_t> locals_claimed_{0};  // written under mutex_
    const std::uint64_t serial_;  // tells this journal's buffers from an earlier one's

    std::mutex waiters_mutex_;
    std::vector<std::pair<std::uint64_t, std::function<void()>>> waiters_;
    std::thread writer_;
};

// Applies a replication stream (the journal's records as a primary sends
// them, proto/replication.md) to a keyspace, finding filters by the ids the
// primary journaled them under: a replica's link. Records are redone through
// the keyspace's write path, so the replica's own journal (the keyspace's
// mutation log, if any) records them as its own. Not thread-safe: one
// applier per link, called from its thread; the keyspace may be read by
// others meanwhile (the link is the replica's only writer).
class StreamApplier {
public:
    // Indexes the filters now in `keyspace` by id.
    explicit StreamApplier(store::Keyspace& keyspace);
    ~StreamApplier();
    StreamApplier(const StreamApplier&) = delete;
    StreamApplier& operator=(const StreamApplier&) = delete;
    // Applies every whole record at the start of `data` and sets `consumed`
    // to the bytes they took (a record cut off at the end waits for more).
    // False with `error` on a record that fails its checksum, does not
    // decode or cannot be applied; `consumed` then stops before it.
    bool apply(std::string_view data, std::size_t& consumed, std::string& error);
    std::uint64_t records() const;  // applied so far

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// What replay_journal found.
struct ReplayStats {
    std::uint64_t id = 0;      // the journal's id (0: none)
    std::uint64_t end = 0;     // offset after the last good record
    std::string last_segment;  // path of the newest segment ("" if none)
    std::uint64_t segments = 0;
    std::uint64_t records = 0;          // records applied
    std::uint64_t skipped = 0;          // records before the snapshot's position
    std::uint64_t truncated_bytes = 0;  // torn tail cut off the last segment
    std::uint64_t max_filter_id = 0;
    double seconds = 0;
};

// Replays the journal in `dir` into `keyspace` (loaded from a snapshot that
// covers journal `snapshot_id` up to `snapshot_position`; 0, 0 without
// one). Segments of another journal are renamed to "*.stale" with a warning.
// A torn last record of the newest segment is cut off with a warning; any
// other bad record fails with the file, the offset and the reason.
bool replay_journal(const std::string& dir, const std::string& basename, bool have_snapshot,
                    std::uint64_t snapshot_id, std::uint64_t snapshot_position,
                    store::Keyspace& keyspace, ReplayStats& stats, std::string& error);

// What `bloomery --check-journal` found (its exit codes: 0, 2, 1).
enum class JournalCheck {
    valid,      // every record good (or made so by --fix)
    torn_tail,  // good but for a last record cut short, as a crash during a write
                // leaves it: the server cuts it off at start, with a warning
                // (in the newest segment; in any other it refuses to start)
    corrupt,    // anything else, or unreadable: the server refuses to start
};
// For `bloomery --check-journal FILE [--fix]`: verifies one segment and
// describes its records in `report`. With `fix`, a bad tail (torn or
// corrupt) is cut off at the last good record. `error` says where and why
// when the result is not valid.
JournalCheck check_journal(const std::string& path, bool fix, std::string& report,
                           std::string& error);

// A new journal id: random, never 0.
std::uint64_t new_journal_id();

}  // namespace bloomery::persist
