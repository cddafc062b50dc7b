// The journal's appending side: each thread's buffer, the records it
// encodes (created, deleted, renamed, expiry, ADD and LOADCHUNK data), and the
// data scopes that keep a record and the bits it covers together.

#include <xxhash.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "bloomery/persist/journal.hpp"
#include "journal_format.hpp"
#include "journal_internal.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

namespace jf = journal_format;
using format::put_u32;
using format::put_u64;

namespace {
// The buffer this thread holds for its open data scope.
thread_local void* t_scope = nullptr;

// The buffer this thread claimed in the journal of serial `serial`.
struct ThreadBuffer {
    std::uint64_t serial = 0;
    void* buffer = nullptr;
};
thread_local ThreadBuffer t_buffer;

// The turn this thread registered (Journal::set_thread_turn), if any.
thread_local JournalTurn* t_turn = nullptr;

// The transaction this thread runs, and the journal (by serial) it runs in.
struct ThreadTransaction {
    std::uint64_t serial = 0;
    void* transaction = nullptr;
};
thread_local ThreadTransaction t_transaction;

// A record body must stay below 2^31 bytes (proto/journal.md): keys are
// bounded by proto-max-bulk-len, but a record that would not fit is refused
// before anything changes rather than written with a wrapped length.
void check_body_size(std::size_t body_bytes) {
    if (body_bytes > jf::kMaxRecordBody) throw std::length_error("journal record too large");
}

// One record (u32 body length, type, body, XXH64) at `out`.
template <class Encode>
void encode_record_at(unsigned char* out, std::uint8_t type, std::size_t body_bytes,
                      Encode&& encode) {
    put_u32(out, static_cast<std::uint32_t>(body_bytes));
    out[4] = type;
    encode(out + 5);
    put_u64(out + 5 + body_bytes, XXH64(out, 5 + body_bytes, 0));
}

// A block holding one record.
template <class Encode>
store::EncodedRecord encode_block(std::uint8_t type, std::size_t body_bytes, Encode&& encode) {
    check_body_size(body_bytes);
    auto block = std::make_unique<store::RecordBlock>();
    block->bytes.resize(jf::kRecordOverhead + body_bytes);
    encode_record_at(reinterpret_cast<unsigned char*>(block->bytes.data()), type, body_bytes,
                     encode);
    return block;
}

unsigned char* put_bytes(unsigned char* out, std::string_view bytes) {
    put_u32(out, static_cast<std::uint32_t>(bytes.size()));
    if (!bytes.empty()) std::memcpy(out + 4, bytes.data(), bytes.size());
    return out + 4 + bytes.size();
}

}  // namespace

void Journal::set_thread_turn(JournalTurn* turn) {
    t_turn = turn;
}

JournalTurn* Journal::note_appended() const {
    JournalTurn* const turn = t_turn;
    if (turn == nullptr) return nullptr;
    turn->appended_ = true;
    return policy_ != FsyncPolicy::always ? turn : nullptr;
}

Journal::Transaction* Journal::transaction() const {
    if (t_transaction.transaction == nullptr || t_transaction.serial != serial_) return nullptr;
    return static_cast<Transaction*>(t_transaction.transaction);
}

Journal::LocalBuffer& Journal::local_buffer() {
    if (Transaction* transaction = this->transaction()) return transaction->buffer;
    if (t_buffer.serial != serial_) {
        // Under mutex_: a cut() holds it while it locks every claimed buffer,
        // so no thread claims one halfway through a cut.
        std::lock_guard lock(mutex_);
        std::size_t index = locals_claimed_.load(std::memory_order_relaxed);
        if (index < kLocalBuffers) {
            locals_claimed_.store(index + 1, std::memory_order_release);
        } else {
            // Threads past kLocalBuffers share the last buffer.
            index = kLocalBuffers;
            locals_claimed_.store(kLocalBuffers + 1, std::memory_order_release);
        }
        t_buffer.serial = serial_;
        t_buffer.buffer = &locals_[index];
    }
    return *static_cast<LocalBuffer*>(t_buffer.buffer);
}

