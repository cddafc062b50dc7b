#pragma once
// What the keyspace tells a journal (persist/journal.hpp) about its changes:
// the one place every write produces its record (store/keyspace.hpp's write
// functions call these, and nothing else does).
//
// Records say what was done, so that doing them again gives back exactly the
// live state: the layer an add went to and its hash, the filter a key was
// linked to, the deadline set. Replay and replicas redo them and decide
// nothing.
//
// A record cannot fail to be written once its change is made: everything
// that can fail (allocation) happens before the change.
// - Keyspace records (CREATE, DEL, RENAME, EXPIRE, FLUSHALL, and the CHUNK
//   records that carry a restored or copied filter's bits) are encoded
//   first (encode_*: may throw std::bad_alloc, nothing has changed yet) and
//   appended after the change with append(), which cannot fail. Both happen
//   under the locks of the shards the change touches, so for one key the
//   records are in the order the changes took effect.
// - Data records (the adds of one batch, a counting filter's deletes, a
//   BF.LOADCHUNK chunk) are written
//   inside a scope of the calling thread: begin_adds() / begin_chunk()
//   reserve room for the whole record (may throw std::bad_alloc before
//   anything changed), each add is recorded just before its bits are set,
//   and end_data() closes the record. No cut() happens while any scope is
//   open, so a cut splits every scope's records and changes alike.
//
// - A transaction (Keyspace::Transaction: MULTI/EXEC, or a replica applying
//   one) holds back every record its thread makes between
//   begin_transaction() and end_transaction(), and then appends them as
//   one unit, which replay and replicas apply all or nothing.
//
// Every call is made from any thread; at most one scope is open per thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/cuckoo/cuckoo_filter.hpp"

namespace bloomery::store {

// Bytes of encoded records, linked into a journal's stream as they are.
struct RecordBlock {
    std::string bytes;
    RecordBlock* next = nullptr;
};
using EncodedRecord = std::unique_ptr<RecordBlock>;

// One change to a Cuckoo filter, as its record says it (cuckoo_object.hpp:
// changes are numbered; the record carries the number). `fill` is a chunk
// of a new filter's slots, part of its creation (RESTORE, COPY), numbered 0.
struct CuckooChange {
    enum class Kind : std::uint8_t { insert = 1, remove = 2, compact = 3, chunk = 4 };
    Kind kind = Kind::insert;
    const cuckoo::InsertRecord* insert = nullptr;  // insert
    const cuckoo::DeleteRecord* remove = nullptr;  // remove
    std::int64_t pos = 0;                          // chunk: CF.LOADCHUNK's iterator
    std::string_view data;                         // chunk: its bytes

    static CuckooChange inserted(const cuckoo::InsertRecord& record) {
        CuckooChange change;
        change.insert = &record;
        return change;
    }
    static CuckooChange removed(const cuckoo::DeleteRecord& record) {
        CuckooChange change;
        change.kind = Kind::remove;
        change.remove = &record;
        return change;
    }
    static CuckooChange compacted() {
        CuckooChange change;
        change.kind = Kind::compact;
        return change;
    }
    static CuckooChange chunk(std::int64_t pos, std::string_view data) {
        CuckooChange change;
        change.kind = Kind::chunk;
        change.pos = pos;
        change.data = data;
        return change;
    }
};

class MutationLog {
public:
    virtual ~MutationLog() = default;

    // ---- Keyspace records ----
    // A new filter linked under `key` (BF.RESERVE, BF.INSERT, BF.ADD creating
    // it, BF.LOADCHUNK's header, RESTORE); holds the filter's item counts.
    virtual EncodedRecord encode_created(std::string_view key, const bloom::ScalableFilter& filter,
                                         std::int64_t expire_at_ms) = 0;
    virtual EncodedRecord encode_deleted(std::string_view key) = 0;
    virtual EncodedRecord encode_renamed(std::string_view from, std::string_view to) = 0;
    // The key's deadline is now `expire_at_ms` (0: none).
    virtual EncodedRecord encode_expiry(std::string_view key, std::int64_t expire_at_ms) = 0;
    virtual EncodedRecord encode_cleared() = 0;
    // A CHUNK record encoded as a keyspace record: a data chunk of
    // bloom::dump_chunk() of `filter`, which is not linked yet (RESTORE and
    // COPY carry a new filter's bits this way, appended right after its
    // CREATE: Keyspace::restore()).
    virtual EncodedRecord encode_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                                       std::string_view data) = 0;
    // A new Cuckoo filter linked under `key`: its id, the number of its last
    // change and its header (RedisBloom's CF.SCANDUMP header, counts
    // included); its slots follow as fill records when it is not empty.
    virtual EncodedRecord encode_cuckoo_created(std::string_view key,
                                                const cuckoo::CuckooFilter& filter,
                                                std::uint64_t id, std::uint64_t seq,
                                                std::int64_t expire_at_ms) = 0;
    // A new expiring filter linked under `key`: its id and its header with
    // its counts (bloom/age_header.hpp: encode_age_dump_header); its bits are
    // clear.
    virtual EncodedRecord encode_age_created(std::string_view key, const bloom::AgeFilter& filter,
                                             std::int64_t expire_at_ms) = 0;
    // An AGE-WORDS record encoded as a keyspace record: words of an
    // expiring filter not linked yet (COPY and BF.MERGE carry its bits this
    // way, right after its AGE-CREATE).
    virtual EncodedRecord encode_age_words(const bloom::AgeFilter& filter, std::uint64_t generation,
                                           std::uint64_t first, std::string_view data) = 0;
    // A record with room for one change to a Cuckoo filter of at most
    // `max_moves` relocations or `data_bytes` bytes of chunk, allocated
    // before the change (throws std::bad_alloc with nothing changed), then
    // written by seal_cuckoo_change() once the change is made (cannot
    // fail) and appended.
    virtual EncodedRecord reserve_cuckoo_change(std::size_t max_moves, std::size_t data_bytes) = 0;
    virtual void seal_cuckoo_change(RecordBlock& record, std::uint64_t id, std::uint64_t seq,
                                    const CuckooChange& change) noexcept = 0;
    // Appends an encoded record (a chain of them, in order) to the stream.
    virtual void append(EncodedRecord record) noexcept = 0;

