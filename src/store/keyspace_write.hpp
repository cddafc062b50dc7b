#pragma once
// One change to one key (store::Keyspace's writes): the preamble every such
// change shares. Private to the store.

#include <string_view>

#include "bloomery/store/keyspace.hpp"
#include "shard_table_node.hpp"
#include "shard_write.hpp"

namespace bloomery::store {

// The key hashed and its shard found, room reserved for what the change may
// unlink (a node, and a table a shrink replaces: once the key changed,
// nothing may fail), the journal the change is told to, and the shard's
// exclusive lock (ShardWrite). When it ends, on every path, the lock is
// released first and what was unlinked is then handed to reclamation.
class Keyspace::KeyWrite {
public:
    // Waits for a transaction of another thread that holds the shard.
    KeyWrite(Keyspace& keyspace, std::string_view name)
        : KeyWrite(keyspace, name, ShardTable::hash_key(name)) {}
    // Does not wait (a change made inside a lookup's epoch guard): the
    // caller checks gated() and backs off.
    KeyWrite(Keyspace& keyspace, std::string_view name, std::uint64_t name_hash,
             ShardWrite::IgnoreGate ignore)
        : keyspace_(keyspace),
          key(name),
          hash(name_hash),
          shard(keyspace.table_.shard_for(name_hash)),
          garbage(reserved()),
          log(keyspace.mutation_log()),
          lock_(shard, ignore) {}
    ~KeyWrite() {
        lock_.unlock();
        keyspace_.table_.dispose(garbage);
    }
    KeyWrite(const KeyWrite&) = delete;
    KeyWrite& operator=(const KeyWrite&) = delete;

    // Whether a transaction of another thread holds the shard (only with
    // kIgnoreGate).
    bool gated() const { return lock_.gated(); }
    // Where the key is, or ShardTable::kNotFound.
    std::size_t find() const { return keyspace_.table_.find_slot(shard, key, hash); }
    Node* node_at(std::size_t slot) const { return keyspace_.table_.node_at(shard, slot); }
    // Whether the node at `slot` is gone for a write (ExpiryIndex::lapsed).
    bool lapsed(const Node& node) const {
        return keyspace_.expiry_.lapsed(node.deadline(), now_ms());
    }
    // The key's DEL record (null without a journal). Throws std::bad_alloc.
    EncodedRecord encode_deleted() const {
        return log != nullptr ? log->encode_deleted(key) : nullptr;
    }
    // Appends `record` (if any) to the journal; cannot fail.
    void append(EncodedRecord record) const noexcept {
        if (record) log->append(std::move(record));
    }
    // Unlinks the key at `slot`, counting it expired if `expired`.
    enum class Why { deleted, expired };
    void unlink(std::size_t slot, Why why) {
        keyspace_.unlink(shard, slot, garbage);
        if (why == Why::expired) keyspace_.expiry_.count_expired();
    }

private:
    KeyWrite(Keyspace& keyspace, std::string_view name, std::uint64_t name_hash)
        : keyspace_(keyspace),
          key(name),
          hash(name_hash),
          shard(keyspace.table_.shard_for(name_hash)),
          garbage(reserved()),
          log(keyspace.mutation_log()),
          lock_(shard) {}
    static Garbage reserved() {
        Garbage garbage;
        garbage.nodes.reserve(1);
        garbage.tables.reserve(1);
        return garbage;
    }

    Keyspace& keyspace_;

public:
    const std::string_view key;
    const std::uint64_t hash;
    Shard& shard;
    Garbage garbage;
    MutationLog* const log;

private:
    ShardWrite lock_;
};

}  // namespace bloomery::store
