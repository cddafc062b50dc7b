// store::Keyspace's write path: every change to the keys and their data,
// each producing its record (MutationLog) in one place.

#include "bloomery/store/keyspace.hpp"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <new>
#include <thread>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/core/key_slot.hpp"
#include "bloomery/core/memory.hpp"
#include "keyspace_table.hpp"

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

}  // namespace

bool Keyspace::restore(std::string_view key, FilterRef filter, std::int64_t expire_at_ms,
                       bool replace, std::int64_t idle_seconds, std::uint32_t frequency) {
    return store(key, std::move(filter), expire_at_ms, replace, /*with_bits=*/true, idle_seconds,
                 frequency);
}

bool Keyspace::store(std::string_view key, FilterRef filter, std::int64_t expire_at_ms,
                     bool replace_live, bool with_bits, std::int64_t idle_seconds,
                     std::uint32_t frequency) {
    const std::uint32_t accessed = access_word(idle_seconds, frequency);
    const std::uint64_t hash = hash_key(key);
    Shard& shard = shard_for(hash);
    Garbage garbage;
    garbage.nodes.reserve(1);
    garbage.tables.reserve(1);
    bool stored = true;
    // Records are encoded before the change they describe (here, or under
    // the lock once it is known which): once the key changed, nothing may
    // fail to record it.
    MutationLog* log = mutation_log();
    EncodedRecord created =
        log != nullptr ? log->encode_created(key, *filter, expire_at_ms) : nullptr;
    // The filter is not shared yet: its bits cannot change under the copy.
    std::vector<EncodedRecord> bits;
    if (with_bits && log != nullptr) bits = encode_bits(*log, *filter);
    {
        ShardWrite write(shard);
        // Under the lock, so no snapshot cut falls between the stamp and the
        // link: the new filter owes nothing to a snapshot taken before.
        filter->set_count_stamp(snapshot_counts_.current_stamp());
        reserve_expiring(shard, expire_at_ms != 0);
        const std::size_t slot = find_slot(shard, key, hash);
        if (slot == kNotFound) {
            Node* node = make_node(key, std::move(filter), expire_at_ms);
            node->accessed.store(accessed, std::memory_order_relaxed);
            try {
                insert_slot(shard, node, hash, garbage);
            } catch (...) {
                free_node(node);
                write.unlock();
                dispose(garbage);
                throw;
            }
            if (created) append_chain(log, std::move(created), bits);
        } else {
            Node* node = node_at(shard, slot);
            const bool expired = lapsed(node, now_ms());
            if (!expired && !replace_live) {
                stored = false;
            } else {
                EncodedRecord deleted = log != nullptr ? log->encode_deleted(key) : nullptr;
                // A new node, not a new filter in the old one: lookups read a
                // linked node's filter without a lock.
                Node* fresh = make_node(key, std::move(filter), expire_at_ms);
                fresh->accessed.store(accessed, std::memory_order_relaxed);
                if (expired) expired_keys_.fetch_add(1, std::memory_order_relaxed);
                replace_slot(shard, slot, fresh, hash);
                garbage.nodes.push_back(node);
                if (log != nullptr) {
                    // CREATE replaces the key on replay; the DEL says the old
                    // filter went (its later adds are dropped, as its bits).
                    log->append(std::move(deleted));
                    append_chain(log, std::move(created), bits);
                }
            }
        }
    }
    dispose(garbage);
    return stored;
}

bool Keyspace::insert_new(std::string_view key, FilterRef filter, std::int64_t expire_at_ms) {
    return store(key, std::move(filter), expire_at_ms, false);
}

void Keyspace::put(std::string_view key, FilterRef filter, std::int64_t expire_at_ms) {
    store(key, std::move(filter), expire_at_ms, true);
}

