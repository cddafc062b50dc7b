#pragma once
// The validating snapshot parser (snapshot_parse.cpp), shared by
// load_snapshot() and check_snapshot() (snapshot_reader.cpp).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/core/result.hpp"
#include "bloomery/cuckoo/cuckoo_object.hpp"
#include "bloomery/persist/snapshot.hpp"

namespace bloomery::persist::snapshot_parse {

struct LayerInfo {
    bloom::LayerGeometry geometry;
    std::uint64_t items;
};

struct Record {
    std::uint64_t index = 0;   // 1-based
    std::uint64_t offset = 0;  // of the type byte
    std::uint64_t bytes = 0;   // whole record, checksum included
    std::string key;
    std::int64_t expire_at_ms = 0;
    std::uint64_t filter_id = 0;  // version 3; 0 before
    bloom::FilterOptions options;
    std::vector<LayerInfo> layers;
    bloom::FilterRef filter;  // empty unless materialized
    // A Cuckoo filter's record: the filter (always built) and the number
    // of its last change; options and layers stay empty.
    cuckoo::CuckooRef cuckoo;
    // An expiring filter's record: the filter (always built).
    bloom::AgeFilterRef age;
};

struct FileHeader {
    std::uint32_t version = 0;
    std::int64_t created_at_ms = 0;
    std::uint64_t journal_id = 0;  // version 3; 0: none
    std::uint64_t journal_offset = 0;
};

// What the parser makes of a record: the filter itself (load_snapshot()),
// or only its description, its words read and checked but not kept
// (check_snapshot()).
enum class Build { filter, description };

struct ParseHooks {
    // Called once options and expiry are known: what to build of the record.
    std::function<Build(const Record&)> build;
    std::function<void(const FileHeader&)> on_header;
    std::function<void(Record&&)> on_record;
};

// Parses the whole file at `path`, handing each record to `hooks`; the hooks
// run before the whole-file checksum is known, so what they build must not
// be used unless this succeeds. Returns the file's size, or what is wrong
// ("PATH: ...").
core::Result<std::uint64_t> parse_file(const std::string& path, const ParseHooks& hooks);

}  // namespace bloomery::persist::snapshot_parse
