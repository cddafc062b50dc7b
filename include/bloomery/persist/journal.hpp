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

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/core/result.hpp"
#include "bloomery/persist/journal_health.hpp"
#include "bloomery/persist/journal_turn.hpp"
#include "bloomery/persist/status.hpp"
#include "bloomery/store/mutation_log.hpp"

namespace bloomery::persist {

enum class FsyncPolicy { always, everysec, no };

// Bytes before a segment's first record (proto/journal.md): a reader of the
// stream finds offset X of a segment starting at S at file byte 40 + X - S.
inline constexpr std::size_t kJournalSegmentHeaderBytes = 40;
// "always", "everysec" or "no"; nothing for any other text.
std::optional<FsyncPolicy> parse_fsync_policy(std::string_view text);
const char* fsync_policy_name(FsyncPolicy policy);

// The journal's facade: the keyspace's store::MutationLog, and what the
// command layer sees of it (JournalHealth). Its parts (src/persist): the
// appender (the threads' buffers, data scopes, transactions, the stream
// position() and cut() measure), the writer (segment files, write-through,
// fdatasync, rotation, the writer thread, failure, durability waiters), and
// the handoff between them.
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
    // Fails, naming the file, if the segment cannot be opened or made.
    core::Status open(std::uint64_t id, std::uint64_t offset, const std::string& existing);
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
    store::EncodedRecord encode_cuckoo_created(std::string_view key,
                                               const cuckoo::CuckooFilter& filter, std::uint64_t id,
                                               std::uint64_t seq,
                                               std::int64_t expire_at_ms) override;
    store::EncodedRecord reserve_cuckoo_change(std::size_t max_moves,
                                               std::size_t data_bytes) override;
    void seal_cuckoo_change(store::RecordBlock& record, std::uint64_t id, std::uint64_t seq,
                            const store::CuckooChange& change) noexcept override;
    void append(store::EncodedRecord record) noexcept override;
    bloom::AddRecorder& begin_adds(const bloom::ScalableFilter& filter,
                                   std::size_t max_items) override;
    store::EncodedRecord encode_age_created(std::string_view key, const bloom::AgeFilter& filter,
                                            std::int64_t expire_at_ms) override;
    bloom::AgeRecorder& begin_age_adds(const bloom::AgeFilter& filter,
                                       std::size_t max_items) override;
    store::EncodedRecord encode_age_words(const bloom::AgeFilter& filter, std::uint64_t generation,
                                          std::uint64_t first, std::string_view data) override;
    void begin_age_words(const bloom::AgeFilter& filter, std::uint64_t generation,
                         std::uint64_t first, std::string_view data) override;
    void begin_age_shift(const bloom::AgeFilter& filter, std::uint64_t generation,
                         std::uint64_t shifted_ms) override;
    void begin_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                     std::string_view data) override;
    bloom::AddRecorder& begin_removes(const bloom::ScalableFilter& filter,
                                      std::size_t max_items) override;
    void end_data() noexcept override;
    void publish_thread() noexcept override;
    void begin_transaction() override;
    void end_transaction() noexcept override;
    std::uint64_t log_id() const override;
    // Moves every thread's buffered records into the stream, then appended().
    std::uint64_t position() override;
    std::uint64_t cut(const std::function<void()>& at_cut) override;

    FsyncPolicy policy() const { return policy_; }
    // The offset after the last record in the stream (records still in a
    // thread's buffer are not yet in it; position() moves them first).
    // Lock-free.
    std::uint64_t appended() const;
    // The offset after the last record that changed data (appended() less
    // the keepalives since): exact inside cut()'s at_cut.
    std::uint64_t changes_end() const;
    // Every record before this offset is durable (with --appendfsync no:
    // written). Lock-free.
    std::uint64_t durable() const;
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
    std::uint64_t written() const;
    struct SegmentFile {
        std::uint64_t start;  // stream offset of the first byte after its header
        std::string path;
    };
    // The segments on disk, oldest first; the last is being written.
    std::vector<SegmentFile> segment_files() const;
    // Called after each write (on the writer thread or a thread in
    // write_through(), outside the journal's locks), with written() as the
    // write left it. Set before the journal is shared (Manager does it).
    void set_write_listener(std::function<void(std::uint64_t)> listener);
    // Appends a PING record: a keepalive for replicas, skipped by replay.
    void ping();

    // A thread's buffer is moved into the stream once it holds this much.
    static constexpr std::size_t kLocalFlushBytes = 64 * 1024;
    // Threads with a buffer of their own; more share one more buffer.
    static constexpr std::size_t kLocalBuffers = 128;

private:
    struct Parts;  // journal.cpp: the handoff, the appender, the writer
    const FsyncPolicy policy_;
    const std::unique_ptr<Parts> parts_;
};

// A new journal id: random, never 0.
std::uint64_t new_journal_id();

}  // namespace bloomery::persist
