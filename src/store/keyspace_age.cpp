// store::Keyspace's changes to expiring filters (bloom/age_filter.hpp):
// adds and shifts, live and redone, each inside a data scope of the
// journal (MutationLog).

#include <algorithm>
#include <new>

#include "bloomery/store/keyspace.hpp"

namespace bloomery::store {

bool Keyspace::add_age_items(std::string_view key, std::span<const std::string_view> items,
                             std::vector<AgeAdded>& results, bool& full) {
    results.clear();
    return with_value(key, [&](const ValueRef& value) {
        bloom::AgeFilter& filter = value.age();
        results.clear();
        MutationLog* log = mutation_log();
        constexpr std::size_t kBatch = bloom::ScalableFilter::kBatch;
        std::int64_t added = 0;
        for (std::size_t first = 0; first < items.size(); first += kBatch) {
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
            }
        }
        items_added_.add(added);
    });
}

void Keyspace::shift_age(bloom::AgeFilter& filter, std::uint64_t now_ms) {
    MutationLog* log = mutation_log();
    if (log != nullptr) log->begin_age_shift(filter, filter.generation() + 1, now_ms);
    DataScope close(log);
    filter.shift(now_ms);
}

void Keyspace::redo_age_adds(bloom::AgeFilter& filter, std::span<const RecordedAgeAdd> adds) {
    MutationLog* log = mutation_log();
    constexpr std::size_t kBatch = bloom::ScalableFilter::kBatch;
    for (std::size_t first = 0; first < adds.size(); first += kBatch) {
        const auto batch = adds.subspan(first, std::min(kBatch, adds.size() - first));
        bloom::AgeRecorder* scope =
            log != nullptr ? &log->begin_age_adds(filter, batch.size()) : nullptr;
        DataScope close(log);
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
    if (log != nullptr) log->begin_age_shift(filter, generation, shifted_ms);
    DataScope close(log);
    filter.advance_to(generation, shifted_ms);
}

}  // namespace bloomery::store
