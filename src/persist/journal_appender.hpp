#pragma once
// The journal's appending side (journal_appender.cpp): the records threads
// make, in buffers of their own, inside data scopes and transactions, and
// the stream they reach in order, which position() and cut() measure and
// the writer (journal_writer.hpp) takes. What the journal's header
// (persist/journal.hpp) says of order and exactness is kept here.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/persist/journal.hpp"
#include "bloomery/store/mutation_log.hpp"
#include "journal_blocks.hpp"
#include "journal_format.hpp"
#include "journal_handoff.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

class JournalAppender {
public:
    JournalAppender(FsyncPolicy policy, JournalHandoff& handoff);
    ~JournalAppender();
    JournalAppender(const JournalAppender&) = delete;
    JournalAppender& operator=(const JournalAppender&) = delete;

    // ---- Records: store::MutationLog's appending calls (mutation_log.hpp) ----
    void append(store::EncodedRecord record) noexcept;
    // A keepalive (PING) record: changes nothing, so changes_end() stays.
    void append_keepalive(store::EncodedRecord record) noexcept;
    bloom::AddRecorder& begin_adds(const bloom::ScalableFilter& filter, std::size_t max_items);
    bloom::AddRecorder& begin_removes(const bloom::ScalableFilter& filter, std::size_t max_items);
    bloom::AgeRecorder& begin_age_adds(const bloom::AgeFilter& filter, std::size_t max_items);
    void begin_age_words(const bloom::AgeFilter& filter, std::uint64_t generation,
                         std::uint64_t first, std::string_view data);
    void begin_age_shift(const bloom::AgeFilter& filter, std::uint64_t generation,
                         std::uint64_t shifted_ms);
    // Moves this thread's buffer into the stream (MutationLog::publish_thread).
    void publish_thread() noexcept;
    void begin_chunk(const bloom::ScalableFilter& filter, std::int64_t iter, std::string_view data);
    void end_data() noexcept;
    void begin_transaction();
    void end_transaction() noexcept;
    // Moves every thread's buffered records into the stream, then appended().
    std::uint64_t position();
    std::uint64_t cut(const std::function<void()>& at_cut);
    // Journal::set_thread_turn().
    static void set_thread_turn(JournalTurn* turn);

    // The offset after the last record in the stream. Lock-free.
    std::uint64_t appended() const { return appended_.load(std::memory_order_acquire); }
    // The offset after the last record that changed data: appended() less
    // the keepalives appended since. The data a replica holds at any offset
    // from here to appended() is the same. Exact under the handoff's mutex
    // (inside cut()'s at_cut).
    std::uint64_t changes_end() const {
        return appended() - trailing_keepalives_.load(std::memory_order_acquire);
    }
    // Lock-free: whether a thread's buffer holds records, or, counting open
    // scopes, has a scope open that may be recording some.
    enum class Count { records, records_and_open_scopes };
    bool threads_hold(Count what) const;
    // Bytes in threads' buffers, not yet in the stream. Lock-free.
    std::uint64_t bytes_in_threads() const;

    // ---- For the writer, under the handoff's mutex ----
    // Whether any record waits to be taken (in the stream or a thread's
    // buffer).
    bool holds_records() const { return !pending_.empty() || threads_hold(Count::records); }
    // Moves every thread's records and then the stream's into `into`, in
    // stream order (waiting for open scopes to close).
    void take_all(BlockList& into);
    // A new history: the stream starts at `offset`.
    void restart_at(std::uint64_t offset) {
        appended_.store(offset, std::memory_order_relaxed);
        trailing_keepalives_.store(0, std::memory_order_relaxed);
    }

