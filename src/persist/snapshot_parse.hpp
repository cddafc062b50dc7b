#pragma once
// The validating snapshot parser (snapshot_parse.cpp), shared by
// load_snapshot() and check_snapshot() (snapshot_reader.cpp).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bloomery/bloom/bounds.hpp"
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
};

struct FileHeader {
    std::uint32_t version = 0;
    std::int64_t created_at_ms = 0;
    std::uint64_t journal_id = 0;  // version 3; 0: none
    std::uint64_t journal_offset = 0;
};

struct ParseHooks {
    // Called once options and expiry are known: should the filter be built?
    std::function<bool(const Record&)> materialize;
    std::function<void(const FileHeader&)> on_header;
    std::function<void(Record&&)> on_record;
};

// Parses the whole file at `path`, handing each record to `hooks`; the hooks
// run before the whole-file checksum is known, so what they build must not
// be used unless this returns true. False with `error` ("PATH: what is
// wrong") otherwise. `file_size` gets the file's size.
bool parse_file(const std::string& path, const ParseHooks& hooks, std::uint64_t& file_size,
                std::string& error);

}  // namespace bloomery::persist::snapshot_parse