bool Keyspace::add_items(std::string_view key, std::span<const std::string_view> items,
                         const bloom::GrowthLimits& limits, const std::function<FilterRef()>* make,
                         std::vector<bloom::AddResult>& results) {
    results.resize(items.size());
    std::size_t done = 0;
    const auto run = [&](bloom::ScalableFilter& filter) {
        done = 0;
        MutationLog* log = mutation_log();
        constexpr std::size_t kBatch = bloom::ScalableFilter::kBatch;
        for (std::size_t first = 0; first < items.size(); first += kBatch) {
            const std::size_t n = std::min(kBatch, items.size() - first);
            const auto batch = items.subspan(first, n);
            const auto out = std::span(results).subspan(done, n);
            std::size_t stored;
            if (log == nullptr) {
                stored = filter.add_many(batch, limits, out);
            } else {
                bloom::AddRecorder* scope;
                try {
                    scope = &log->begin_adds(filter, n);
                } catch (const std::bad_alloc&) {
                    // No room for the batch's record: nothing of it changed.
                    results[done++] = bloom::AddResult::out_of_memory;
                    return;
                }
                DataScope close(log);
                // Before any room is taken (a small layer counts its
                // reservations): a running snapshot keeps the counts of its
                // cut.
                if (!snapshot_counts_.before_count_change(filter)) {
                    results[done++] = bloom::AddResult::out_of_memory;
                    return;
                }
                stored = filter.add_many(batch, limits, out, scope);
            }
            count_added(std::count(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(stored),
                                   bloom::AddResult::added));
            done += stored;
            if (stored < n) return;  // stopped at a full filter or an error
        }
    };
    bool found = true;
    try {
        if (make == nullptr) {
            found = with_filter(key, run);
        } else {
            found = with_filter_or_create(key, *make, run);
        }
        results.resize(done);
    } catch (const std::bad_alloc&) {
        // The key's record or entry could not be allocated (nothing of it
        // changed): the adds stop there, as at a full filter.
        results.resize(done);
        results.push_back(bloom::AddResult::out_of_memory);
    }
    return found;
}

Keyspace::ChunkStatus Keyspace::load_chunk(std::string_view key, std::int64_t iter,
                                           std::string_view data, std::string& error) {
    ChunkStatus status = ChunkStatus::loaded;
    const bool found = with_filter(key, [&](bloom::ScalableFilter& filter) {
        // Checked first: a refused chunk is not recorded (nor sent to
        // replicas), however large it was.
        const core::Result<bloom::ChunkTarget> target = bloom::check_chunk(filter, iter, data);
        if (!target) {
            error = target.error();
            status = ChunkStatus::refused;
            return;
        }
        MutationLog* log = mutation_log();
        if (log == nullptr) {
            bloom::apply_chunk(filter, *target);
        } else {
            log->begin_chunk(filter, iter, data);
            DataScope close(log);
            bloom::apply_chunk(filter, *target);
        }
        chunks_loaded_.fetch_add(1, std::memory_order_relaxed);
    });
    return found ? status : ChunkStatus::missing;
}

bool Keyspace::redo_adds(bloom::ScalableFilter& filter, std::span<const RecordedAdd> adds) {
    // Every layer first: a layer that cannot exist refuses the whole record
    // before anything changed, and growing cannot fail halfway through.
    std::uint32_t top = 0;
    for (const RecordedAdd& add : adds) top = std::max(top, add.layer);
    if (!adds.empty() && !filter.redo_layers(top)) return false;
    MutationLog* log = mutation_log();
    constexpr std::size_t kBatch = bloom::ScalableFilter::kBatch;
    for (std::size_t first = 0; first < adds.size(); first += kBatch) {
        const auto batch = adds.subspan(first, std::min(kBatch, adds.size() - first));
        if (log == nullptr) {
            for (const RecordedAdd& add : batch) filter.redo_add(add.layer, add.hash);
            count_added(static_cast<std::int64_t>(batch.size()));
            continue;
        }
        bloom::AddRecorder& scope = log->begin_adds(filter, batch.size());
        DataScope close(log);
        if (!snapshot_counts_.before_count_change(filter)) throw std::bad_alloc();
        for (const RecordedAdd& add : batch) {
            scope.record(add.layer, add.hash);
            filter.redo_add(add.layer, add.hash);
        }
    }
    count_added(static_cast<std::int64_t>(adds.size()));
    return true;
}