    // ---- Data records ----
    // Opens this thread's scope for up to `max_items` adds to `filter`; the
    // returned recorder's record() appends one (and fails only past
    // max_items). Throws std::bad_alloc with nothing changed.
    virtual bloom::AddRecorder& begin_adds(const bloom::ScalableFilter& filter,
                                           std::size_t max_items) = 0;
    // The same for up to `max_items` deletes from a counting filter (a
    // REMOVE record: the layer each was taken from and its hash).
    virtual bloom::AddRecorder& begin_removes(const bloom::ScalableFilter& filter,
                                              std::size_t max_items) = 0;
    // The same for up to `max_items` adds to an expiring filter (an AGE-ADD
    // record: the generation each was stamped with and its hash).
    virtual bloom::AgeRecorder& begin_age_adds(const bloom::AgeFilter& filter,
                                               std::size_t max_items) = 0;
    // Opens this thread's scope with an expiring filter's shift to
    // `generation` at `shifted_ms` recorded, made before the scope closes.
    // Throws std::bad_alloc with nothing changed.
    virtual void begin_age_shift(const bloom::AgeFilter& filter, std::uint64_t generation,
                                 std::uint64_t shifted_ms) = 0;
    // Opens this thread's scope with words ORed into an expiring filter at
    // `generation` (BF.LOADCHUNK), from word `first`: `data`, 8 bytes a
    // word. Throws std::bad_alloc with nothing changed.
    virtual void begin_age_words(const bloom::AgeFilter& filter, std::uint64_t generation,
                                 std::uint64_t first, std::string_view data) = 0;
    // Opens this thread's scope with one BF.LOADCHUNK chunk, already checked
    // against `filter`, recorded. Throws std::bad_alloc with nothing changed.
    virtual void begin_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                             std::string_view data) = 0;
    // Closes this thread's scope (a scope of adds that recorded none leaves
    // nothing behind).
    virtual void end_data() noexcept = 0;
    // After end_data(): moves this thread's buffered records into the
    // stream now, behind every record appended before. A counting filter's
    // changes do not commute, so each reaches the stream before the next
    // change to that filter is made (ScalableFilter::serialize_changes());
    // inside a transaction its records are held back in order anyway.
    virtual void publish_thread() noexcept = 0;

    // ---- Transactions ----
    // From here until end_transaction(), this thread's records (keyspace and
    // data alike) are held back, in the order made. Throws std::bad_alloc
    // with nothing changed (what framing the unit needs is allocated here).
    virtual void begin_transaction() = 0;
    // Appends what was held back as one unit (nothing if there was none);
    // cannot fail. Called while the transaction still holds its shards.
    virtual void end_transaction() noexcept = 0;

    // ---- Positions ----
    // The journal's identity.
    virtual std::uint64_t log_id() const = 0;
    // The offset just past every record appended so far, those in threads'
    // scopes and buffers included.
    virtual std::uint64_t position() = 0;
    // A cut: waits until no scope is open, then, while none can open and no
    // keyspace record can be appended, runs `at_cut` and returns the offset
    // that splits the records into those before the cut and those after.
    // The caller holds every shard's lock (Keyspace::view()).
    virtual std::uint64_t cut(const std::function<void()>& at_cut) = 0;
};

// A data scope closed on every path out of a block.
class DataScope {
public:
    explicit DataScope(MutationLog* log) : log_(log) {}
    ~DataScope() {
        if (log_ != nullptr) log_->end_data();
    }
    DataScope(const DataScope&) = delete;
    DataScope& operator=(const DataScope&) = delete;

private:
    MutationLog* log_;
};

}  // namespace bloomery::store