void Journal::appended_bytes(std::uint64_t bytes) noexcept {
    const std::uint64_t end = appended_.load(std::memory_order_relaxed) + bytes;
    appended_.store(end, std::memory_order_release);
    // The writer subtracts without the mutex: a read-modify-write.
    const std::uint64_t held = buffered_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    if (held > buffer_limit_ && !failing_.load(std::memory_order_relaxed)) {
        failing_.store(true, std::memory_order_relaxed);
    }
}

bool Journal::take_local(LocalBuffer& local) noexcept {
    if (local.block == nullptr || local.block->bytes.empty()) return false;
    const std::size_t bytes = local.block->bytes.size();
    // The block's memory, counted by the buffer, is counted by the stream
    // from here until the writer frees it.
    pending_.push(local.block);
    local.block = nullptr;
    local.charged = 0;
    local.size_hint = std::min<std::size_t>(bytes, 2 * kLocalFlushBytes);
    local.bytes.store(0, std::memory_order_relaxed);
    appended_bytes(bytes);
    return true;
}

bool Journal::take_all_locals() {
    bool any = false;
    const std::size_t claimed = locals_claimed_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < claimed; ++i) {
        LocalBuffer& local = locals_[i];
        // An open scope may hold records not counted yet: wait for it.
        if (!local.open.load(std::memory_order_seq_cst) &&
            local.bytes.load(std::memory_order_seq_cst) == 0) {
            continue;
        }
        std::lock_guard local_lock(local.mutex);
        any = take_local(local) || any;
    }
    return any;
}

bool Journal::locals_pending(bool or_open) const {
    const std::size_t claimed = locals_claimed_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < claimed; ++i) {
        // open before bytes: a scope closes by counting its bytes and then
        // clearing open, so a closed scope read here has its bytes seen.
        if (or_open && locals_[i].open.load(std::memory_order_seq_cst)) return true;
        if (locals_[i].bytes.load(std::memory_order_seq_cst) != 0) return true;
    }
    return false;
}

void Journal::wake_writer() {
    // Pairs with run(): the writer stores writer_idle_ = true and then reads
    // every buffer's bytes; this thread stored its bytes and then reads
    // writer_idle_ (all seq_cst). Either the writer sees the bytes and does
    // not sleep, or this thread sees it idle and wakes it. Under load the
    // writer never sleeps, so this is a plain load of a line nobody writes.
    if (!writer_idle_.load(std::memory_order_seq_cst)) return;
    bool wake;
    {
        std::lock_guard lock(mutex_);
        wake = claim_idle_writer();
    }
    if (wake) wake_.notify_one();
}

bool Journal::claim_idle_writer() {
    if (!writer_idle_.load(std::memory_order_relaxed)) return false;
    writer_idle_.store(false, std::memory_order_relaxed);
    return true;
}

void Journal::append_block(store::RecordBlock* block) noexcept {
    if (block == nullptr) return;
    LocalBuffer& local = local_buffer();
    std::int64_t capacity = 0;
    for (const store::RecordBlock* b = block; b != nullptr; b = b->next) {
        capacity += static_cast<std::int64_t>(b->bytes.capacity());
    }
    core::memory_add(core::MemoryUse::other, capacity);
    JournalTurn* const turn = note_appended();
    bool wake = false;
    {
        std::lock_guard lock(mutex_);
        // This thread's buffered records go first, so its own records keep
        // the order in which it made them.
        if (local.bytes.load(std::memory_order_relaxed) != 0) {
            std::lock_guard local_lock(local.mutex);
            take_local(local);
        }
        const std::uint64_t before = pending_.bytes;
        pending_.push(block);
        appended_bytes(pending_.bytes - before);
        wake = turn == nullptr && claim_idle_writer();
    }
    if (turn != nullptr) {
        turn->schedule_write_through();
    } else if (wake) {
        wake_.notify_one();
    }
}

