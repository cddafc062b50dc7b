// `bloomery --import-rdb`: the Bloom and Cuckoo filters of a Redis RDB file (read by
// rdb_reader.cpp) loaded into a keyspace of their own and written as the
// data directory's new snapshot, with a report of what was imported and
// what stayed behind.

#include <filesystem>

#include "bloomery/persist/rdb_import.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/keyspace.hpp"
#include "journal_format.hpp"
#include "mapped_file.hpp"

namespace bloomery::persist {
namespace {

// An import never mixes with or replaces data: --dir (made if missing) holds
// no snapshot and no journal segments.
core::Status check_import_target(const core::Config& config) {
    const std::string target = config.snapshot_path();
    std::error_code ec;
    // The data directory as the server makes it at start, if it is missing.
    std::filesystem::create_directories(config.dir, ec);
    if (ec) return core::Error{config.dir + ": cannot create: " + ec.message()};
    if (std::filesystem::exists(target, ec)) {
        return core::Error{target +
                           " exists: --import-rdb writes a new snapshot and replaces none (move it "
                           "away, or import into another --dir)"};
    }
    for (const auto& entry : std::filesystem::directory_iterator(config.dir, ec)) {
        std::uint64_t start = 0;
        if (journal_format::parse_segment_name(entry.path().filename().string(),
                                               config.appendfilename, start)) {
            return core::Error{"journal segments (" + entry.path().string() + ") exist in " +
                               config.dir +
                               ": --import-rdb imports into an empty data directory only"};
        }
    }
    if (ec && ec != std::errc::no_such_file_or_directory) {
        return core::Error{config.dir + ": " + ec.message()};
    }
    return {};
}

// The report's lines for what was read: the file, the filters imported and
// skipped, and the values that are neither Bloom nor Cuckoo filters.
std::string describe_import(const std::string& rdb_path, const RdbImportStats& stats,
                            const std::string& warnings) {
    std::string report = "file: " + rdb_path + "\n";
    report += "RDB version " + std::to_string(stats.rdb_version);
    if (!stats.redis_version.empty()) report += " (Redis " + stats.redis_version + ")";
    report += stats.checksum_verified ? ", checksum ok\n" : ", no checksum in the file\n";
    report += warnings;
    report += "Bloom filters imported: " + std::to_string(stats.filters) + " (" +
              std::to_string(stats.with_deadline) + " with a TTL)\n";
    report += "Cuckoo filters imported: " + std::to_string(stats.cuckoo_filters) + " (" +
              std::to_string(stats.cuckoo_with_deadline) + " with a TTL)\n";
    report += "Bloom and Cuckoo filters skipped: " + std::to_string(stats.expired_skipped) +
              " expired, " + std::to_string(stats.other_databases) + " outside database 0\n";
    std::uint64_t skipped = 0;
    std::string by_type;
    for (const auto& [type, n] : stats.skipped) {
        skipped += n;
        by_type += (by_type.empty() ? "" : ", ") + type + " " + std::to_string(n);
    }
    if (skipped != 0) {
        // bloomery holds Bloom and Cuckoo filters only: say what stays behind.
        report += "warning: skipped " + std::to_string(skipped) +
                  " values that are neither Bloom nor Cuckoo filters (by type: " + by_type + ")\n";
    }
    report += "other values skipped: " + std::to_string(skipped) + "\n";
    return report;
}

}  // namespace

RdbImportReport import_rdb(const std::string& rdb_path, const core::Config& config) {
    RdbImportReport result;
    if (core::Status target = check_import_target(config); !target) {
        result.status = target;
        return result;
    }
    MappedFile file;
    if (core::Status opened = file.open(rdb_path); !opened) {
        result.status = opened;
        return result;
    }
    store::Keyspace keyspace(config.keyspace_shards);
    std::string warnings;
    const RdbFilterSink on_filter = [&](const std::string& key, bloom::FilterRef filter,
                                        std::int64_t deadline) {
        keyspace.put(key, std::move(filter), deadline);
    };
    const RdbCuckooSink on_cuckoo = [&](const std::string& key, cuckoo::CuckooRef filter,
                                        std::int64_t deadline) {
        keyspace.put(key, std::move(filter), deadline);
    };
    const RdbWarningSink warn = [&](const std::string& warning) {
        warnings += "warning: " + warning + "\n";
    };
    const core::Result<RdbImportStats> stats =
        read_rdb(std::span<const unsigned char>(file.data(), file.size()), store::now_ms(),
                 on_filter, warn, on_cuckoo);
    if (!stats) {
        result.status = core::Error{rdb_path + ": " + stats.error()};
        return result;
    }
    result.report = describe_import(rdb_path, *stats, warnings);
    const core::Result<SaveStats> saved = save_snapshot(keyspace, config.snapshot_path());
    if (!saved) {
        result.status = saved.failure();
        return result;
    }
    result.report += "snapshot written: " + config.snapshot_path() + " (" +
                     std::to_string(saved->keys) + " keys, " + std::to_string(saved->bytes) +
                     " bytes)\n";
    return result;
}

}  // namespace bloomery::persist
