// store::Keyspace's changes to filters' data: adds and BF.LOADCHUNK chunks,
// live and redone, each inside a data scope of the journal (MutationLog).

#include <algorithm>
#include <new>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::store {

namespace {

// Sets a checked chunk's bits, recorded in `log`'s data scope if there is
// one.
void apply_recorded(MutationLog* log, bloom::ScalableFilter& filter, std::int64_t iter,
                    std::string_view data, const bloom::ChunkTarget& target) {
    if (log == nullptr) {
        bloom::apply_chunk(filter, target);
        return;
    }
    log->begin_chunk(filter, iter, data);
    DataScope close(log);
    bloom::apply_chunk(filter, target);
}

// Moves this thread's records of a counting filter's changes into the
// journal's stream on every path out of the block that made them (inside the
// filter's serialize_changes() lock, which is released after this).
class Published {
public:
    explicit Published(MutationLog* log) : log_(log) {}
    ~Published() {
        if (log_ != nullptr) log_->publish_thread();
    }
    Published(const Published&) = delete;
    Published& operator=(const Published&) = delete;

private:
    MutationLog* log_;
};

}  // namespace

bool Keyspace::add_items(std::string_view key, std::span<const std::string_view> items,
                         const bloom::GrowthLimits& limits, const std::function<FilterRef()>* make,
                         std::vector<bloom::AddResult>& results) {
    results.resize(items.size());
    std::size_t done = 0;
    const auto run = [&](bloom::ScalableFilter& filter) {
        done = 0;
        MutationLog* log = mutation_log();
        // A counting filter's changes, one batch at a time, each batch's
        // records in the stream before the next (serialize_changes()).
        const std::unique_lock serial = filter.serialize_changes();
        const Published published(serial.owns_lock() ? log : nullptr);
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
            // A counting filter counts every add, present or not.
            const auto stored_end = out.begin() + static_cast<std::ptrdiff_t>(stored);
            items_added_.add(std::count(out.begin(), stored_end, bloom::AddResult::added) +
                             (filter.counting()
                                  ? std::count(out.begin(), stored_end, bloom::AddResult::exists)
                                  : 0));
            done += stored;
            if (stored < n) return;  // stopped at a full filter or an error
        }
    };
    bool found = true;
    try {
        std::optional<std::size_t> age_done;  // an expiring filter's adds
        bloom::AgeFilterRef due;              // ... and one whose shift is due
        const auto dispatch = [&](const ValueRef& value) {
            if (bloom::AgeFilter* filter = value.age_or_null()) {
                results.clear();
                age_done = add_age_chunk(*filter, items, 0, results, due);
            } else {
                run(value.filter());
            }
        };
        if (make == nullptr) {
            found = with_value(key, dispatch);
        } else {
            found = with_value_or_create(
                key, [make]() -> ValueRef { return (*make)(); }, dispatch);
        }
        if (age_done) {
            continue_age_adds(key, items, *age_done, results, std::move(due));
        } else {
            results.resize(done);
        }
    } catch (const std::bad_alloc&) {
        // The key's record or entry could not be allocated (nothing of it
        // changed): the adds stop there, as at a full filter.
        results.resize(done);
        results.push_back(bloom::AddResult::out_of_memory);
    }
    return found;
}

std::optional<bool> Keyspace::remove_items(std::string_view key,
                                           std::span<const std::string_view> items,
                                           std::vector<bloom::RemoveResult>& results) {
    results.clear();
    bool counting = true;
    const auto run = [&](bloom::ScalableFilter& filter) {
        results.clear();
        counting = filter.counting();
        if (!counting) return;
        MutationLog* log = mutation_log();
        const std::unique_lock serial = filter.serialize_changes();
        const Published published(log);
        constexpr std::size_t kBatch = bloom::ScalableFilter::kBatch;
        for (std::size_t first = 0; first < items.size(); first += kBatch) {
            const auto batch = items.subspan(first, std::min(kBatch, items.size() - first));
            bloom::AddRecorder* scope = nullptr;
            if (log != nullptr) {
                try {
                    scope = &log->begin_removes(filter, batch.size());
                } catch (const std::bad_alloc&) {
                    results.push_back(bloom::RemoveResult::out_of_memory);
                    return;
                }
            }
            DataScope close(log);
            if (!snapshot_counts_.before_count_change(filter)) {
                results.push_back(bloom::RemoveResult::out_of_memory);
                return;
            }
            for (const std::string_view item : batch) {
                results.push_back(filter.remove(filter.hash(item), scope));
                if (results.back() == bloom::RemoveResult::removed) items_added_.add(-1);
            }
        }
    };
    if (!with_filter(key, run)) return std::nullopt;
    return counting;
}

