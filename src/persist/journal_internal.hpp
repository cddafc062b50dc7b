#pragma once
// What the journal's files share (journal.cpp, journal_append.cpp,
// journal_writer.cpp): each thread's buffer, and the writer's clock.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/persist/journal.hpp"
#include "journal_format.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

// Milliseconds of the steady clock: when the journal last fdatasynced.
inline std::int64_t steady_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// One thread's records not yet in the stream: a scope's ADD record being
// built, or whole records waiting for the writer. Its mutex is held by the
// owning thread for a whole data scope, and taken by the writer, position()
// and cut() to move its records into the stream.
class Journal::LocalBuffer final : public bloom::AddRecorder {
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
    unsigned char* next_entry = nullptr;  // where the next ADD entry goes

    bool record(std::uint32_t layer, const bloom::ItemHash& hash) noexcept override {
        if (scope != Scope::adds || entries == max_entries || layer > 255) return false;
        // Into the space begin_adds() sized for the whole batch: no
        // allocation, and a plain store per field (appending 17 bytes to the
        // string cost BF.MADD 46 more instructions per item).
        unsigned char* entry = next_entry;
        entry[0] = static_cast<unsigned char>(layer);
        format::put_u64(entry + 1, hash.h1);
        format::put_u64(entry + 9, hash.h2);
        next_entry += journal_format::kAddEntryBytes;
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
            out.reserve(std::max(out.size() + more,
                                 std::min<std::size_t>(2 * out.capacity(), kLocalFlushBytes * 2)));
        }
        if (out.capacity() != charged) {
            core::memory_add(core::MemoryUse::other, static_cast<std::int64_t>(out.capacity()) -
                                                         static_cast<std::int64_t>(charged));
            charged = out.capacity();
        }
    }
};

// A transaction's records, held back from the stream until it ends
// (journal_append.cpp): its data records are built in a buffer of its own,
// which no writer, position() or cut() takes, then moved with its keyspace
// records into `held`, in the order made. Blocks in `held` are not counted
// in memory until appended.
struct Journal::Transaction {
    LocalBuffer buffer;
    BlockList held;  // the unit's records, in order
    // The unit's framing, allocated when it begins so that ending cannot fail.
    std::unique_ptr<store::RecordBlock> multi;
    std::unique_ptr<store::RecordBlock> exec;

    void hold(store::RecordBlock* block) noexcept { held.push(block); }
    ~Transaction() {
        // Not BlockList::clear(): held blocks were never counted in memory.
        while (held.head != nullptr) delete std::exchange(held.head, held.head->next);
        if (buffer.block != nullptr) {
            core::memory_add(core::MemoryUse::other, -static_cast<std::int64_t>(buffer.charged));
            delete buffer.block;
        }
    }
};

}  // namespace bloomery::persist
