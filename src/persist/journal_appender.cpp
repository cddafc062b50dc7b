// The journal's appending side: each thread's buffer, the ADD and LOADCHUNK
// data records built in it, the data scopes that keep a record and the bits
// it covers together, transactions held back as one unit, and the stream
// position() and cut() measure.

#include "journal_appender.hpp"

#include <xxhash.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "journal_encode.hpp"

namespace bloomery::persist {

namespace jf = journal_format;
using format::put_u32;
using format::put_u64;
using journal_encode::encode_block;

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

std::atomic<std::uint64_t> g_journal_serial{0};

}  // namespace

JournalAppender::JournalAppender(FsyncPolicy policy, JournalHandoff& handoff)
    : policy_(policy),
      handoff_(handoff),
      locals_(new LocalBuffer[Journal::kLocalBuffers + 1]),
      serial_(g_journal_serial.fetch_add(1, std::memory_order_relaxed) + 1) {}

JournalAppender::~JournalAppender() {
    release_buffers();
}

void JournalAppender::release_buffers() {
    for (std::size_t i = 0; i <= Journal::kLocalBuffers; ++i) {
        LocalBuffer& local = locals_[i];
        std::lock_guard lock(local.mutex);
        local.release();
    }
    std::lock_guard lock(handoff_.mutex);
    pending_.clear();
}

void JournalAppender::set_thread_turn(JournalTurn* turn) {
    t_turn = turn;
}

JournalTurn* JournalAppender::note_appended() const {
    JournalTurn* const turn = t_turn;
    if (turn == nullptr) return nullptr;
    turn->appended_ = true;
    return policy_ != FsyncPolicy::always ? turn : nullptr;
}

JournalAppender::Transaction* JournalAppender::transaction() const {
    if (t_transaction.transaction == nullptr || t_transaction.serial != serial_) return nullptr;
    return static_cast<Transaction*>(t_transaction.transaction);
}

JournalAppender::LocalBuffer& JournalAppender::local_buffer() {
    if (Transaction* transaction = this->transaction()) return transaction->buffer;
    if (t_buffer.serial != serial_) {
        // Under the handoff's mutex: a cut() holds it while it locks every
        // claimed buffer, so no thread claims one halfway through a cut.
        std::lock_guard lock(handoff_.mutex);
        std::size_t index = locals_claimed_.load(std::memory_order_relaxed);
        if (index < Journal::kLocalBuffers) {
            locals_claimed_.store(index + 1, std::memory_order_release);
        } else {
            // Threads past kLocalBuffers share the last buffer.
            index = Journal::kLocalBuffers;
            locals_claimed_.store(Journal::kLocalBuffers + 1, std::memory_order_release);
        }
        t_buffer.serial = serial_;
        t_buffer.buffer = &locals_[index];
    }
    return *static_cast<LocalBuffer*>(t_buffer.buffer);
}

void JournalAppender::appended_bytes(std::uint64_t bytes, bool keepalive) noexcept {
    const std::uint64_t end = appended_.load(std::memory_order_relaxed) + bytes;
    trailing_keepalives_.store(
        keepalive ? trailing_keepalives_.load(std::memory_order_relaxed) + bytes : 0,
        std::memory_order_relaxed);
    appended_.store(end, std::memory_order_release);
    handoff_.hold(bytes);
}

bool JournalAppender::take_local(LocalBuffer& local) noexcept {
    if (local.block == nullptr || local.block->bytes.empty()) return false;
    const std::size_t bytes = local.block->bytes.size();
    // The block's memory, counted by the buffer, is counted by the stream
    // from here until the writer frees it.
    pending_.push(local.block);
    local.block = nullptr;
    local.charged = 0;
    local.size_hint = std::min<std::size_t>(bytes, 2 * Journal::kLocalFlushBytes);
    local.bytes.store(0, std::memory_order_relaxed);
    appended_bytes(bytes);
    return true;
}

