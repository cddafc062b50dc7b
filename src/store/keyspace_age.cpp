// store::Keyspace's changes to expiring filters (bloom/age_filter.hpp):
// adds and shifts, live and redone, each inside a data scope of the
// journal (MutationLog).

#include <algorithm>
#include <new>

#include "bloomery/bloom/age_header.hpp"
#include "bloomery/store/age_shifter.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::store {

bool Keyspace::add_age_items(std::string_view key, std::span<const std::string_view> items,
                             std::vector<AgeAdded>& results, bool& full) {
    results.clear();
    return with_value(key, [&](const ValueRef& value) {
        add_to_age(value.age(), items, results, full, AtFull::go_on);
    });
}

// add_age_items's adds to `filter`; with AtFull::stop, none after the one
// that set `full` (its generation took its g items).
void Keyspace::add_to_age(bloom::AgeFilter& filter, std::span<const std::string_view> items,
                          std::vector<AgeAdded>& results, bool& full, AtFull at_full) {
    results.clear();
    MutationLog* log = mutation_log();
    constexpr std::size_t kBatch = bloom::ScalableFilter::kBatch;
    std::int64_t added = 0;
    for (std::size_t first = 0; first < items.size() && !(full && at_full == AtFull::stop);
         first += kBatch) {
        const auto batch = items.subspan(first, std::min(kBatch, items.size() - first));
        bloom::AgeRecorder* scope = nullptr;
        if (log != nullptr) {
            try {
                scope = &log->begin_age_adds(filter, batch.size());
            } catch (const std::bad_alloc&) {
                results.push_back(AgeAdded::out_of_memory);
                break;
            }
        }
        DataScope close(log);
        // A running snapshot keeps the generation and counts of its cut.
        if (log != nullptr && !snapshot_counts_.before_count_change(filter)) {
            results.push_back(AgeAdded::out_of_memory);
            break;
        }
        for (const std::string_view item : batch) {
            const auto result = filter.add(bloom::hash_item(item), scope, &full);
            if (result == bloom::AgeFilter::Added::not_recorded) {
                results.push_back(AgeAdded::out_of_memory);  // cannot happen: room reserved
                items_added_.add(added);
                return;
            }
            results.push_back(result == bloom::AgeFilter::Added::added ? AgeAdded::added
                                                                       : AgeAdded::exists);
            added += result == bloom::AgeFilter::Added::added ? 1 : 0;
            if (full && at_full == AtFull::stop) break;
        }
    }
    items_added_.add(added);
}

// add_items() on an expiring filter: items from `from` on, up to the one
// that fills the current generation (`due` then holds the filter: a shift
// is due), their
// results appended to `results`; returns how many it took (fewer when a
// record could not be allocated: out_of_memory is the last result).
std::size_t Keyspace::add_age_chunk(bloom::AgeFilter& filter,
                                    std::span<const std::string_view> items, std::size_t from,
                                    std::vector<bloom::AddResult>& results,
                                    bloom::AgeFilterRef& due) {
    const auto part = items.subspan(from);
    thread_local std::vector<AgeAdded> added;
    bool full = false;
    add_to_age(filter, part, added, full, AtFull::stop);
    if (full) due = bloom::AgeFilterRef::share(filter);
    for (const AgeAdded result : added) {
        results.push_back(result == AgeAdded::added    ? bloom::AddResult::added
                          : result == AgeAdded::exists ? bloom::AddResult::exists
                                                       : bloom::AddResult::out_of_memory);
    }
    return added.size();
}

// After add_items()'s first chunk to the expiring filter under `key`: makes
// the shift `due` asks for on this thread (outside any epoch guard:
// AgeShifter::shift_full()), then adds the rest, a generation and a shift at
// a time: adders are held to the shifts' pace, and one adder alone fills
// each generation with exactly its g items.
void Keyspace::continue_age_adds(std::string_view key, std::span<const std::string_view> items,
                                 std::size_t done, std::vector<bloom::AddResult>& results,
                                 bloom::AgeFilterRef due) {
    for (;;) {
        if (due) {
            if (AgeShifter* shifter = age_shifter()) shifter->shift_full(*due);
            due = {};
        }
        if (done == items.size() ||
            (!results.empty() && results.back() == bloom::AddResult::out_of_memory)) {
            return;
        }
        // The key is looked up again for each chunk: one that went, or holds
        // another kind of filter now, takes no more of the items.
        bool taken = false;
        with_value(key, [&](const ValueRef& value) {
            bloom::AgeFilter* filter = value.age_or_null();
            if (filter == nullptr) return;
            done += add_age_chunk(*filter, items, done, results, due);
            taken = true;
        });
        if (!taken) return;
    }
}