void Journal::append(store::EncodedRecord record) noexcept {
    if (Transaction* transaction = this->transaction()) {
        transaction->hold(record.release());
        return;
    }
    append_block(record.release());
}

void Journal::begin_transaction() {
    if (transaction() != nullptr) throw std::logic_error("a transaction inside a transaction");
    auto transaction = std::make_unique<Transaction>();
    // The span is filled in when the transaction ends; its checksum then.
    transaction->multi = encode_block(jf::kMulti, 8, [](unsigned char* out) { put_u64(out, 0); });
    transaction->exec = encode_block(jf::kExec, 0, [](unsigned char*) {});
    t_transaction = {serial_, transaction.release()};
}

void Journal::end_transaction() noexcept {
    std::unique_ptr<Transaction> transaction(this->transaction());
    if (!transaction) return;
    t_transaction = {};
    if (transaction->held.empty()) return;  // it changed nothing: nothing to append
    store::RecordBlock* multi = transaction->multi.release();
    auto* frame = reinterpret_cast<unsigned char*>(multi->bytes.data());
    put_u64(frame + 5, transaction->held.bytes);
    put_u64(frame + 5 + 8, XXH64(frame, 5 + 8, 0));
    transaction->held.tail->next = transaction->exec.release();
    multi->next = std::exchange(transaction->held.head, nullptr);
    transaction->held.tail = nullptr;
    // One chain, appended under the journal's lock at once: no cut, no
    // segment boundary and no other thread's record falls inside it.
    append_block(multi);
}

store::EncodedRecord Journal::encode_created(std::string_view key,
                                             const bloom::ScalableFilter& filter,
                                             std::int64_t expire_at_ms) {
    const std::string header = bloom::encode_header(filter);
    return encode_block(jf::kCreate, 4 + key.size() + 8 + 8 + 4 + header.size(),
                        [&](unsigned char* out) {
                            out = put_bytes(out, key);
                            put_u64(out, static_cast<std::uint64_t>(expire_at_ms));
                            put_u64(out + 8, filter.id());
                            put_bytes(out + 16, header);
                        });
}

store::EncodedRecord Journal::encode_deleted(std::string_view key) {
    return encode_block(jf::kDelete, 4 + key.size(),
                        [&](unsigned char* out) { put_bytes(out, key); });
}

store::EncodedRecord Journal::encode_renamed(std::string_view from, std::string_view to) {
    return encode_block(jf::kRename, 8 + from.size() + to.size(),
                        [&](unsigned char* out) { put_bytes(put_bytes(out, from), to); });
}

store::EncodedRecord Journal::encode_expiry(std::string_view key, std::int64_t expire_at_ms) {
    return encode_block(jf::kExpire, 4 + key.size() + 8, [&](unsigned char* out) {
        put_u64(put_bytes(out, key), static_cast<std::uint64_t>(expire_at_ms));
    });
}

store::EncodedRecord Journal::encode_cleared() {
    return encode_block(jf::kFlushAll, 0, [](unsigned char*) {});
}

store::EncodedRecord Journal::encode_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                                           std::string_view data) {
    return encode_block(jf::kChunk, 8 + 8 + 4 + data.size(), [&](unsigned char* out) {
        put_u64(out, filter.id());
        put_u64(out + 8, static_cast<std::uint64_t>(iter));
        put_bytes(out + 16, data);
    });
}

void Journal::ping() {
    append(encode_block(jf::kPing, 0, [](unsigned char*) {}));
}

void Journal::mark_open(LocalBuffer& local) {
    local.open.store(true, std::memory_order_seq_cst);
    // The scope's changes (bits set with relaxed atomics) come after this:
    // whoever sees one of them and then fences (position()) sees the scope
    // open, and takes its records once it closes.
    std::atomic_thread_fence(std::memory_order_release);
}

