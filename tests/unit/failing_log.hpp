#pragma once
// Fault injection for the write path: a store::MutationLog that forwards to
// a journal but throws std::bad_alloc from its next allocating calls on
// demand, as a journal does when memory runs out.

#include <functional>
#include <new>

#include "bloomery/persist/journal.hpp"

namespace bloomery::persist::testing {

// A log that fails its allocations on demand, forwarding to a journal
// otherwise: what the journal does when memory runs out.
class FailingLog final : public store::MutationLog {
public:
    explicit FailingLog(Journal& journal) : journal_(journal) {}
    int fail_next = 0;  // how many of the next allocating calls throw
    store::EncodedRecord encode_created(std::string_view key, const bloom::ScalableFilter& filter,
                                        std::int64_t at) override {
        maybe_fail();
        return journal_.encode_created(key, filter, at);
    }
    store::EncodedRecord encode_deleted(std::string_view key) override {
        maybe_fail();
        return journal_.encode_deleted(key);
    }
    store::EncodedRecord encode_renamed(std::string_view from, std::string_view to) override {
        maybe_fail();
        return journal_.encode_renamed(from, to);
    }
    store::EncodedRecord encode_expiry(std::string_view key, std::int64_t at) override {
        maybe_fail();
        return journal_.encode_expiry(key, at);
    }
    store::EncodedRecord encode_cleared() override {
        maybe_fail();
        return journal_.encode_cleared();
    }
    store::EncodedRecord encode_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                                      std::string_view data) override {
        maybe_fail();
        return journal_.encode_chunk(filter, iter, data);
    }
    store::EncodedRecord encode_cuckoo_created(std::string_view key,
                                               const cuckoo::CuckooFilter& filter, std::uint64_t id,
                                               std::uint64_t seq, std::int64_t at) override {
        maybe_fail();
        return journal_.encode_cuckoo_created(key, filter, id, seq, at);
    }
    store::EncodedRecord reserve_cuckoo_change(std::size_t moves, std::size_t bytes) override {
        maybe_fail();
        return journal_.reserve_cuckoo_change(moves, bytes);
    }
    void seal_cuckoo_change(store::RecordBlock& record, std::uint64_t id, std::uint64_t seq,
                            const store::CuckooChange& change) noexcept override {
        journal_.seal_cuckoo_change(record, id, seq, change);
    }
    void append(store::EncodedRecord record) noexcept override {
        journal_.append(std::move(record));
    }
    bloom::AddRecorder& begin_adds(const bloom::ScalableFilter& filter, std::size_t n) override {
        maybe_fail();
        return journal_.begin_adds(filter, n);
    }
    void begin_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                     std::string_view data) override {
        maybe_fail();
        journal_.begin_chunk(filter, iter, data);
    }
    store::EncodedRecord encode_age_created(std::string_view key, const bloom::AgeFilter& filter,
                                            std::int64_t at) override {
        maybe_fail();
        return journal_.encode_age_created(key, filter, at);
    }
    bloom::AgeRecorder& begin_age_adds(const bloom::AgeFilter& filter, std::size_t n) override {
        maybe_fail();
        return journal_.begin_age_adds(filter, n);
    }
    store::EncodedRecord encode_age_words(const bloom::AgeFilter& filter, std::uint64_t generation,
                                          std::uint64_t first, std::string_view data) override {
        maybe_fail();
        return journal_.encode_age_words(filter, generation, first, data);
    }
    void begin_age_words(const bloom::AgeFilter& filter, std::uint64_t generation,
                         std::uint64_t first, std::string_view data) override {
        maybe_fail();
        journal_.begin_age_words(filter, generation, first, data);
    }
    void begin_age_shift(const bloom::AgeFilter& filter, std::uint64_t generation,
                         std::uint64_t ms) override {
        maybe_fail();
        journal_.begin_age_shift(filter, generation, ms);
    }
    bloom::AddRecorder& begin_removes(const bloom::ScalableFilter& filter, std::size_t n) override {
        maybe_fail();
        return journal_.begin_removes(filter, n);
    }
    void end_data() noexcept override { journal_.end_data(); }
    void publish_thread() noexcept override { journal_.publish_thread(); }
    void begin_transaction() override {
        maybe_fail();
        journal_.begin_transaction();
    }
    void end_transaction() noexcept override { journal_.end_transaction(); }
    std::uint64_t log_id() const override { return journal_.log_id(); }
    std::uint64_t position() override { return journal_.position(); }
    std::uint64_t cut(const std::function<void()>& at_cut) override { return journal_.cut(at_cut); }

private:
    void maybe_fail() {
        if (fail_next > 0) {
            --fail_next;
            throw std::bad_alloc();
        }
    }
    Journal& journal_;
};

}  // namespace bloomery::persist::testing