core::Result<Keyspace::ChunkStatus> Keyspace::load_chunk(std::string_view key, std::int64_t iter,
                                                         std::string_view data) {
    bool refused = false;
    std::string why;
    const bool found = with_value(key, [&](const ValueRef& value) {
        if (bloom::AgeFilter* age = value.age_or_null()) {
            const core::Status loaded = load_age_words(*age, iter, data);
            refused = !loaded;
            if (refused) why = loaded.error();
            return;
        }
        bloom::ScalableFilter& filter = value.filter();
        const std::unique_lock serial = filter.serialize_changes();
        const Published published(serial.owns_lock() ? mutation_log() : nullptr);
        // Checked first: a refused chunk is not recorded (nor sent to
        // replicas), however large it was.
        const core::Result<bloom::ChunkTarget> target = bloom::check_chunk(filter, iter, data);
        if (!target) {
            refused = true;
            why = target.error();
            return;
        }
        // A counting filter's cells are set, not ORed: copied for a running
        // snapshot first (SnapshotCounts).
        if (filter.counting() && !snapshot_counts_.before_count_change(filter)) {
            throw std::bad_alloc();
        }
        apply_recorded(mutation_log(), filter, iter, data, *target);
        chunks_loaded_.fetch_add(1, std::memory_order_relaxed);
    });
    if (!found) return ChunkStatus::missing;
    if (refused) return core::Error{std::move(why)};
    return ChunkStatus::loaded;
}

core::Status Keyspace::redo_adds(bloom::ScalableFilter& filter, std::span<const RecordedAdd> adds) {
    // Every layer first: a layer that cannot exist refuses the whole record
    // before anything changed, and growing cannot fail halfway through.
    std::uint32_t top = 0;
    for (const RecordedAdd& add : adds) top = std::max(top, add.layer);
    if (!adds.empty() && !filter.redo_layers(top)) {
        return core::Error{"a layer beyond what the filter can grow to"};
    }
    MutationLog* log = mutation_log();
    constexpr std::size_t kBatch = bloom::ScalableFilter::kBatch;
    for (std::size_t first = 0; first < adds.size(); first += kBatch) {
        const auto batch = adds.subspan(first, std::min(kBatch, adds.size() - first));
        if (log == nullptr) {
            for (const RecordedAdd& add : batch) filter.redo_add(add.layer, add.hash);
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
    items_added_.add(static_cast<std::int64_t>(adds.size()));
    return {};
}

core::Status Keyspace::redo_removes(bloom::ScalableFilter& filter,
                                    std::span<const RecordedAdd> removes) {
    for (const RecordedAdd& remove : removes) {
        if (!filter.counting() || remove.layer >= filter.num_layers()) {
            return core::Error{"a delete from a layer the filter does not have"};
        }
    }
    MutationLog* log = mutation_log();
    constexpr std::size_t kBatch = bloom::ScalableFilter::kBatch;
    for (std::size_t first = 0; first < removes.size(); first += kBatch) {
        const auto batch = removes.subspan(first, std::min(kBatch, removes.size() - first));
        bloom::AddRecorder* scope =
            log == nullptr ? nullptr : &log->begin_removes(filter, batch.size());
        DataScope close(log);
        if (!snapshot_counts_.before_count_change(filter)) throw std::bad_alloc();
        for (const RecordedAdd& remove : batch) {
            if (scope != nullptr) scope->record(remove.layer, remove.hash);
            if (filter.redo_remove(remove.layer, remove.hash)) items_added_.add(-1);
        }
    }
    return {};
}

core::Status Keyspace::redo_chunk(bloom::ScalableFilter& filter, std::int64_t iter,
                                  std::string_view data) {
    const core::Result<bloom::ChunkTarget> target = bloom::check_chunk(filter, iter, data);
    if (!target) return core::Error{target.error()};
    if (filter.counting() && !snapshot_counts_.before_count_change(filter)) {
        throw std::bad_alloc();
    }
    apply_recorded(mutation_log(), filter, iter, data, *target);
    chunks_loaded_.fetch_add(1, std::memory_order_relaxed);
    return {};
}

}  // namespace bloomery::store