    // After the writer stopped: gives back the threads' buffers and the
    // stream's blocks (the writer wrote them, or could not and said so).
    void release_buffers();

private:
    class LocalBuffer;
    struct Transaction;
    // The transaction this thread runs in this journal, or null.
    Transaction* transaction() const;
    // This thread's buffer (its transaction's, while it runs one), claimed
    // on first use (under the handoff's mutex, so no cut() runs while a
    // thread claims one).
    LocalBuffer& local_buffer();
    // Under the handoff's mutex and local's lock: moves its records into
    // pending_; false if it held none.
    bool take_local(LocalBuffer& local) noexcept;
    // Under the handoff's mutex: take_local for every claimed buffer
    // (waiting for open scopes to close); true if any held records.
    bool take_all_locals();
    // An ADD or REMOVE record's scope, entries of (layer, h1, h2), or an
    // AGE-ADD record's, entries of (generation, h1, h2): `entry_bytes` each.
    LocalBuffer& begin_entries(std::uint64_t filter_id, std::size_t max_items, std::uint8_t type,
                               std::size_t entry_bytes);
    // Opens a scope holding one whole record of `body_bytes` written by
    // `encode` (a CHUNK, an AGE-SHIFT).
    template <class Encode>
    void begin_whole_record(std::uint8_t type, std::size_t body_bytes, Encode&& encode);
    // Marks the caller's scope open before any change it records.
    static void mark_open(LocalBuffer& local);
    // Under the handoff's mutex: books `bytes` just moved into pending_
    // (keepalive records only, or any that changes data).
    void appended_bytes(std::uint64_t bytes, bool keepalive = false) noexcept;
    // Appends a keyspace record (after this thread's own buffered records);
    // cannot fail.
    void append_block(store::RecordBlock* block, bool keepalive = false) noexcept;
    // After this thread appended a record: marks its registered turn, and
    // returns it if the turn's write-through writes the record instead of
    // the writer thread (everysec and no); null otherwise.
    JournalTurn* note_appended() const;

    const FsyncPolicy policy_;
    JournalHandoff& handoff_;
    BlockList pending_;  // appended, not yet taken by the writer (handoff's mutex)
    std::atomic<std::uint64_t> appended_{0};
    // Bytes of keepalive records at the end of the stream (handoff's mutex).
    std::atomic<std::uint64_t> trailing_keepalives_{0};
    // kLocalBuffers of their own, then one shared by the threads beyond.
    const std::unique_ptr<LocalBuffer[]> locals_;
    std::atomic<std::size_t> locals_claimed_{0};  // written under the handoff's mutex
    const std::uint64_t serial_;  // tells this journal's buffers from an earlier one's
};

// One thread's records not yet in the stream: a scope's ADD record being
// built, or whole records waiting for the writer. Its mutex is held by the
// owning thread for a whole data scope, and taken by the writer, position()
// and cut() to move its records into the stream.
class JournalAppender::LocalBuffer final : public bloom::AddRecorder, public bloom::AgeRecorder {
public:
    std::mutex mutex;
    store::RecordBlock* block = nullptr;  // owned; null until first used
    std::atomic<std::size_t> bytes{0};    // block's size, read without the mutex
    // A scope is open: records may be in the block that `bytes` does not
    // count yet (set at begin, cleared at end_data()).
    std::atomic<bool> open{false};
    std::size_t charged = 0;    // block's capacity counted in memory (owner)
    std::size_t size_hint = 0;  // bytes the last block taken held (at most 2 × kLocalFlushBytes)

    // The open scope (under the mutex, owning thread).
    enum class Scope { none, adds, chunk } scope = Scope::none;
    std::size_t record_start = 0;  // offset of the open ADD record in the block
    std::uint32_t entries = 0;
    std::uint32_t max_entries = 0;
    std::size_t entry_bytes = 0;          // of the open record's entries
    unsigned char* next_entry = nullptr;  // where the next ADD entry goes

