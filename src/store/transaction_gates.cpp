// store::Transaction and the gates that hold shards for one thread.

#include "bloomery/store/transaction_gates.hpp"

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "bloomery/store/epoch.hpp"

namespace bloomery::store {

namespace {

// The token of the transaction this thread runs; 0 outside one.
thread_local std::uint64_t t_token = 0;
std::atomic<std::uint64_t> g_next_token{1};

}  // namespace

std::uint64_t ShardGates::this_thread_token() {
    return t_token;
}

void ShardGates::wait(const Shard& shard) {
    // The transaction holds transaction_mutex for as long as it holds the
    // gate: taking it waits for the end without spinning.
    while (closed(shard)) {
        std::lock_guard held(shard.transaction_mutex);
    }
}

std::shared_lock<std::shared_mutex> ShardGates::read(const Shard& shard) {
    std::shared_lock lock(shard.mutex);
    while (closed(shard)) {
        lock.unlock();
        wait(shard);
        lock.lock();
    }
    return lock;
}

Transaction Transaction::begin(ShardTable& table, std::vector<std::uint32_t> shards,
                               MutationLog* log) {
    if (t_token != 0) throw std::logic_error("a transaction inside a transaction");
    Transaction transaction;
    transaction.shards_ = std::move(shards);
    // Everything that can fail comes first: the journal's framing of the
    // unit is allocated before any shard is held.
    if (log != nullptr) log->begin_transaction();
    const std::uint64_t token = g_next_token.fetch_add(1, std::memory_order_relaxed);
    // In index order, as every transaction takes them: two transactions on
    // overlapping shards wait for each other, never in a cycle.
    for (std::uint32_t index : transaction.shards_) table.shard(index).transaction_mutex.lock();
    for (std::uint32_t index : transaction.shards_) {
        table.shard(index).gate.store(token, std::memory_order_seq_cst);
    }
    // Every access that began before the gates closed ends before this
    // thread goes on: lookups hold an epoch guard (Keyspace::with_filter
    // checks the gate after entering it, seq_cst both ways, as an unlink and
    // a lookup in epoch.hpp), locked accesses hold the shard's lock (and
    // check the gate under it). A lookup takes a microsecond or so: spin
    // that long before sleeping (Keyspace::wait_for_readers() sleeps 50 µs
    // at once, which would be most of a small transaction's latency).
    const std::uint64_t stamp = epoch_retire_stamp();
    for (int round = 0; !epoch_passed(stamp); ++round) {
        if (round < 64) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    }
    for (std::uint32_t index : transaction.shards_) {
        table.shard(index).mutex.lock();
        table.shard(index).mutex.unlock();
    }
    t_token = token;
    transaction.table_ = &table;
    transaction.log_ = log;
    return transaction;
}

Transaction& Transaction::operator=(Transaction&& other) noexcept {
    if (this != &other) {
        end();
        table_ = std::exchange(other.table_, nullptr);
        shards_ = std::move(other.shards_);
        log_ = std::exchange(other.log_, nullptr);
    }
    return *this;
}

void Transaction::end() noexcept {
    if (table_ == nullptr) return;
    // Its records enter the journal's stream while the shards are still
    // held: whoever sees its changes next finds them recorded.
    if (log_ != nullptr) log_->end_transaction();
    t_token = 0;
    for (std::uint32_t index : shards_)
        table_->shard(index).gate.store(0, std::memory_order_seq_cst);
    for (std::uint32_t index : shards_) table_->shard(index).transaction_mutex.unlock();
    table_ = nullptr;
    log_ = nullptr;
    shards_.clear();
}

}  // namespace bloomery::store