bool JournalAppender::take_all_locals() {
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

void JournalAppender::take_all(BlockList& into) {
    take_all_locals();
    into.splice(pending_);
}

bool JournalAppender::threads_hold(Count what) const {
    const std::size_t claimed = locals_claimed_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < claimed; ++i) {
        // open before bytes: a scope closes by counting its bytes and then
        // clearing open, so a closed scope read here has its bytes seen.
        if (what == Count::records_and_open_scopes &&
            locals_[i].open.load(std::memory_order_seq_cst)) {
            return true;
        }
        if (locals_[i].bytes.load(std::memory_order_seq_cst) != 0) return true;
    }
    return false;
}

std::uint64_t JournalAppender::bytes_in_threads() const {
    std::uint64_t bytes = 0;
    const std::size_t claimed = locals_claimed_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < claimed; ++i) {
        bytes += locals_[i].bytes.load(std::memory_order_relaxed);
    }
    return bytes;
}

std::uint64_t JournalAppender::position() {
    // Pairs with mark_open(): a caller that saw a bit of an add (a relaxed
    // load) and then asks for the position sees that add's scope open or its
    // records counted, and waits for them.
    std::atomic_thread_fence(std::memory_order_acquire);
    bool wake = false;
    {
        std::lock_guard lock(handoff_.mutex);
        wake = take_all_locals() && handoff_.claim_idle_writer();
    }
    if (wake) handoff_.wake.notify_one();
    return appended();
}

std::uint64_t JournalAppender::cut(const std::function<void()>& at_cut) {
    std::uint64_t at;
    bool wake = false;
    {
        std::unique_lock lock(handoff_.mutex);
        // Every claimed buffer locked at once (in index order, as nothing else
        // holds two): no data scope is open, none can open, and with the
        // handoff's mutex no keyspace record can be appended.
        const std::size_t claimed = locals_claimed_.load(std::memory_order_acquire);
        std::vector<std::unique_lock<std::mutex>> locals;
        locals.reserve(claimed);
        for (std::size_t i = 0; i < claimed; ++i) locals.emplace_back(locals_[i].mutex);
        bool took = false;
        for (std::size_t i = 0; i < claimed; ++i) took = take_local(locals_[i]) || took;
        at = appended();
        at_cut();
        wake = took && handoff_.claim_idle_writer();
    }
    if (wake) handoff_.wake.notify_one();
    return at;
}

void JournalAppender::append_block(store::RecordBlock* block, bool keepalive) noexcept {
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
        std::lock_guard lock(handoff_.mutex);
        // This thread's buffered records go first, so its own records keep
        // the order in which it made them.
        if (local.bytes.load(std::memory_order_relaxed) != 0) {
            std::lock_guard local_lock(local.mutex);
            take_local(local);
        }
        const std::uint64_t before = pending_.bytes;
        pending_.push(block);
        appended_bytes(pending_.bytes - before, keepalive);
        wake = turn == nullptr && handoff_.claim_idle_writer();
    }
    if (turn != nullptr) {
        turn->schedule_write_through();
    } else if (wake) {
        handoff_.wake.notify_one();
    }
}

void JournalAppender::append(store::EncodedRecord record) noexcept {
    if (Transaction* transaction = this->transaction()) {
        transaction->hold(record.release());
        return;
    }
    append_block(record.release());
}

void JournalAppender::append_keepalive(store::EncodedRecord record) noexcept {
    append_block(record.release(), true);
}

void JournalAppender::begin_transaction() {
    if (transaction() != nullptr) throw std::logic_error("a transaction inside a transaction");
    auto transaction = std::make_unique<Transaction>();
    // The span is filled in when the transaction ends; its checksum then.
    transaction->multi = encode_block(jf::kMulti, 8, [](unsigned char* out) { put_u64(out, 0); });
    transaction->exec = encode_block(jf::kExec, 0, [](unsigned char*) {});
    t_transaction = {serial_, transaction.release()};
}

void JournalAppender::end_transaction() noexcept {
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
    // One chain, appended under the handoff's mutex at once: no cut, no
    // segment boundary and no other thread's record falls inside it.
    append_block(multi);
}

void JournalAppender::mark_open(LocalBuffer& local) {
    local.open.store(true, std::memory_order_seq_cst);
    // The scope's changes (bits set with relaxed atomics) come after this:
    // whoever sees one of them and then fences (position()) sees the scope
    // open, and takes its records once it closes.
    std::atomic_thread_fence(std::memory_order_release);
}

