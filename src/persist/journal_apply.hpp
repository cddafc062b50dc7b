#pragma once
// Redoing journal records in a keyspace: replay at start
// (journal_reader.cpp) and a replica's stream (StreamApplier,
// journal_apply.cpp).

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bloomery/core/result.hpp"
#include "bloomery/store/keyspace.hpp"
#include "journal_records.hpp"

namespace bloomery::persist::journal_apply {

using journal_records::Decoded;
using journal_records::Record;

// Applies records to a keyspace, finding filters by the id they were
// journaled under. Every record is redone as it says (keyspace.hpp's write
// path, which records it again in the keyspace's own log if it has one: a
// replica's journal); nothing is decided again, deadlines included: the
// keyspace follows them (store::Deadlines::follow) from the moment an
// Applier exists, and whoever makes this server decide again sets it back.
// How a transaction's records are applied: inside a keyspace transaction
// over every shard, so readers never see it half applied and the keyspace's
// own journal records it as one unit again (a replica); or one by one
// (replay at start, which has no readers).
enum class Isolation { none, keyspace_transaction };

class Applier {
public:
    explicit Applier(store::Keyspace& keyspace);
    std::uint64_t max_id() const { return max_id_; }

    // Applies one record, or says why it cannot be. May throw
    // std::bad_alloc (apply_record() turns that into a failure).
    core::Status apply(std::uint8_t type, const Decoded& d);
    // Applies a transaction's records (checked already) as one unit.
    core::Status apply_transaction(const std::vector<std::pair<Record, Decoded>>& records,
                                   Isolation isolation);

private:
    core::Status create(const Decoded& d);
    // An ADD or REMOVE record's filter (null: gone), its entries in adds_.
    bloom::ScalableFilter* entries_of(const Decoded& d);
    core::Status add(const Decoded& d);
    core::Status remove(const Decoded& d);
    core::Status cuckoo_create(const Decoded& d);
    // Expiring filters: AGE-CREATE, AGE-ADD, AGE-SHIFT.
    core::Status age_create(const Decoded& d);
    core::Status age_record(std::uint8_t type, const Decoded& d);
    // Links a new filter under the record's key and id (CREATE, CF-CREATE).
    void link(const Decoded& d, store::ValueRef value);
    core::Status cuckoo_change(const Decoded& d);
    // The filter under `key` leaves the keyspace: adds journaled for it
    // later (they raced the change) go nowhere, as they did.
    void forget(std::string_view key);

    store::Keyspace& keyspace_;
    std::vector<store::Keyspace::RecordedAdd> adds_;
    std::vector<store::Keyspace::RecordedAgeAdd> age_adds_;
    std::unordered_map<std::uint64_t, store::ValueRef> by_id_;
    std::uint64_t max_id_ = 0;
};

// Applies one decoded record, or says why it cannot be (out of memory
// counts as such).
core::Status apply_record(Applier& applier, const Record& record, const Decoded& decoded);
// apply_record for a transaction's records.
core::Status apply_unit(Applier& applier, const std::vector<std::pair<Record, Decoded>>& unit,
                        Isolation isolation);

}  // namespace bloomery::persist::journal_apply