void Keyspace::attach_age_shifter(AgeShifter* shifter) {
    age_shifter_.store(shifter, std::memory_order_release);
}

void Keyspace::set_deadlines(Deadlines rule) {
    expiry_.set_rule(rule);
    if (AgeShifter* shifter = age_shifter_.load(std::memory_order_acquire)) {
        shifter->lead(rule == Deadlines::enforce);
    }
}

namespace {

// Saves an expiring filter's state for running snapshots before a shift
// (SnapshotCounts), then opens the scope recording the shift. The save is
// made first, outside the scope, so that a failure to allocate it refuses
// the shift before its record exists; inside, it is made again, which
// costs nothing unless a snapshot cut fell in between. If that second save
// cannot be allocated, the shift still goes ahead, as its record is
// written: that snapshot then holds the filter as it was after the shift
// rather than at its cut, which replay brings to the same bits (the shift
// record finds its generation current) with the items added between the
// cut and the shift counted twice.
void open_shift(MutationLog* log, SnapshotCounts& counts, bloom::AgeFilter& filter,
                std::uint64_t generation, std::uint64_t shifted_ms) {
    if (log == nullptr) return;
    if (!counts.before_count_change(filter)) throw std::bad_alloc();
    log->begin_age_shift(filter, generation, shifted_ms);
    static_cast<void>(counts.before_count_change(filter));
}

}  // namespace

bool Keyspace::shift_age(bloom::AgeFilter& filter, std::uint64_t now_ms, std::uint64_t from) {
    const auto whole = filter.lock_whole_changes();
    if (filter.generation() != from) return false;
    MutationLog* log = mutation_log();
    open_shift(log, snapshot_counts_, filter, filter.generation() + 1, now_ms);
    DataScope close(log);
    filter.shift(now_ms);
    return true;
}

core::Status Keyspace::load_age_words(bloom::AgeFilter& filter, std::int64_t iter,
                                      std::string_view data) {
    const std::uint64_t chunk =
        iter >= 2 ? static_cast<std::uint64_t>(iter - 2) : ~std::uint64_t{0};
    const std::uint64_t words = data.size() / 8;
    if (chunk >= bloom::age_chunks(filter) || data.empty() || data.size() % 8 != 0 ||
        words > filter.num_words() - chunk * bloom::kAgeChunkWords) {
        return core::Error{"the chunk does not fit the expiring filter"};
    }
    const std::uint64_t first = chunk * bloom::kAgeChunkWords;
    const auto whole = filter.lock_whole_changes();
    MutationLog* log = mutation_log();
    if (log != nullptr) log->begin_age_words(filter, filter.generation(), first, data);
    DataScope close(log);
    filter.or_words(first, data);
    chunks_loaded_.fetch_add(1, std::memory_order_relaxed);
    return {};
}

core::Status Keyspace::redo_age_words(bloom::AgeFilter& filter, std::uint64_t generation,
                                      std::uint64_t first, std::string_view data) {
    if (data.empty() || data.size() % 8 != 0 || first > filter.num_words() ||
        data.size() / 8 > filter.num_words() - first) {
        return core::Error{"words beyond the expiring filter"};
    }
    MutationLog* log = mutation_log();
    if (log != nullptr) log->begin_age_words(filter, generation, first, data);
    DataScope close(log);
    filter.redo_words(generation, first, data);
    chunks_loaded_.fetch_add(1, std::memory_order_relaxed);
    return {};
}

void Keyspace::redo_age_adds(bloom::AgeFilter& filter, std::span<const RecordedAgeAdd> adds) {
    MutationLog* log = mutation_log();
    constexpr std::size_t kBatch = bloom::ScalableFilter::kBatch;
    for (std::size_t first = 0; first < adds.size(); first += kBatch) {
        const auto batch = adds.subspan(first, std::min(kBatch, adds.size() - first));
        bloom::AgeRecorder* scope =
            log != nullptr ? &log->begin_age_adds(filter, batch.size()) : nullptr;
        DataScope close(log);
        if (log != nullptr && !snapshot_counts_.before_count_change(filter)) {
            throw std::bad_alloc();
        }
        for (const RecordedAgeAdd& add : batch) {
            if (scope != nullptr) scope->record(add.generation, add.hash);
            filter.redo_add(add.generation, add.hash);
        }
    }
    items_added_.add(static_cast<std::int64_t>(adds.size()));
}

void Keyspace::redo_age_shift(bloom::AgeFilter& filter, std::uint64_t generation,
                              std::uint64_t shifted_ms) {
    MutationLog* log = mutation_log();
    open_shift(log, snapshot_counts_, filter, generation, shifted_ms);
    DataScope close(log);
    filter.advance_to(generation, shifted_ms);
}

}  // namespace bloomery::store