JournalAppender::LocalBuffer& JournalAppender::begin_entries(std::uint64_t filter_id,
                                                             std::size_t max_items,
                                                             std::uint8_t type,
                                                             std::size_t entry_bytes) {
    if (max_items > bloom::ScalableFilter::kBatch) throw std::length_error("batch too large");
    LocalBuffer& local = local_buffer();
    std::unique_lock lock(local.mutex);
    // Room for the whole record first: once an add is recorded its bits are
    // set, so recording must not fail (no allocation after this).
    const std::size_t most = jf::kRecordOverhead + 12 + max_items * entry_bytes;
    local.reserve(most);
    std::string& out = local.block->bytes;
    local.record_start = out.size();
    // Sized for the whole batch now (within the capacity just reserved);
    // end_data() trims what the batch did not use.
    out.resize(local.record_start + most);
    auto* head = reinterpret_cast<unsigned char*>(out.data() + local.record_start);
    head[4] = type;
    put_u64(head + 5, filter_id);
    local.next_entry = head + 5 + 12;
    local.scope = LocalBuffer::Scope::adds;
    local.entry_bytes = entry_bytes;
    local.entries = 0;
    local.max_entries = static_cast<std::uint32_t>(max_items);
    mark_open(local);
    t_scope = &local;
    lock.release();  // held until end_data()
    return local;
}

template <class Encode>
void JournalAppender::begin_whole_record(std::uint8_t type, std::size_t body_bytes,
                                         Encode&& encode) {
    journal_encode::check_body_size(body_bytes);
    LocalBuffer& local = local_buffer();
    std::unique_lock lock(local.mutex);
    local.reserve(jf::kRecordOverhead + body_bytes);
    std::string& out = local.block->bytes;
    const std::size_t at = out.size();
    out.resize(at + jf::kRecordOverhead + body_bytes);
    journal_encode::encode_record_at(reinterpret_cast<unsigned char*>(out.data() + at), type,
                                     body_bytes, encode);
    local.scope = LocalBuffer::Scope::chunk;
    mark_open(local);
    t_scope = &local;
    lock.release();  // held until end_data()
}

void JournalAppender::begin_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                                  std::string_view data) {
    begin_whole_record(
        jf::kChunk, journal_encode::chunk_body_bytes(data),
        [&](unsigned char* body) { journal_encode::put_chunk_body(body, filter, iter, data); });
}

void JournalAppender::begin_age_shift(const bloom::AgeFilter& filter, std::uint64_t generation,
                                      std::uint64_t shifted_ms) {
    begin_whole_record(jf::kAgeShift, journal_encode::kAgeShiftBodyBytes, [&](unsigned char* body) {
        journal_encode::put_age_shift_body(body, filter, generation, shifted_ms);
    });
}

void JournalAppender::begin_age_words(const bloom::AgeFilter& filter, std::uint64_t generation,
                                      std::uint64_t first, std::string_view data) {
    begin_whole_record(
        jf::kAgeWords, journal_encode::age_words_body_bytes(data), [&](unsigned char* body) {
            journal_encode::put_age_words_body(body, filter, generation, first, data);
        });
}

void JournalAppender::publish_thread() noexcept {
    if (transaction() != nullptr) return;  // held back in order, appended whole
    LocalBuffer& local = local_buffer();
    if (local.bytes.load(std::memory_order_relaxed) == 0) return;
    {
        std::lock_guard lock(handoff_.mutex);
        std::lock_guard local_lock(local.mutex);
        take_local(local);
    }
    // end_data() woke the writer (or scheduled this thread's write-through)
    // for these records already.
}

void JournalAppender::end_data() noexcept {
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
            const std::size_t body_bytes = 12 + std::size_t{local->entries} * local->entry_bytes;
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
    if (held >= Journal::kLocalFlushBytes) {
        std::lock_guard lock(handoff_.mutex);
        std::lock_guard local_lock(local->mutex);
        take_local(*local);
    }
    if (turn != nullptr) {
        turn->schedule_write_through();
    } else {
        handoff_.wake_writer();
    }
}

}  // namespace bloomery::persist
