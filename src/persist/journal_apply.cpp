// Redoing journal records: the Applier behind replay at start and a
// replica's stream (StreamApplier).

#include "journal_apply.hpp"

#include <algorithm>
#include <memory>
#include <new>
#include <stdexcept>

#include "bloomery/bloom/age_header.hpp"
#include "bloomery/bloom/dump.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/persist/journal_reader.hpp"
#include "journal_cuckoo.hpp"
#include "journal_format.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {

namespace jf = journal_format;
using format::get_u32;
using format::get_u64;

namespace journal_apply {

Applier::Applier(store::Keyspace& keyspace) : keyspace_(keyspace) {
    // A record is redone as it was decided: an EXPIRE whose deadline has
    // passed on this clock sets it (a later PERSIST may remove it), and a
    // key past its deadline still takes the records that name it.
    keyspace.set_deadlines(store::Deadlines::follow);
    const store::KeyspaceView view = keyspace.view(store::ViewFor::keys);
    for (std::size_t i = 0; i < view.size(); ++i) {
        const store::ValueRef& value = view.entry(i).value;
        by_id_[value.id()] = value;
        max_id_ = std::max(max_id_, value.id());
    }
}

core::Status Applier::apply_transaction(const std::vector<std::pair<Record, Decoded>>& records,
                                        Isolation isolation) {
    store::Keyspace::Transaction transaction;
    if (isolation == Isolation::keyspace_transaction) {
        transaction = keyspace_.begin_transaction({}, store::TransactionScope::every_shard);
    }
    for (const auto& [record, decoded] : records) {
        if (core::Status applied = apply(record.type, decoded); !applied) return applied;
    }
    return {};
}

core::Status Applier::create(const Decoded& d) {
    const core::Result<bloom::DumpHeader> header = bloom::parse_header(d.data);
    if (!header) return core::Error{"CREATE record: " + header.error()};
    link(d, bloom::build_filter(*header));
    return {};
}

void Applier::link(const Decoded& d, store::ValueRef value) {
    value.set_id(d.filter_id);
    max_id_ = std::max(max_id_, d.filter_id);
    // A replica promoted later names its new filters past every id it holds.
    bloom::ScalableFilter::reserve_ids_through(d.filter_id);
    forget(d.key);
    keyspace_.put(d.key, value, d.deadline);
    by_id_[d.filter_id] = std::move(value);
}

bloom::ScalableFilter* Applier::entries_of(const Decoded& d) {
    auto it = by_id_.find(d.filter_id);
    if (it == by_id_.end()) return nullptr;
    // Ids are unique among filters of both kinds: none of a Cuckoo filter
    // is in an ADD record of an intact journal.
    if (it->second.bloom_or_null() == nullptr) return nullptr;
    adds_.resize(d.count);
    for (std::uint32_t i = 0; i < d.count; ++i) {
        const unsigned char* entry = d.adds + i * jf::kAddEntryBytes;
        adds_[i] = {entry[0], {get_u64(entry + 1), get_u64(entry + 9)}};
    }
    return &it->second.filter();
}

core::Status Applier::add(const Decoded& d) {
    bloom::ScalableFilter* found = entries_of(d);
    if (found == nullptr) return {};  // deleted before this add landed
    bloom::ScalableFilter& filter = *found;
    // Prefetch every item's block or word first, so the cache misses of a
    // large filter overlap instead of costing one full miss per add.
    const std::size_t layers = filter.num_layers();
    for (const store::Keyspace::RecordedAdd& entry : adds_) {
        if (entry.layer < layers) filter.layer(entry.layer).prefetch(entry.hash);
    }
    if (core::Status redone = keyspace_.redo_adds(filter, adds_); !redone) {
        return core::Error{"ADD record: " + redone.error()};
    }
    return {};
}

core::Status Applier::remove(const Decoded& d) {
    bloom::ScalableFilter* filter = entries_of(d);
    if (filter == nullptr) return {};  // deleted before this delete landed
    if (core::Status redone = keyspace_.redo_removes(*filter, adds_); !redone) {
        return core::Error{"REMOVE record: " + redone.error()};
    }
    return {};
}

core::Status Applier::cuckoo_create(const Decoded& d) {
    core::Result<cuckoo::CuckooFilter> filter =
        cuckoo::CuckooFilter::load_header(d.data, cuckoo::kNoLimit);
    if (!filter) return core::Error{"CF-CREATE record: " + filter.error()};
    link(d, cuckoo::CuckooObject::make(std::move(*filter), d.seq));
    return {};
}

core::Status Applier::cuckoo_change(const Decoded& d) {
    journal_cuckoo::ParsedChange parsed;
    if (core::Status shaped = journal_cuckoo::parse(d.data, parsed); !shaped) return shaped;
    auto it = by_id_.find(parsed.id);
    if (it == by_id_.end()) return {};  // deleted before this change landed
    cuckoo::CuckooObject* object = it->second.cuckoo_or_null();
    if (object == nullptr) return core::Error{"CF-CHANGE record of a Bloom filter"};
    if (core::Status redone = keyspace_.redo_cuckoo(*object, parsed.seq, parsed.change); !redone) {
        return core::Error{"CF-CHANGE record: " + redone.error()};
    }
    return {};
}

core::Status Applier::age_create(const Decoded& d) {
    const core::Result<bloom::AgeDumpHeader> dumped = bloom::decode_age_dump_header(d.data);
    if (!dumped) return core::Error{"AGE-CREATE record: " + dumped.error()};
    const bloom::AgeGeometry& g = dumped->header.geometry;
    if (g.slices() * (g.slice_bits / 8) > core::memory_available()) {
        return core::Error{
            "AGE-CREATE record: a filter larger than the memory this process may use"};
    }
    link(d, bloom::create_dumped(*dumped));
    return {};
}

core::Status Applier::age_record(std::uint8_t type, const Decoded& d) {
    auto it = by_id_.find(d.filter_id);
    if (it == by_id_.end()) return {};  // deleted before this record landed
    bloom::AgeFilter* filter = it->second.age_or_null();
    if (filter == nullptr) {
        return core::Error{std::string(jf::type_name(type)) + " record of another kind of filter"};
    }
    if (type == jf::kAgeShift) {
        keyspace_.redo_age_shift(*filter, d.generation, d.shifted_ms);
        return {};
    }
    if (type == jf::kAgeWords) {
        if (core::Status redone =
                keyspace_.redo_age_words(*filter, d.generation, d.first_word, d.data);
            !redone) {
            return core::Error{"AGE-WORDS record: " + redone.error()};
        }
        return {};
    }
    age_adds_.resize(d.count);
    for (std::uint32_t i = 0; i < d.count; ++i) {
        const unsigned char* entry = d.adds + i * jf::kAgeAddEntryBytes;
        age_adds_[i] = {get_u64(entry), {get_u64(entry + 8), get_u64(entry + 16)}};
    }
    keyspace_.redo_age_adds(*filter, age_adds_);
    return {};
}

core::Status Applier::apply(std::uint8_t type, const Decoded& d) {
    switch (type) {
        case jf::kCreate:
            return create(d);
        case jf::kAdd:
            return add(d);
        case jf::kRemove:
            return remove(d);
        case jf::kDelete:
            forget(d.key);
            keyspace_.erase(d.key);
            return {};
        case jf::kRename:
            if (d.key != d.other) forget(d.other);
            keyspace_.rename(d.key, d.other);
            return {};
        case jf::kExpire:
            // Set as recorded, passed or not (the keyspace follows deadlines).
            keyspace_.set_expiry(d.key, d.deadline);
            return {};
        case jf::kFlushAll:
            by_id_.clear();
            keyspace_.clear();
            return {};
        case jf::kPing:
            return {};
        case jf::kMulti:
        case jf::kExec:
            return core::Error{std::string(jf::type_name(type)) + " record outside its place"};
        case jf::kCuckooCreate:
            return cuckoo_create(d);
        case jf::kCuckooChange:
            return cuckoo_change(d);
        case jf::kAgeCreate:
            return age_create(d);
        case jf::kAgeAdd:
        case jf::kAgeShift:
        case jf::kAgeWords:
            return age_record(type, d);
        case jf::kChunk: {
            auto it = by_id_.find(d.filter_id);
            if (it == by_id_.end()) return {};
            if (it->second.bloom_or_null() == nullptr) {
                return core::Error{"CHUNK record of a Cuckoo filter"};
            }
            // A server writes only chunks it checked; one that does not fit
            // comes from a journal of an older version, which recorded
            // chunks before checking them (and applied none).
            static_cast<void>(keyspace_.redo_chunk(it->second.filter(), d.iter, d.data));
            return {};
        }
        default:
            return core::Error{"unknown record type"};
    }
}

void Applier::forget(std::string_view key) {
    if (auto entry = keyspace_.linked(key)) by_id_.erase(entry->value.id());
}

core::Status apply_record(Applier& applier, const Record& record, const Decoded& decoded) {
    try {
        return applier.apply(record.type, decoded);
    } catch (const std::bad_alloc&) {
    } catch (const std::length_error&) {
    }
    return core::Error{std::string("out of memory applying a ") + jf::type_name(record.type) +
                       " record"};
}

core::Status apply_unit(Applier& applier, const std::vector<std::pair<Record, Decoded>>& unit,
                        Isolation isolation) {
    try {
        return applier.apply_transaction(unit, isolation);
    } catch (const std::bad_alloc&) {
    } catch (const std::length_error&) {
    }
    return core::Error{"out of memory applying a transaction"};
}

}  // namespace journal_apply