bloom::AddRecorder& Journal::begin_adds(const bloom::ScalableFilter& filter,
                                        std::size_t max_items) {
    if (max_items > bloom::ScalableFilter::kBatch) throw std::length_error("batch too large");
    LocalBuffer& local = local_buffer();
    std::unique_lock lock(local.mutex);
    // Room for the whole record first: once an add is recorded its bits are
    // set, so recording must not fail (no allocation after this).
    const std::size_t most = jf::kRecordOverhead + 12 + max_items * jf::kAddEntryBytes;
    local.reserve(most);
    std::string& out = local.block->bytes;
    local.record_start = out.size();
    // Sized for the whole batch now (within the capacity just reserved);
    // end_data() trims what the batch did not use.
    out.resize(local.record_start + most);
    auto* head = reinterpret_cast<unsigned char*>(out.data() + local.record_start);
    head[4] = jf::kAdd;
    put_u64(head + 5, filter.id());
    local.next_entry = head + 5 + 12;
    local.scope = LocalBuffer::Scope::adds;
    local.entries = 0;
    local.max_entries = static_cast<std::uint32_t>(max_items);
    mark_open(local);
    t_scope = &local;
    lock.release();  // held until end_data()
    return local;
}

void Journal::begin_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                          std::string_view data) {
    const std::size_t body_bytes = 8 + 8 + 4 + data.size();
    check_body_size(body_bytes);
    LocalBuffer& local = local_buffer();
    std::unique_lock lock(local.mutex);
    local.reserve(jf::kRecordOverhead + body_bytes);
    std::string& out = local.block->bytes;
    const std::size_t at = out.size();
    out.resize(at + jf::kRecordOverhead + body_bytes);
    encode_record_at(reinterpret_cast<unsigned char*>(out.data() + at), jf::kChunk, body_bytes,
                     [&](unsigned char* body) {
                         put_u64(body, filter.id());
                         put_u64(body + 8, static_cast<std::uint64_t>(iter));
                         put_bytes(body + 16, data);
                     });
    local.scope = LocalBuffer::Scope::chunk;
    mark_open(local);
    t_scope = &local;
    lock.release();  // held until end_data()
}

void Journal::end_data() noexcept {
    auto* local = static_cast<LocalBuffer*>(t_scope);
    if (local == nullptr) return;
    t_scope = nullptr;
    std::string& out = local->block->bytes;
    bool wrote = true;
    if (local->scope == LocalBuffer::Scope::adds) {
        if (local->entries == 0) {
            out.resize(local->record_start);  // nothing was added: no record
            wrote = false;
        } else {
            auto* record = reinterpret_cast<unsigned char*>(out.data() + local->record_start);
            const std::size_t body_bytes = 12 + std::size_t{local->entries} * jf::kAddEntryBytes;
            put_u32(record, static_cast<std::uint32_t>(body_bytes));
            put_u32(record + 5 + 8, local->entries);
            put_u64(record + 5 + body_bytes, XXH64(record, 5 + body_bytes, 0));
            out.resize(local->record_start + jf::kRecordOverhead + body_bytes);
        }
    }
    local->scope = LocalBuffer::Scope::none;
    if (Transaction* transaction = this->transaction()) {
        // Held back with the transaction's other records, in order; the
        // block is counted again when the unit is appended.
        if (wrote) {
            core::memory_add(core::MemoryUse::other, -static_cast<std::int64_t>(local->charged));
            local->charged = 0;
            transaction->hold(std::exchange(local->block, nullptr));
        }
        local->open.store(false, std::memory_order_relaxed);
        local->mutex.unlock();
        return;
    }
    const std::size_t held = out.size();
    // Counted before the scope closes: a position() that finds the scope
    // closed finds its records counted.
    local->bytes.store(held, std::memory_order_seq_cst);
    local->open.store(false, std::memory_order_seq_cst);
    local->mutex.unlock();
    if (!wrote) return;
    JournalTurn* const turn = note_appended();
    if (held >= kLocalFlushBytes) {
        std::lock_guard lock(mutex_);
        std::lock_guard local_lock(local->mutex);
        take_local(*local);
    }
    if (turn != nullptr) {
        turn->schedule_write_through();
    } else {
        wake_writer();
    }
}

}  // namespace bloomery::persist
