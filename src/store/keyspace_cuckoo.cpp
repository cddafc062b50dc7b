// store::Keyspace's changes to Cuckoo filters, live and redone: each made
// under the filter's lock together with its numbered record.

#include <new>
#include <string>

#include "bloomery/store/keyspace.hpp"

namespace bloomery::store {

namespace {

// The change as the filter makes it again (replay, replicas); false if it
// does not fit the filter (nothing changed).
bool redo(cuckoo::CuckooFilter& filter, const CuckooChange& change) {
    switch (change.kind) {
        case CuckooChange::Kind::insert:
            return change.insert != nullptr && filter.apply(*change.insert);
        case CuckooChange::Kind::remove:
            return change.remove != nullptr && filter.apply(*change.remove);
        case CuckooChange::Kind::compact:
            filter.compact(true);
            return true;
        case CuckooChange::Kind::chunk:
            return filter.load_chunk(change.pos, change.data);
    }
    return false;
}

}  // namespace

bool Keyspace::change_cuckoo(std::string_view key, const std::function<ValueRef()>* make,
                             std::size_t data_bytes, const CuckooEdit& change) {
    const auto run = [&](const ValueRef& value) {
        cuckoo::CuckooObject& object = value.cuckoo();
        cuckoo::CuckooObject::Locked locked = object.lock();
        MutationLog* log = mutation_log();
        // Room for the record first: once the filter changed, its record
        // cannot fail.
        EncodedRecord record = log != nullptr ? log->reserve_cuckoo_change(
                                                    locked.filter().max_iterations(), data_bytes)
                                              : nullptr;
        const std::optional<CuckooChange> made = change(locked.filter());
        if (!made) return;
        const std::uint64_t seq = locked.changed();
        if (log != nullptr) {
            log->seal_cuckoo_change(*record, object.id(), seq, *made);
            // Under the filter's lock: records reach the stream in the order
            // of the changes.
            log->append(std::move(record));
        }
    };
    if (make == nullptr) return with_value(key, run);
    return with_value_or_create(key, *make, run);
}

core::Status Keyspace::redo_cuckoo(cuckoo::CuckooObject& object, std::uint64_t seq,
                                   const CuckooChange& change) {
    cuckoo::CuckooObject::Locked locked = object.lock();
    const bool fill = seq == 0;
    if (fill && change.kind != CuckooChange::Kind::chunk) {
        return core::Error{"a Cuckoo filter's fill record holds no chunk"};
    }
    // Already in the filter: a snapshot copied it after this change.
    if (!fill && seq <= locked.seq()) return {};
    if (!fill && seq != locked.seq() + 1) {
        return core::Error{"a change to a Cuckoo filter is missing before change " +
                           std::to_string(seq)};
    }
    MutationLog* log = mutation_log();
    EncodedRecord record =
        log != nullptr ? log->reserve_cuckoo_change(
                             change.insert != nullptr ? change.insert->relocations.size() : 0,
                             change.data.size())
                       : nullptr;
    if (!redo(locked.filter(), change)) {
        return core::Error{"a recorded change does not fit its Cuckoo filter"};
    }
    // A fill is part of the filter's creation and takes no number.
    locked.redone(fill ? locked.seq() : seq);
    if (log != nullptr) {
        log->seal_cuckoo_change(*record, object.id(), seq, change);
        log->append(std::move(record));
    }
    return {};
}

}  // namespace bloomery::store