bool Keyspace::redo_chunk(bloom::ScalableFilter& filter, std::int64_t iter, std::string_view data,
                          std::string& error) {
    const core::Result<bloom::ChunkTarget> target = bloom::check_chunk(filter, iter, data);
    if (!target) {
        error = target.error();
        return false;
    }
    MutationLog* log = mutation_log();
    if (log == nullptr) {
        bloom::apply_chunk(filter, *target);
    } else {
        log->begin_chunk(filter, iter, data);
        DataScope close(log);
        bloom::apply_chunk(filter, *target);
    }
    chunks_loaded_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

bool Keyspace::erase(std::string_view key) {
    const std::uint64_t hash = hash_key(key);
    Shard& shard = shard_for(hash);
    Garbage garbage;
    garbage.nodes.reserve(1);
    garbage.tables.reserve(1);
    MutationLog* log = mutation_log();
    bool live;
    {
        ShardWrite write(shard);
        const std::size_t slot = find_slot(shard, key, hash);
        if (slot == kNotFound) return false;
        EncodedRecord record = log != nullptr ? log->encode_deleted(key) : nullptr;
        Node* node = node_at(shard, slot);
        live = !lapsed(node, now_ms());
        erase_slot(shard, slot, garbage);
        garbage.nodes.push_back(node);
        if (!live) expired_keys_.fetch_add(1, std::memory_order_relaxed);
        // An expired key goes as a DEL too (reap()).
        if (record) log->append(std::move(record));
    }
    dispose(garbage);
    return live;
}

Keyspace::EraseIf Keyspace::erase_if_unchanged(std::string_view key,
                                               const bloom::ScalableFilter* filter,
                                               std::uint64_t items, std::size_t num_layers) {
    const std::uint64_t hash = hash_key(key);
    Shard& shard = shard_for(hash);
    Garbage garbage;
    garbage.nodes.reserve(1);
    garbage.tables.reserve(1);
    MutationLog* log = mutation_log();
    EraseIf result;
    {
        ShardWrite write(shard);
        const std::size_t slot = find_slot(shard, key, hash);
        if (slot == kNotFound) return EraseIf::gone;
        Node* node = node_at(shard, slot);
        const bool expired = lapsed(node, now_ms());
        // Adds count items and growth adds layers, so a filter that took
        // either since it was copied differs here. (An add in flight, its
        // room taken and its bits not yet all set, may still land in it
        // after this: it raced the delete, as it would race a DEL.)
        if (!expired && (node->filter.get() != filter || node->filter->items() != items ||
                         node->filter->num_layers() != num_layers)) {
            return EraseIf::changed;
        }
        EncodedRecord record = log != nullptr ? log->encode_deleted(key) : nullptr;
        erase_slot(shard, slot, garbage);
        garbage.nodes.push_back(node);
        if (expired) expired_keys_.fetch_add(1, std::memory_order_relaxed);
        result = expired ? EraseIf::gone : EraseIf::erased;
        if (record) log->append(std::move(record));
    }
    dispose(garbage);
    return result;
}

bool Keyspace::contains(std::string_view key) const {
    const std::uint64_t hash = hash_key(key);
    const Shard& shard = shard_for(hash);
    std::shared_lock lock = read_shard(shard);
    return find_live(shard, lock, key, hash) != nullptr;
}

std::optional<KeySnapshot> Keyspace::get(std::string_view key) const {
    const std::uint64_t hash = hash_key(key);
    const Shard& shard = shard_for(hash);
    std::shared_lock lock = read_shard(shard);
    if (find_live(shard, lock, key, hash) == nullptr) return std::nullopt;
    const Node* node = node_at(shard, find_slot(shard, key, hash));
    return KeySnapshot{std::string(key), node->filter, node->deadline()};
}

std::optional<KeySnapshot> Keyspace::linked(std::string_view key) const {
    const std::uint64_t hash = hash_key(key);
    const Shard& shard = shard_for(hash);
    std::shared_lock lock = read_shard(shard);
    const std::size_t slot = find_slot(shard, key, hash);
    if (slot == kNotFound) return std::nullopt;
    const Node* node = node_at(shard, slot);
    return KeySnapshot{std::string(key), node->filter, node->deadline()};
}

std::optional<KeyDetails> Keyspace::inspect(std::string_view key) const {
    const std::uint64_t hash = hash_key(key);
    const Shard& shard = shard_for(hash);
    std::shared_lock lock(shard.mutex);
    if (find_live(shard, lock, key, hash) == nullptr) return std::nullopt;
    const Node* node = node_at(shard, find_slot(shard, key, hash));
    KeyDetails details;
    details.filter = node->filter;
    details.expire_at_ms = node->deadline();
    details.accessed = node->accessed.load(std::memory_order_relaxed);
    // What used_memory counts for the entry: its node and its slot.
    details.entry_bytes = Node::allocation_bytes(node->key_size) + sizeof(std::uint64_t);
    // Without the copy just taken.
    details.references = static_cast<long>(details.filter->references()) - 1;
    return details;
}

std::optional<bool> Keyspace::update_expiry(
    std::string_view key, const std::function<std::optional<std::int64_t>(std::int64_t)>& decide) {
    const std::uint64_t hash = hash_key(key);
    Shard& shard = shard_for(hash);
    Garbage garbage;
    garbage.nodes.reserve(1);
    garbage.tables.reserve(1);
    MutationLog* log = mutation_log();
    std::optional<bool> changed;
    {
        ShardWrite write(shard);
        const std::size_t slot = find_slot(shard, key, hash);
        if (slot == kNotFound) return std::nullopt;
        Node* node = node_at(shard, slot);
        const std::int64_t now = now_ms();
        const auto encode_deleted = [&] {
            return log != nullptr ? log->encode_deleted(key) : nullptr;
        };
        if (lapsed(node, now)) {
            EncodedRecord deleted = encode_deleted();
            erase_slot(shard, slot, garbage);
            garbage.nodes.push_back(node);
            expired_keys_.fetch_add(1, std::memory_order_relaxed);
            if (deleted) log->append(std::move(deleted));
        } else if (const std::optional<std::int64_t> deadline = decide(node->deadline());
                   !deadline) {
            changed = false;
        } else if (*deadline != 0 && *deadline <= now && !following()) {
            // A deadline already passed deletes the key (Redis's EXPIRE
            // does); following, the record is redone as it was decided.
            EncodedRecord deleted = encode_deleted();
            erase_slot(shard, slot, garbage);
            garbage.nodes.push_back(node);
            changed = true;
            if (deleted) log->append(std::move(deleted));
        } else {
            // Encoded before the deadline changes (it was only known now).
            EncodedRecord record = log != nullptr ? log->encode_expiry(key, *deadline) : nullptr;
            const std::int64_t from = node->deadline();
            reserve_expiring(shard, from == 0 && *deadline != 0);
            account_deadline(shard, node, from, *deadline);
            node->expire_at_ms.store(*deadline, std::memory_order_relaxed);
            changed = true;
            if (record) log->append(std::move(record));
        }
    }
    dispose(garbage);
    return changed;
}

bool Keyspace::set_expiry(std::string_view key, std::int64_t expire_at_ms) {
    return update_expiry(key, [&](std::int64_t) { return expire_at_ms; }).has_value();
}

std::optional<std::int64_t> Keyspace::expiry(std::string_view key) const {
    const std::uint64_t hash = hash_key(key);
    const Shard& shard = shard_for(hash);
    std::shared_lock lock = read_shard(shard);
    if (find_live(shard, lock, key, hash) == nullptr) return std::nullopt;
    return node_at(shard, find_slot(shard, key, hash))->deadline();
}

bool Keyspace::rename(std::string_view from, std::string_view to) {
    return move_key(from, to, /*replace=*/true) != Moved::missing;
}

std::optional<bool> Keyspace::rename_if_absent(std::string_view from, std::string_view to) {
    switch (move_key(from, to, /*replace=*/false)) {
        case Moved::missing:
            return std::nullopt;
        case Moved::exists:
            return false;
        case Moved::moved:
            break;
    }
    return true;
}

Keyspace::Moved Keyspace::move_key(std::string_view from, std::string_view to, bool replace) {
    const std::uint64_t from_hash = hash_key(from);
    const std::uint64_t to_hash = hash_key(to);
    Shard& source = shard_for(from_hash);
    Shard& target = shard_for(to_hash);
    Garbage garbage;
    garbage.nodes.reserve(2);
    garbage.tables.reserve(2);
    MutationLog* log = mutation_log();
    Moved result = Moved::missing;
    {
        // Lock both shards in index order so two opposite renames cannot deadlock.
        // Neither waits for a transaction while holding the other's lock: a
        // transaction holding either shard is waited for with both released.
        Shard* first = &source < &target ? &source : &target;
        Shard* second = &source < &target ? &target : &source;
        std::deque<ShardWrite> writes;
        for (;;) {
            writes.emplace_back(*first, ShardWrite::kIgnoreGate);
            if (second != first) writes.emplace_back(*second, ShardWrite::kIgnoreGate);
            const Shard* held = writes.front().gated()  ? first
                                : writes.back().gated() ? second
                                                        : nullptr;
            if (held == nullptr) break;
            while (!writes.empty()) writes.pop_back();
            wait_for_gate(*held);
        }

        const std::size_t slot = find_slot(source, from, from_hash);
        if (slot == kNotFound) return Moved::missing;
        Node* node = node_at(source, slot);
        if (lapsed(node, now_ms())) {
            EncodedRecord deleted = log != nullptr ? log->encode_deleted(from) : nullptr;
            erase_slot(source, slot, garbage);
            garbage.nodes.push_back(node);
            expired_keys_.fetch_add(1, std::memory_order_relaxed);
            if (deleted) log->append(std::move(deleted));
        } else if (from == to) {
            // RENAME keeps the key; RENAMENX finds it there (Redis: 0).
            result = replace ? Moved::moved : Moved::exists;
        } else if (const std::size_t existing = find_slot(target, to, to_hash);
                   !replace && existing != kNotFound &&
                   !lapsed(node_at(target, existing), now_ms())) {
            result = Moved::exists;
        } else {
            // The record and the new node are made first: if either cannot
            // be allocated nothing has changed.
            EncodedRecord renamed = log != nullptr ? log->encode_renamed(from, to) : nullptr;
            reserve_expiring(target, node->deadline() != 0);
            Node* moved = make_node(to, node->filter, node->deadline());
            // As Redis's RENAME keeps the value object, its idle time stays.
            moved->accessed.store(node->accessed.load(std::memory_order_relaxed),
                                  std::memory_order_relaxed);
            // `existing` is where `to` is (found above; nothing moved since).
            if (existing != kNotFound) {
                garbage.nodes.push_back(node_at(target, existing));
                replace_slot(target, existing, moved, to_hash);
            } else {
                try {
                    insert_slot(target, moved, to_hash, garbage);
                } catch (...) {
                    free_node(moved);
                    while (!writes.empty()) writes.pop_back();
                    dispose(garbage);
                    throw;
                }
            }
            // Found again: inserting into the same shard may have rebuilt the table.
            erase_slot(source, find_slot(source, from, from_hash), garbage);
            garbage.nodes.push_back(node);
            result = Moved::moved;
            if (renamed) log->append(std::move(renamed));
        }
    }
    dispose(garbage);
    return result;
}

std::size_t Keyspace::clear() {
    Garbage garbage;
    garbage.tables_and_nodes.reserve(shards_.size());
    std::size_t live = 0;
    MutationLog* log = mutation_log();
    EncodedRecord record = log != nullptr ? log->encode_cleared() : nullptr;
    {
        // Every shard in index order (as rename and view take them), so the
        // keyspace empties at one instant.
        // A transaction holding any shard is waited for with every lock
        // released.
        std::deque<ShardWrite> writes;
        for (;;) {
            const Shard* held = nullptr;
            for (Shard& shard : shards_) {
                writes.emplace_back(shard, ShardWrite::kIgnoreGate);
                if (writes.back().gated()) {
                    held = &shard;
                    break;
                }
            }
            if (held == nullptr) break;
            writes.clear();
            wait_for_gate(*held);
        }
        const std::int64_t now = now_ms();
        for (Shard& shard : shards_) {
            Table* table = shard.table.load(std::memory_order_relaxed);
            if (table == nullptr) continue;
            std::int64_t items = 0;
            for (std::size_t i = 0; i <= table->mask; ++i) {
                if (table->slots()[i] == 0) continue;
                const Node* node = node_of<const Node>(table->slots()[i]);
                if (!node->expired(now)) ++live;
                items += static_cast<std::int64_t>(node->filter->items());
            }
            shard.table.store(nullptr, std::memory_order_release);
            shard.count.store(0, std::memory_order_relaxed);
            shard.linked_items.fetch_sub(items, std::memory_order_relaxed);
            charge(-static_cast<std::int64_t>(shard.expiring.bytes()));
            shard.expiring.clear();
            shard.expiring_count.store(0, std::memory_order_relaxed);
            shard.deadline_sum = 0;
            garbage.tables_and_nodes.push_back(table);
        }
        if (slot_counts_) {
            for (std::uint32_t slot = 0; slot < core::kSlotCount; ++slot) {
                slot_counts_[slot].store(0, std::memory_order_relaxed);
            }
        }
        if (record) log->append(std::move(record));
    }
    // Freed with no lock held (once no lookup can see them): a million keys
    // or a terabyte of filters take a while, and other clients may already
    // create new keys meanwhile.
    dispose(garbage);
    return live;
}

}  // namespace bloomery::store