    bool record(std::uint32_t layer, const bloom::ItemHash& hash) noexcept override {
        if (scope != Scope::adds || entry_bytes != journal_format::kAddEntryBytes ||
            entries == max_entries || layer > 255) {
            return false;
        }
        // Into the space begin_adds() sized for the whole batch: no
        // allocation, and a plain store per field (appending the 17 bytes to
        // the string cost BF.MADD measurably more instructions per item;
        // tests/bench/README.md).
        unsigned char* entry = next_entry;
        entry[0] = static_cast<unsigned char>(layer);
        format::put_u64(entry + 1, hash.h1);
        format::put_u64(entry + 9, hash.h2);
        next_entry += journal_format::kAddEntryBytes;
        ++entries;
        return true;
    }
    // An expiring filter's add (AgeRecorder), likewise.
    bool record(std::uint64_t generation, const bloom::ItemHash& hash) noexcept override {
        if (scope != Scope::adds || entry_bytes != journal_format::kAgeAddEntryBytes ||
            entries == max_entries) {
            return false;
        }
        format::put_u64(next_entry, generation);
        format::put_u64(next_entry + 8, hash.h1);
        format::put_u64(next_entry + 16, hash.h2);
        next_entry += journal_format::kAgeAddEntryBytes;
        ++entries;
        return true;
    }

    // Makes room for `more` bytes after what the block holds (may throw
    // std::bad_alloc, changing nothing but capacity).
    void reserve(std::size_t more) {
        if (block == nullptr) {
            block = new store::RecordBlock;
            // As much as the block before held when it was taken: a thread
            // adding steadily allocates one block per take, sized once.
            block->bytes.reserve(std::max(more, size_hint));
        }
        std::string& out = block->bytes;
        if (out.capacity() - out.size() < more) {
            out.reserve(
                std::max(out.size() + more,
                         std::min<std::size_t>(2 * out.capacity(), Journal::kLocalFlushBytes * 2)));
        }
        if (out.capacity() != charged) {
            core::memory_add(core::MemoryUse::other, static_cast<std::int64_t>(out.capacity()) -
                                                         static_cast<std::int64_t>(charged));
            charged = out.capacity();
        }
    }

    // Frees the block (the owner's or, once no thread uses it, anyone's).
    void release() noexcept {
        if (block == nullptr) return;
        core::memory_add(core::MemoryUse::other, -static_cast<std::int64_t>(charged));
        delete block;
        block = nullptr;
        charged = 0;
        bytes.store(0, std::memory_order_relaxed);
    }
};

// A transaction's records, held back from the stream until it ends
// (journal_appender.cpp): its data records are built in a buffer of its
// own, which no writer, position() or cut() takes, then moved with its
// keyspace records into `held`, in the order made. Blocks in `held` are not
// counted in memory until appended.
struct JournalAppender::Transaction {
    LocalBuffer buffer;
    BlockList held;  // the unit's records, in order
    // The unit's framing, allocated when it begins so that ending cannot fail.
    std::unique_ptr<store::RecordBlock> multi;
    std::unique_ptr<store::RecordBlock> exec;

    void hold(store::RecordBlock* block) noexcept { held.push(block); }
    ~Transaction() {
        // Not BlockList::clear(): held blocks were never counted in memory.
        while (held.head != nullptr) delete std::exchange(held.head, held.head->next);
        buffer.release();
    }
};

inline bloom::AddRecorder& JournalAppender::begin_adds(const bloom::ScalableFilter& filter,
                                                       std::size_t max_items) {
    return begin_entries(filter.id(), max_items, journal_format::kAdd,
                         journal_format::kAddEntryBytes);
}

inline bloom::AddRecorder& JournalAppender::begin_removes(const bloom::ScalableFilter& filter,
                                                          std::size_t max_items) {
    return begin_entries(filter.id(), max_items, journal_format::kRemove,
                         journal_format::kAddEntryBytes);
}

inline bloom::AgeRecorder& JournalAppender::begin_age_adds(const bloom::AgeFilter& filter,
                                                           std::size_t max_items) {
    return begin_entries(filter.id(), max_items, journal_format::kAgeAdd,
                         journal_format::kAgeAddEntryBytes);
}

}  // namespace bloomery::persist
