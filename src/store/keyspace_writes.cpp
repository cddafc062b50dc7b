// store::Keyspace's changes to keys: linking filters, deleting, deadlines,
// renames and FLUSHALL, each producing its record (MutationLog) in one place.

#include <algorithm>
#include <deque>
#include <new>

#include "bloomery/bloom/age_header.hpp"
#include "bloomery/bloom/dump.hpp"
#include "bloomery/store/age_shifter.hpp"
#include "bloomery/store/keyspace.hpp"
#include "keyspace_write.hpp"
#include "shard_table_node.hpp"
#include "shard_write.hpp"

namespace bloomery::store {

namespace {

// Appends `head` and then `rest`, in order, as one chain (one append: they
// enter the stream together). Cannot fail.
void append_chain(MutationLog* log, EncodedRecord head, std::vector<EncodedRecord>& rest) noexcept {
    RecordBlock* tail = head.get();
    for (EncodedRecord& record : rest) {
        while (tail->next != nullptr) tail = tail->next;
        tail->next = record.release();
    }
    rest.clear();
    log->append(std::move(head));
}

// A filter's bits as CHUNK records (Keyspace::restore()): bloom::dump_chunk's
// data chunks in order, those of zero words left out.
std::vector<EncodedRecord> encode_bits(MutationLog& log, const bloom::ScalableFilter& filter) {
    std::vector<EncodedRecord> records;
    for (std::int64_t iter = 1;;) {
        const bloom::DumpChunk chunk =
            bloom::dump_chunk(filter, iter, Keyspace::kRestoreChunkBytes);
        if (chunk.next_iter == 0) break;
        const std::string_view bits = bloom::chunk_bits(filter, chunk.data);
        if (std::any_of(bits.begin(), bits.end(), [](char c) { return c != 0; })) {
            records.push_back(log.encode_chunk(filter, chunk.next_iter, chunk.data));
        }
        iter = chunk.next_iter;
    }
    return records;
}

// An expiring filter's words as AGE-WORDS records at its generation, chunks
// of zero words left out.
std::vector<EncodedRecord> encode_age_bits(MutationLog& log, const bloom::AgeFilter& filter) {
    std::vector<EncodedRecord> records;
    const std::uint64_t chunks = bloom::age_chunks(filter);
    for (std::uint64_t j = bloom::next_age_chunk(filter, 0); j < chunks;
         j = bloom::next_age_chunk(filter, j + 1)) {
        records.push_back(log.encode_age_words(
            filter, filter.generation(), j * bloom::kAgeChunkWords, bloom::age_chunk(filter, j)));
    }
    return records;
}

// A new Cuckoo filter's CREATE record and, with `with_slots`, its slots as
// fill records (CF.SCANDUMP's chunks, those of zero bytes left out).
EncodedRecord encode_cuckoo(MutationLog& log, std::string_view key,
                            const cuckoo::CuckooObject& object, std::int64_t expire_at_ms,
                            bool with_slots, std::vector<EncodedRecord>& fills) {
    const cuckoo::CuckooObject::Locked locked = object.lock();
    const cuckoo::CuckooFilter& filter = locked.filter();
    EncodedRecord created =
        log.encode_cuckoo_created(key, filter, object.id(), locked.seq(), expire_at_ms);
    if (!with_slots) return created;
    for (std::int64_t pos = 1;;) {
        const cuckoo::DumpChunk chunk = filter.scandump(pos, Keyspace::kRestoreChunkBytes);
        if (chunk.next == 0) break;
        if (std::any_of(chunk.data.begin(), chunk.data.end(), [](char c) { return c != 0; })) {
            EncodedRecord fill = log.reserve_cuckoo_change(0, chunk.data.size());
            log.seal_cuckoo_change(*fill, object.id(), 0,
                                   CuckooChange::chunk(chunk.next, chunk.data));
            fills.push_back(std::move(fill));
        }
        pos = chunk.next;
    }
    return created;
}

}  // namespace

bool Keyspace::restore(std::string_view key, ValueRef value, const RestoreOptions& options) {
    return store(key, std::move(value),
                 {options.expire_at_ms, options.if_live, Record::create_and_bits,
                  access_word(options.idle_seconds, options.frequency)});
}

bool Keyspace::insert_new(std::string_view key, ValueRef value, std::int64_t expire_at_ms) {
    return store(
        key, std::move(value),
        {expire_at_ms, IfLive::keep, Record::create, access_word(0, key_access::kInitialCount)});
}

void Keyspace::put(std::string_view key, ValueRef value, std::int64_t expire_at_ms) {
    store(
        key, std::move(value),
        {expire_at_ms, IfLive::replace, Record::create, access_word(0, key_access::kInitialCount)});
}

bool Keyspace::store(std::string_view key, ValueRef value, const Link& how) {
    // Records are encoded before the change they describe (here, or under
    // the lock once it is known which): once the key changed, nothing may
    // fail to record it.
    MutationLog* log = mutation_log();
    EncodedRecord created;
    // The filter is not shared yet: its bits cannot change under the copy.
    std::vector<EncodedRecord> bits;
    if (log != nullptr) {
        const bool with_bits = how.record == Record::create_and_bits;
        if (const bloom::ScalableFilter* filter = value.bloom_or_null()) {
            created = log->encode_created(key, *filter, how.expire_at_ms);
            if (with_bits) bits = encode_bits(*log, *filter);
        } else if (const bloom::AgeFilter* age = value.age_or_null()) {
            created = log->encode_age_created(key, *age, how.expire_at_ms);
            if (with_bits) bits = encode_age_bits(*log, *age);
        } else {
            created = encode_cuckoo(*log, key, value.cuckoo(), how.expire_at_ms, with_bits, bits);
        }
    }
    // A time window linked is watched by the shifter (when one leads).
    bloom::AgeFilter* const linked_age = value.age_or_null();
    AgeShifter* const shifter = linked_age != nullptr ? age_shifter() : nullptr;
    KeyWrite write(*this, key);
    // Under the lock, so no snapshot cut falls between the stamp and the
    // link: the new filter owes nothing to a snapshot taken before.
    if (const bloom::ScalableFilter* filter = value.bloom_or_null()) {
        filter->set_count_stamp(snapshot_counts_.current_stamp());
    } else if (const bloom::AgeFilter* age = value.age_or_null()) {
        age->set_count_stamp(snapshot_counts_.current_stamp());
    }
    reserve_deadline(write.shard, how.expire_at_ms);
    const std::size_t slot = write.find();
    if (slot == ShardTable::kNotFound) {
        Node* node = table_.make_node(key, std::move(value), how.expire_at_ms, how.accessed);
        try {
            link(write.shard, node, write.hash, write.garbage);
        } catch (...) {
            table_.free_node(node);
            throw;
        }
        if (created) append_chain(log, std::move(created), bits);
        if (shifter != nullptr) shifter->track(*linked_age);
        return true;
    }
    Node* node = write.node_at(slot);
    const bool expired = write.lapsed(*node);
    if (!expired && how.if_live == IfLive::keep) return false;
    EncodedRecord deleted = log != nullptr ? log->encode_deleted(key) : nullptr;
    // A new node, not a new value in the old one: lookups read a linked
    // node's value without a lock.
    Node* fresh = table_.make_node(key, std::move(value), how.expire_at_ms, how.accessed);
    if (expired) expiry_.count_expired();
    relink(write.shard, slot, fresh, write.hash, write.garbage);
    if (log != nullptr) {
        // CREATE replaces the key on replay; the DEL says the old filter went
        // (its later adds are dropped, as its bits).
        log->append(std::move(deleted));
        append_chain(log, std::move(created), bits);
    }
    if (shifter != nullptr) shifter->track(*linked_age);
    return true;
}

Keyspace::EraseIf Keyspace::erase_if_unchanged(std::string_view key,
                                               const cuckoo::CuckooObject* filter,
                                               std::uint64_t changes) {
    KeyWrite write(*this, key);
    const std::size_t slot = write.find();
    if (slot == ShardTable::kNotFound) return EraseIf::gone;
    const Node* node = write.node_at(slot);
    const bool expired = write.lapsed(*node);
    if (!expired) {
        if (node->value.cuckoo_or_null() != filter) return EraseIf::changed;
        // Under the filter's lock: no change is in flight while it goes.
        const cuckoo::CuckooObject::Locked locked = filter->lock();
        if (locked.seq() != changes) return EraseIf::changed;
        EncodedRecord record = write.encode_deleted();
        write.unlink(slot, KeyWrite::Why::deleted);
        write.append(std::move(record));
        return EraseIf::erased;
    }
    EncodedRecord record = write.encode_deleted();
    write.unlink(slot, KeyWrite::Why::expired);
    write.append(std::move(record));
    return EraseIf::gone;
}

bool Keyspace::erase(std::string_view key) {
    KeyWrite write(*this, key);
    const std::size_t slot = write.find();
    if (slot == ShardTable::kNotFound) return false;
    EncodedRecord record = write.encode_deleted();
    const bool live = !write.lapsed(*write.node_at(slot));
    write.unlink(slot, live ? KeyWrite::Why::deleted : KeyWrite::Why::expired);
    // An expired key goes as a DEL too (reap()).
    write.append(std::move(record));
    return live;
}

Keyspace::EraseIf Keyspace::erase_if_unchanged(std::string_view key,
                                               const bloom::ScalableFilter* filter,
                                               std::uint64_t items, std::size_t num_layers,
                                               std::uint64_t contents) {
    KeyWrite write(*this, key);
    const std::size_t slot = write.find();
    if (slot == ShardTable::kNotFound) return EraseIf::gone;
    const Node* node = write.node_at(slot);
    const bool expired = write.lapsed(*node);
    // Adds count items and growth adds layers, so a filter that took either
    // since it was copied differs here. (An add in flight, its room taken
    // and its bits not yet all set, may still land in it after this: it
    // raced the delete, as it would race a DEL.)
    if (!expired && (node->value.bloom_or_null() != filter || filter->items() != items ||
                     filter->num_layers() != num_layers)) {
        return EraseIf::changed;
    }
    if (!expired && filter->counting()) {
        const std::unique_lock serial = filter->serialize_changes();
        if (filter->content_hash() != contents) return EraseIf::changed;
    }
    EncodedRecord record = write.encode_deleted();
    write.unlink(slot, expired ? KeyWrite::Why::expired : KeyWrite::Why::deleted);
    write.append(std::move(record));
    return expired ? EraseIf::gone : EraseIf::erased;
}

std::optional<bool> Keyspace::update_expiry(
    std::string_view key, const std::function<std::optional<std::int64_t>(std::int64_t)>& decide) {
    KeyWrite write(*this, key);
    const std::size_t slot = write.find();
    if (slot == ShardTable::kNotFound) return std::nullopt;
    Node* node = write.node_at(slot);
    if (write.lapsed(*node)) {
        EncodedRecord deleted = write.encode_deleted();
        write.unlink(slot, KeyWrite::Why::expired);
        write.append(std::move(deleted));
        return std::nullopt;
    }
    const std::optional<std::int64_t> deadline = decide(node->deadline());
    if (!deadline) return false;
    if (*deadline != 0 && *deadline <= now_ms() && !expiry_.following()) {
        // A deadline already passed deletes the key (Redis's EXPIRE does);
        // following, the record is redone as it was decided.
        EncodedRecord deleted = write.encode_deleted();
        write.unlink(slot, KeyWrite::Why::deleted);
        write.append(std::move(deleted));
        return true;
    }
    // Encoded before the deadline changes (it was only known now).
    EncodedRecord record =
        write.log != nullptr ? write.log->encode_expiry(key, *deadline) : nullptr;
    const std::int64_t from = node->deadline();
    if (from == 0) reserve_deadline(write.shard, *deadline);
    expiry_.change(table_.index_of(write.shard), reinterpret_cast<std::uintptr_t>(node), from,
                   *deadline);
    node->expire_at_ms.store(*deadline, std::memory_order_relaxed);
    write.append(std::move(record));
    return true;
}

bool Keyspace::set_expiry(std::string_view key, std::int64_t expire_at_ms) {
    return update_expiry(key, [&](std::int64_t) { return expire_at_ms; }).has_value();
}

bool Keyspace::rename(std::string_view from, std::string_view to) {
    return move_key(from, to, IfLive::replace) != Moved::missing;
}

std::optional<bool> Keyspace::rename_if_absent(std::string_view from, std::string_view to) {
    switch (move_key(from, to, IfLive::keep)) {
        case Moved::missing:
            return std::nullopt;
        case Moved::exists:
            return false;
        case Moved::moved:
            break;
    }
    return true;
}

Keyspace::Moved Keyspace::move_key(std::string_view from, std::string_view to, IfLive if_live) {
    const std::uint64_t from_hash = ShardTable::hash_key(from);
    const std::uint64_t to_hash = ShardTable::hash_key(to);
    Shard& source = table_.shard_for(from_hash);
    Shard& target = table_.shard_for(to_hash);
    Garbage garbage;
    garbage.nodes.reserve(2);
    garbage.tables.reserve(2);
    MutationLog* log = mutation_log();
    Moved result = Moved::missing;
    {
        // Both shards in index order, so two opposite renames cannot
        // deadlock; neither waits for a transaction while holding the
        // other's lock.
        Shard* const both[] = {std::min(&source, &target), std::max(&source, &target)};
        std::deque<ShardWrite> writes;
        lock_outside_transactions(writes, std::span(both, &source == &target ? 1 : 2),
                                  [](std::deque<ShardWrite>& locks, Shard* shard) {
                                      locks.emplace_back(*shard, ShardWrite::kIgnoreGate);
                                  });
        const std::size_t slot = table_.find_slot(source, from, from_hash);
        if (slot == ShardTable::kNotFound) return Moved::missing;
        Node* node = table_.node_at(source, slot);
        const std::size_t existing = table_.find_slot(target, to, to_hash);
        if (expiry_.lapsed(node->deadline(), now_ms())) {
            EncodedRecord deleted = log != nullptr ? log->encode_deleted(from) : nullptr;
            unlink(source, slot, garbage);
            expiry_.count_expired();
            if (deleted) log->append(std::move(deleted));
        } else if (from == to) {
            // RENAME keeps the key; RENAMENX finds it there (Redis: 0).
            result = if_live == IfLive::replace ? Moved::moved : Moved::exists;
        } else if (if_live == IfLive::keep && existing != ShardTable::kNotFound &&
                   !expiry_.lapsed(table_.node_at(target, existing)->deadline(), now_ms())) {
            result = Moved::exists;
        } else {
            // The record and the new node are made first: if either cannot
            // be allocated nothing has changed.
            EncodedRecord renamed = log != nullptr ? log->encode_renamed(from, to) : nullptr;
            reserve_deadline(target, node->deadline());
            // As Redis's RENAME keeps the value object, its idle time stays.
            Node* moved = table_.make_node(to, node->value, node->deadline(),
                                           node->accessed.load(std::memory_order_relaxed));
            // `existing` is where `to` is (found above; nothing moved since).
            if (existing != ShardTable::kNotFound) {
                relink(target, existing, moved, to_hash, garbage);
            } else {
                try {
                    link(target, moved, to_hash, garbage);
                } catch (...) {
                    table_.free_node(moved);
                    writes.clear();
                    table_.dispose(garbage);
                    throw;
                }
            }
            // Found again: inserting into the same shard may have rebuilt the table.
            unlink(source, table_.find_slot(source, from, from_hash), garbage);
            result = Moved::moved;
            if (renamed) log->append(std::move(renamed));
        }
    }
    table_.dispose(garbage);
    return result;
}

std::size_t Keyspace::clear() {
    Garbage garbage;
    garbage.tables_and_nodes.reserve(table_.num_shards());
    std::size_t live = 0;
    MutationLog* log = mutation_log();
    EncodedRecord record = log != nullptr ? log->encode_cleared() : nullptr;
    {
        // Every shard at once, so the keyspace empties at one instant.
        std::deque<ShardWrite> writes;
        lock_outside_transactions(writes, table_.shards(),
                                  [](std::deque<ShardWrite>& locks, Shard& shard) {
                                      locks.emplace_back(shard, ShardWrite::kIgnoreGate);
                                  });
        const std::int64_t now = now_ms();
        for (Shard& shard : table_.shards()) {
            std::int64_t items = 0;
            table_.for_each(shard, [&](const Node& node) {
                if (!node.expired(now)) ++live;
                if (const bloom::ScalableFilter* filter = node.value.bloom_or_null()) {
                    items += static_cast<std::int64_t>(filter->items());
                }
            });
            shard.linked_items.fetch_sub(items, std::memory_order_relaxed);
            expiry_.clear(table_.index_of(shard));
            table_.detach(shard, garbage);
        }
        slot_counts_.clear();
        if (record) log->append(std::move(record));
    }
    // Freed with no lock held (once no lookup can see them): a million keys
    // or a terabyte of filters take a while, and other clients may already
    // create new keys meanwhile.
    table_.dispose(garbage);
    return live;
}

}  // namespace bloomery::store
