#pragma once
// A list of record blocks, in stream order: what the journal's appender
// holds until the writer takes it (journal_appender.hpp), and what the
// writer holds until it is written and durable (journal_writer.hpp).

#include <cstdint>

#include "bloomery/core/memory.hpp"
#include "bloomery/store/mutation_log.hpp"

namespace bloomery::persist {

struct BlockList {
    store::RecordBlock* head = nullptr;
    store::RecordBlock* tail = nullptr;
    std::uint64_t bytes = 0;

    bool empty() const { return head == nullptr; }

    // Appends one block or a chain.
    void push(store::RecordBlock* block) noexcept {
        while (block != nullptr) {
            store::RecordBlock* next = block->next;
            block->next = nullptr;
            bytes += block->bytes.size();
            if (tail == nullptr) {
                head = tail = block;
            } else {
                tail->next = block;
                tail = block;
            }
            block = next;
        }
    }

    // Moves `other`'s blocks after ours.
    void splice(BlockList& other) noexcept {
        if (other.head == nullptr) return;
        if (tail == nullptr) {
            head = other.head;
        } else {
            tail->next = other.head;
        }
        tail = other.tail;
        bytes += other.bytes;
        other.head = other.tail = nullptr;
        other.bytes = 0;
    }

    // Frees every block, and gives back the memory they were counted as.
    void clear() noexcept {
        std::int64_t freed = 0;
        while (head != nullptr) {
            store::RecordBlock* next = head->next;
            freed += static_cast<std::int64_t>(head->bytes.capacity());
            delete head;
            head = next;
        }
        tail = nullptr;
        bytes = 0;
        if (freed != 0) core::memory_add(core::MemoryUse::other, -freed);
    }
};

}  // namespace bloomery::persist