using journal_apply::Applier;
using journal_apply::apply_unit;
using journal_apply::Isolation;
using journal_records::decode;
using journal_records::Decoded;
using journal_records::next_record;
using journal_records::Record;
using journal_records::Scan;
using journal_records::scan_transaction;
using journal_records::Source;

struct StreamApplier::Impl {
    explicit Impl(store::Keyspace& keyspace) : applier(keyspace) {}
    Applier applier;
    std::uint64_t records = 0;
    std::vector<std::pair<Record, Decoded>> unit;  // a transaction's records
};

StreamApplier::StreamApplier(store::Keyspace& keyspace) : impl_(std::make_unique<Impl>(keyspace)) {}

StreamApplier::~StreamApplier() = default;

std::uint64_t StreamApplier::records() const {
    return impl_->records;
}

StreamApplier::Applied StreamApplier::apply(std::string_view data) {
    const auto* base = reinterpret_cast<const unsigned char*>(data.data());
    Applied applied;
    std::size_t& consumed = applied.consumed;
    const auto stop = [&applied](std::string why) {
        applied.status = core::Error{"replication stream: " + std::move(why)};
        return applied;
    };
    while (consumed < data.size()) {
        const std::size_t left = data.size() - consumed;
        // Wait for the whole record: a stream ends mid-record all the time.
        if (left < jf::kRecordOverhead) return applied;
        const std::uint64_t body = get_u32(base + consumed);
        if (body > jf::kMaxRecordBody)
            return stop("a record of " + std::to_string(body) + " bytes");
        if (left < jf::kRecordOverhead + body) return applied;
        Record record{};
        std::string why;
        // Whole, so anything but ok (a bad checksum, zeros) is corruption.
        const std::size_t end = consumed + jf::kRecordOverhead + static_cast<std::size_t>(body);
        if (next_record(base, end, consumed, record, why) != Scan::ok) return stop(why);
        core::Result<Decoded> decoded = decode(record);
        if (!decoded) return stop(decoded.error());
        if (record.type == jf::kMulti) {
            // Applied once the whole unit is here (the bytes wait, unconsumed).
            std::size_t unit_end = 0;
            const Scan unit_scan = scan_transaction(base, data.size(), end, decoded->span,
                                                    Source::stream, impl_->unit, unit_end, why);
            if (unit_scan == Scan::torn) return applied;
            if (unit_scan != Scan::ok) return stop(why);
            const core::Status unit =
                apply_unit(impl_->applier, impl_->unit, Isolation::keyspace_transaction);
            if (!unit) return stop("in a transaction: " + unit.error());
            impl_->records += impl_->unit.size();
            consumed = unit_end;
            applied.changes_end = consumed;
            continue;
        }
        core::Status done;
        try {
            done = impl_->applier.apply(record.type, *decoded);
        } catch (const std::exception&) {
            done = core::Error{std::string("out of memory applying a ") +
                               jf::type_name(record.type) + " record"};
        }
        if (!done) return stop(done.error());
        ++impl_->records;
        consumed = end;
        if (record.type != jf::kPing) applied.changes_end = consumed;
    }
    return applied;
}

}  // namespace bloomery::persist
