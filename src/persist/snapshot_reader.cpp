// Loading a snapshot into the keyspace, and `bloomery --check-snapshot`: both
// read the file through the validating parser (snapshot_parse.hpp), and the
// keyspace changes only once the whole file checked out.

#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "bloomery/persist/snapshot.hpp"
#include "snapshot_format.hpp"
#include "snapshot_parse.hpp"

namespace bloomery::persist {

using snapshot_parse::FileHeader;
using snapshot_parse::LayerInfo;
using snapshot_parse::parse_file;
using snapshot_parse::ParseHooks;
using snapshot_parse::Record;

namespace {

std::string format_time_ms(std::int64_t ms) {
    const auto seconds = static_cast<std::time_t>(ms / 1000);
    std::tm utc{};
    if (!::gmtime_r(&seconds, &utc)) return std::to_string(ms) + " ms";
    char text[64];
    const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
    char millis[16];
    std::snprintf(millis, sizeof millis, ".%03dZ", static_cast<int>(ms % 1000));
    return std::to_string(ms) + " ms (" + std::string(text, n) + millis + ")";
}

std::string format_rate(double rate) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", rate);
    return text;
}

}  // namespace

core::Result<LoadStats> load_snapshot(const std::string& path, store::Keyspace& keyspace) {
    const auto started = std::chrono::steady_clock::now();
    LoadStats stats;
    // One clock reading for the whole file, so "past its deadline" means the
    // same thing for every record. Such keys are loaded all the same: the
    // journal after the snapshot (or a replica's stream) may still move or
    // remove their deadline, and the server that decides deadlines erases
    // them once that has been redone (Manager::enforce_deadlines).
    const std::int64_t now = store::now_ms();
    std::vector<Record> records;
    std::uint64_t past_deadline = 0;

    ParseHooks hooks;
    hooks.build = [](const Record&) { return snapshot_parse::Build::filter; };
    hooks.on_header = [&](const FileHeader& header) {
        stats.journal_id = header.journal_id;
        stats.journal_offset = header.journal_offset;
    };
    hooks.on_record = [&](Record&& record) {
        if (record.expire_at_ms != 0 && record.expire_at_ms <= now) ++past_deadline;
        if (record.cuckoo || record.age) {
            if (record.cuckoo) record.cuckoo->set_id(record.filter_id);
            if (record.age) record.age->set_id(record.filter_id);
            bloom::ScalableFilter::reserve_ids_through(record.filter_id);
            records.push_back(std::move(record));
        } else if (record.filter) {
            // The id the journal names this filter by (a fresh one if the
            // file predates ids).
            if (record.filter_id != 0) {
                record.filter->set_id(record.filter_id);
                bloom::ScalableFilter::reserve_ids_through(record.filter_id);
            }
            // The layer list is only for check_snapshot's report; a million
            // small keys should not hold a million vectors until the end.
            std::vector<LayerInfo>().swap(record.layers);
            records.push_back(std::move(record));
        }
    };

    std::uint64_t file_size = 0;
    try {
        const core::Result<std::uint64_t> parsed = parse_file(path, hooks);
        if (!parsed) return parsed.failure();
        file_size = *parsed;
        // Only now, with every checksum verified, does the keyspace change.
        for (Record& record : records) {
            store::ValueRef value = record.cuckoo ? store::ValueRef(std::move(record.cuckoo))
                                    : record.age  ? store::ValueRef(std::move(record.age))
                                                  : store::ValueRef(std::move(record.filter));
            keyspace.put(record.key, std::move(value), record.expire_at_ms);
        }
    } catch (const std::exception& exception) {
        return core::Error{path + ": " + exception.what()};
    }
    stats.keys = records.size();
    stats.bytes = file_size;
    stats.past_deadline = past_deadline;
    stats.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return stats;
}

