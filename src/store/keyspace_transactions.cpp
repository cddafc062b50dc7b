// store::Keyspace's transactions: the gates that hold shards for one thread,
// and what WATCH compares.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <utility>

#include "bloomery/store/keyspace.hpp"
#include "keyspace_table.hpp"

namespace bloomery::store {

namespace {

// The token of the transaction this thread runs; 0 outside one.
thread_local std::uint64_t t_token = 0;
std::atomic<std::uint64_t> g_next_token{1};

}  // namespace

std::uint64_t Keyspace::transaction_token() {
    return t_token;
}

void Keyspace::wait_for_gate(const Shard& shard) {
    // The transaction holds transaction_mutex for as long as it holds the
    // gate: taking it waits for the end without spinning.
    while (gated(shard)) {
        std::lock_guard wait(shard.transaction_mutex);
    }
}

std::shared_lock<std::shared_mutex> Keyspace::read_shard(const Shard& shard) const {
    std::shared_lock lock(shard.mutex);
    while (gated(shard)) {
        lock.unlock();
        wait_for_gate(shard);
        lock.lock();
    }
    return lock;
}

Keyspace::Transaction Keyspace::begin_transaction(std::span<const std::string_view> keys,
                                                  TransactionScope scope) {
    if (t_token != 0) throw std::logic_error("a transaction inside a transaction");
    Transaction transaction;
    std::vector<std::uint32_t>& held = transaction.shards_;
    if (scope == TransactionScope::every_shard) {
        held.resize(shards_.size());
        for (std::uint32_t i = 0; i < held.size(); ++i) held[i] = i;
    } else {
        held.reserve(keys.size());
        for (std::string_view key : keys) {
            held.push_back(static_cast<std::uint32_t>(&shard_for(hash_key(key)) - shards_.data()));
        }
        std::sort(held.begin(), held.end());
        held.erase(std::unique(held.begin(), held.end()), held.end());
    }
    MutationLog* log = mutation_log();
    // Everything that can fail comes first: the journal's framing of the
    // unit is allocated before any shard is held.
    if (log != nullptr) log->begin_transaction();
    const std::uint64_t token = g_next_token.fetch_add(1, std::memory_order_relaxed);
    // In index order, as every transaction takes them: two transactions on
    // overlapping shards wait for each other, never in a cycle.
    for (std::uint32_t index : held) shards_[index].transaction_mutex.lock();
    for (std::uint32_t index : held) shards_[index].gate.store(token, std::memory_order_seq_cst);
    // Every access that began before the gates closed ends before this
    // thread goes on: lookups hold an epoch guard (with_filter checks the
    // gate after entering it, seq_cst both ways, as an unlink and a lookup
    // in epoch.hpp), locked accesses hold the shard's lock (and check the
    // gate under it). A lookup takes a microsecond or so: spin that long
    // before sleeping (Keyspace::wait_for_readers() sleeps 50 µs at once,
    // which would be most of a small transaction's latency).
    const std::uint64_t stamp = epoch_retire_stamp();
    for (int round = 0; !epoch_passed(stamp); ++round) {
        if (round < 64) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    }
    for (std::uint32_t index : held) {
        shards_[index].mutex.lock();
        shards_[index].mutex.unlock();
    }
    t_token = token;
    transaction.keyspace_ = this;
    transaction.log_ = log;
    return transaction;
}

Keyspace::Transaction& Keyspace::Transaction::operator=(Transaction&& other) noexcept {
    if (this != &other) {
        end();
        keyspace_ = std::exchange(other.keyspace_, nullptr);
        shards_ = std::move(other.shards_);
        log_ = std::exchange(other.log_, nullptr);
    }
    return *this;
}

void Keyspace::Transaction::end() noexcept {
    if (keyspace_ == nullptr) return;
    // Its records enter the journal's stream while the shards are still
    // held: whoever sees its changes next finds them recorded.
    if (log_ != nullptr) log_->end_transaction();
    t_token = 0;
    for (std::uint32_t index : shards_) {
        keyspace_->shards_[index].gate.store(0, std::memory_order_seq_cst);
    }
    for (std::uint32_t index : shards_) keyspace_->shards_[index].transaction_mutex.unlock();
    keyspace_ = nullptr;
    log_ = nullptr;
    shards_.clear();
}

Keyspace::WatchStamp Keyspace::watch_stamp(std::string_view key) const {
    WatchStamp stamp;
    const std::uint64_t hash = hash_key(key);
    const Shard& shard = shard_for(hash);
    std::shared_lock lock = read_shard(shard);
    const bloom::ScalableFilter* filter = find_live(shard, lock, key, hash);
    if (filter == nullptr) return stamp;
    stamp.exists = true;
    stamp.filter_id = filter->id();
    stamp.expire_at_ms = node_at(shard, find_slot(shard, key, hash))->deadline();
    stamp.items = filter->items();
    stamp.chunks = chunks_loaded_.load(std::memory_order_relaxed);
    return stamp;
}

}  // namespace bloomery::store
