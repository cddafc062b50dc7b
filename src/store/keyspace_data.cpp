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

}  // namespace

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
            items_added_.add(std::count(out.begin(),
                                        out.begin() + static_cast<std::ptrdiff_t>(stored),
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

core::Result<Keyspace::ChunkStatus> Keyspace::load_chunk(std::string_view key, std::int64_t iter,
                                                         std::string_view data) {
    bool refused = false;
    std::string why;
    const bool found = with_filter(key, [&](bloom::ScalableFilter& filter) {
        // Checked first: a refused chunk is not recorded (nor sent to
        // replicas), however large it was.
        const core::Result<bloom::ChunkTarget> target = bloom::check_chunk(filter, iter, data);
        if (!target) {
            refused = true;
            why = target.error();
            return;
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

core::Status Keyspace::redo_chunk(bloom::ScalableFilter& filter, std::int64_t iter,
                                  std::string_view data) {
    const core::Result<bloom::ChunkTarget> target = bloom::check_chunk(filter, iter, data);
    if (!target) return core::Error{target.error()};
    apply_recorded(mutation_log(), filter, iter, data, *target);
    chunks_loaded_.fetch_add(1, std::memory_order_relaxed);
    return {};
}

}  // namespace bloomery::store