namespace {

// --check-snapshot's lines for the file header.
std::string describe_header(const std::string& path, const FileHeader& header) {
    std::string out = "file: " + path + "\n";
    out += "format version: " + std::to_string(header.version) + "\n";
    out += "created at: " + format_time_ms(header.created_at_ms) + "\n";
    if (header.version >= 3) {
        out += "journal: " +
               (header.journal_id == 0
                    ? std::string("none")
                    : "id " + std::to_string(header.journal_id) + ", covered up to offset " +
                          std::to_string(header.journal_offset)) +
               "\n";
    }
    return out;
}

// What --check-snapshot sums over the keys.
struct SnapshotTotals {
    std::uint64_t keys = 0;
    std::uint64_t capacity = 0;
    std::uint64_t items = 0;
    std::uint64_t bit_bytes = 0;
};

// --check-snapshot's line for a Cuckoo filter.
std::string describe_cuckoo(const Record& record, SnapshotTotals& totals) {
    const cuckoo::CuckooObject::Locked locked = record.cuckoo->lock();
    const cuckoo::CuckooFilter& filter = locked.filter();
    ++totals.keys;
    totals.capacity += filter.capacity();
    totals.items += filter.num_items();
    totals.bit_bytes += filter.capacity();
    std::string line = "key " + format::printable_key(record.key) + ": cuckoo";
    line += ", sub-filters " + std::to_string(filter.num_filters());
    line += ", buckets " + std::to_string(filter.num_buckets());
    line += ", bucket size " + std::to_string(filter.bucket_size());
    line += ", items " + std::to_string(filter.num_items());
    line += ", deletes " + std::to_string(filter.num_deletes());
    line += ", expansion " + std::to_string(filter.expansion());
    line += ", max iterations " + std::to_string(filter.max_iterations());
    line += ", changes " + std::to_string(locked.seq());
    line += ", expiry ";
    line += record.expire_at_ms == 0 ? "none" : format_time_ms(record.expire_at_ms);
    line += ", record bytes " + std::to_string(record.bytes);
    line += ", offset " + std::to_string(record.offset) + "\n";
    return line;
}

// --check-snapshot's line for an expiring filter.
std::string describe_age(const Record& record, SnapshotTotals& totals) {
    const bloom::AgeFilter& filter = *record.age;
    const bloom::AgeGeometry g = filter.geometry();
    const std::uint64_t bytes = filter.num_words() * 8;
    ++totals.keys;
    totals.capacity += g.window_items();
    totals.items += filter.items();
    totals.bit_bytes += bytes;
    std::string line = "key " + format::printable_key(record.key) + ": expiring";
    line += ", slices " + std::to_string(g.shape.k) + "+" + std::to_string(g.shape.l);
    line += ", generation items " + std::to_string(g.generation_items);
    line += ", window ";
    line += g.window_ms == 0 ? "items" : std::to_string(g.window_ms) + " ms";
    line += ", generation " + std::to_string(filter.generation());
    line += ", items " + std::to_string(filter.items());
    line += ", error rate " + format_rate(g.error_rate);
    line += ", expiry ";
    line += record.expire_at_ms == 0 ? "none" : format_time_ms(record.expire_at_ms);
    line += ", bytes " + std::to_string(bytes);
    line += ", record bytes " + std::to_string(record.bytes);
    line += ", offset " + std::to_string(record.offset) + "\n";
    return line;
}

// --check-snapshot's lines for one key (and its layers), counted in `totals`.
std::string describe_record(const Record& record, SnapshotTotals& totals) {
    if (record.cuckoo) return describe_cuckoo(record, totals);
    if (record.age) return describe_age(record, totals);
    std::uint64_t capacity = 0;
    std::uint64_t items = 0;
    std::uint64_t bit_bytes = 0;
    for (const LayerInfo& layer : record.layers) {
        capacity += layer.geometry.capacity;
        items += layer.items;
        bit_bytes += layer.geometry.bits / 8;
    }
    ++totals.keys;
    totals.capacity += capacity;
    totals.items += items;
    totals.bit_bytes += bit_bytes;

    std::string line = "key " + format::printable_key(record.key) + ": ";
    line += "layers " + std::to_string(record.layers.size());
    line += ", capacity " + std::to_string(capacity);
    line += ", items " + std::to_string(items);
    line += ", error rate " + format_rate(record.options.error_rate);
    if (record.options.nonscaling) {
        line += ", nonscaling";
    } else {
        line += ", expansion " + std::to_string(record.options.expansion);
    }
    if (record.options.tightening != bloom::kDefaultTightening) {
        line += ", tightening " + format_rate(record.options.tightening);
    }
    line += ", layout ";
    line += bloom::layout_name(record.options.layout);
    line += ", scheme ";
    line += bloom::scheme_name(record.options.scheme);
    if (record.options.scheme == bloom::HashScheme::redisbloom) {
        line += " (options " + std::to_string(record.options.redisbloom_options) + ")";
    }
    line += ", expiry ";
    line += record.expire_at_ms == 0 ? "none" : format_time_ms(record.expire_at_ms);
    line += ", bytes " + std::to_string(bit_bytes);
    line += ", record bytes " + std::to_string(record.bytes);
    line += ", offset " + std::to_string(record.offset);
    line += "\n";
    for (std::size_t i = 0; i < record.layers.size(); ++i) {
        const LayerInfo& layer = record.layers[i];
        const bloom::LayerGeometry& g = layer.geometry;
        line += "  layer " + std::to_string(i) + ": capacity " + std::to_string(g.capacity) +
                ", error rate " + format_rate(g.error_rate) + ", bits " + std::to_string(g.bits) +
                ", hashes " + std::to_string(g.hashes) + ", " +
                std::string(bloom::layout_name(g.layout)) + ", items " +
                std::to_string(layer.items);
        if (g.scheme == bloom::HashScheme::redisbloom) {
            line += ", bpe " + format_rate(g.redisbloom_bpe) + ", n2 " +
                    std::to_string(g.redisbloom_n2);
        }
        line += "\n";
    }
    return line;
}

}  // namespace

SnapshotCheck check_snapshot(const std::string& path) {
    SnapshotCheck check;
    std::string& report = check.report;
    SnapshotTotals totals;
    ParseHooks hooks;
    hooks.build = [](const Record&) { return snapshot_parse::Build::description; };
    hooks.on_header = [&](const FileHeader& header) { report += describe_header(path, header); };
    hooks.on_record = [&](Record&& record) { report += describe_record(record, totals); };

    try {
        const core::Result<std::uint64_t> file_size = parse_file(path, hooks);
        if (!file_size) {
            report += "error: " + file_size.error() + "\n";
            check.verdict = file_size.failure();
            return check;
        }
        report += "keys: " + std::to_string(totals.keys) + ", capacity " +
                  std::to_string(totals.capacity) + ", items " + std::to_string(totals.items) +
                  ", filter bytes " + std::to_string(totals.bit_bytes) + ", file bytes " +
                  std::to_string(*file_size) + "\n";
        report += "checksums: ok\n";
    } catch (const std::exception& exception) {
        check.verdict = core::Error{path + ": " + exception.what()};
    }
    return check;
}

}  // namespace bloomery::persist
