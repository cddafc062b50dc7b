#pragma once
// Reading Redis RDB files for `bloomery --import-rdb FILE`: the RedisBloom
// Bloom filters of a Redis 4.0 to 7.4 dump (RDB versions 8 to 12) become
// RedisBloom-scheme filters (bloom/redisbloom.hpp), bit for bit, and its
// Cuckoo filters become cuckoo::CuckooFilter, slot for slot, all with their
// TTLs; every other value is read through and skipped, counted by type.
//
// What the reader knows of the format (Redis's rdb.c, rdb.h):
// - the "REDIS" magic and version, opcodes AUX, SELECTDB, RESIZEDB,
//   EXPIRETIME_MS, EXPIRETIME, FREQ, IDLE, MODULE_AUX, FUNCTION2,
//   SLOT_INFO and EOF, and the CRC-64 after EOF (0: not computed);
// - lengths in all four forms, strings raw, integer-encoded or
//   LZF-compressed;
// - every value type Redis 7 writes, so each can be skipped: strings,
//   lists, sets, sorted sets, hashes (with field TTLs too), streams with
//   consumer groups, ziplist / listpack / intset encodings, and module
//   values (type MODULE_2): RedisBloom's `MBbloom--` and `MBbloomCF` in
//   their encodings 0 to 4 are loaded as RedisBloom 2.x loads them (a
//   newer encoding is refused), any other module type is read through its
//   module opcodes and skipped.
// Only database 0 is imported (bloomery serves one); filters of other
// databases are skipped with a warning and counted, and so are those whose
// deadline has passed. A Cuckoo filter is checked as CF.LOADCHUNK checks one
// (RedisBloom's integrity check and bloomery's bounds, cuckoo_filter.hpp).
//
// A file that does not read as the format says is refused, naming the byte
// offset and the reason; nothing is written then. Sizes are checked against
// the bytes left before anything is allocated (an LZF string's claimed length
// against what its compressed bytes can expand to), so a hostile file cannot
// make the reader allocate much more than its own size.

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/result.hpp"
#include "bloomery/cuckoo/cuckoo_object.hpp"

namespace bloomery::persist {

struct RdbImportStats {
    std::uint32_t rdb_version = 0;
    std::string redis_version;               // the file's "redis-ver" AUX field, if any
    std::uint64_t filters = 0;               // Bloom filters handed over
    std::uint64_t with_deadline = 0;         // of those, with a TTL
    std::uint64_t cuckoo_filters = 0;        // Cuckoo filters handed over
    std::uint64_t cuckoo_with_deadline = 0;  // of those, with a TTL
    std::uint64_t expired_skipped = 0;       // filters of either kind whose deadline had passed
    std::uint64_t other_databases = 0;       // filters of either kind outside database 0
    std::map<std::string, std::uint64_t> skipped;  // other values, by type name
    bool checksum_verified = false;                // false: the file has none (rdbchecksum no)
};

// One Bloom filter of database 0 whose deadline (0: none) has not passed.
using RdbFilterSink =
    std::function<void(std::string key, bloom::FilterRef filter, std::int64_t expire_at_ms)>;
// The same for one Cuckoo filter.
using RdbCuckooSink =
    std::function<void(std::string key, cuckoo::CuckooRef filter, std::int64_t expire_at_ms)>;
using RdbWarningSink = std::function<void(const std::string& warning)>;

// Reads a whole RDB image, handing each Bloom filter to `on_filter` and each
// Cuckoo filter to `on_cuckoo` (when set; else it is read, checked, counted
// and dropped) as it is read (so the caller must discard them if this
// fails), and each warning to `warn`. `now_ms` decides what has expired.
// Fails ("offset N: reason") on anything the format does not allow, a bad
// checksum, or a filter outside bloomery's bounds.
core::Result<RdbImportStats> read_rdb(std::span<const unsigned char> bytes, std::int64_t now_ms,
                                      const RdbFilterSink& on_filter, const RdbWarningSink& warn,
                                      const RdbCuckooSink& on_cuckoo = {});

// What `--import-rdb` did.
struct RdbImportReport {
    // What was imported and skipped, warnings included (as far as it got).
    std::string report;
    // Failed: why, naming the file.
    core::Status status;
};
// `bloomery --import-rdb FILE`: reads FILE and writes its filters as a
// new snapshot at config.snapshot_path() (atomically, as every snapshot),
// which the server then loads at its next start. Refuses, writing nothing,
// when that snapshot or journal segments (config.appendfilename) already
// exist in config.dir: an import never mixes with or replaces data.
RdbImportReport import_rdb(const std::string& rdb_path, const core::Config& config);

}  // namespace bloomery::persist
