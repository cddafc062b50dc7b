// The RDB reader of `bloomery --import-rdb` (include/bloomery/persist/
// rdb_import.hpp): the file's opcodes, keys and values in Redis's format
// (src/rdb.c, src/rdb.h), every value type Redis 7 writes read through and
// skipped, RedisBloom's Bloom and Cuckoo filters handed over
// (rdb_module.hpp).

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "bloomery/persist/rdb_import.hpp"
#include "rdb_cursor.hpp"
#include "rdb_format.hpp"
#include "rdb_module.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {
namespace rdb {
namespace {

// What Redis calls a value type (TYPE), for the skip counts.
std::string type_name(std::uint8_t type) {
    switch (type) {
        case kTypeString:
            return "string";
        case kTypeList:
        case kTypeListZiplist:
        case kTypeListQuicklist:
        case kTypeListQuicklist2:
            return "list";
        case kTypeSet:
        case kTypeSetIntset:
        case kTypeSetListpack:
            return "set";
        case kTypeZset:
        case kTypeZset2:
        case kTypeZsetZiplist:
        case kTypeZsetListpack:
            return "zset";
        case kTypeStreamListpacks:
        case kTypeStreamListpacks2:
        case kTypeStreamListpacks3:
            return "stream";
        default:
            return "hash";
    }
}

// One pass over a whole image: its header, then opcode after opcode up to
// EOF and the checksum, each key's value loaded (a RedisBloom Bloom or
// Cuckoo filter) or read through and counted by type.
class RdbReader {
public:
    struct Sinks {
        const RdbFilterSink& on_filter;
        const RdbCuckooSink& on_cuckoo;
        const RdbWarningSink& warn;
    };
    RdbReader(std::span<const unsigned char> bytes, std::int64_t now_ms, const Sinks& sinks,
              RdbImportStats& stats)
        : in_(bytes),
          now_ms_(now_ms),
          on_filter_(sinks.on_filter),
          on_cuckoo_(sinks.on_cuckoo),
          warn_(sinks.warn),
          stats_(stats) {}

    void read() {
        read_header();
        std::int64_t deadline = 0;
        std::uint64_t database = 0;
        for (;;) {
            const std::uint64_t at = in_.offset();
            const std::uint8_t type = in_.u8("an opcode or value type");
            switch (type) {
                case kOpEof:
                    read_checksum(at);
                    return;
                case kOpSelectDb:
                    database = in_.length("SELECTDB database number");
                    continue;
                case kOpResizeDb:
                    in_.length("RESIZEDB key count");
                    in_.length("RESIZEDB expire count");
                    continue;
                case kOpExpireTimeMs:
                    deadline = static_cast<std::int64_t>(in_.le(8, "EXPIRETIME_MS"));
                    continue;
                case kOpExpireTime:
                    deadline = static_cast<std::int64_t>(
                                   static_cast<std::int32_t>(in_.le(4, "EXPIRETIME"))) *
                               1000;
                    continue;
                case kOpFreq:
                    in_.u8("FREQ");
                    continue;
                case kOpIdle:
                    in_.length("IDLE");
                    continue;
                case kOpAux:
                    read_aux();
                    continue;
                case kOpModuleAux:
                    read_module_aux(at);
                    continue;
                case kOpFunction2:
                    in_.skip_string("FUNCTION2 library");
                    continue;
                case kOpFunctionPreGa:
                    in_.fail(at, "pre-release function format (Redis 7.0 RC) is not supported");
                case kOpSlotInfo:
                    in_.length("SLOT_INFO slot");
                    in_.length("SLOT_INFO size");
                    in_.length("SLOT_INFO expires size");
                    continue;
                default:
                    read_key_value(at, type, database, deadline);
                    deadline = 0;
                    continue;
            }
        }
    }

private:
    void read_header() {
        in_.need(9, "the header");
        if (std::memcmp(in_.at(0), "REDIS", 5) != 0) in_.fail(0, "not an RDB file (bad magic)");
        std::uint32_t version = 0;
        for (int i = 5; i < 9; ++i) {
            const unsigned char c = *in_.at(static_cast<std::uint64_t>(i));
            if (c < '0' || c > '9') in_.fail(5, "not an RDB file (bad version digits)");
            version = version * 10 + (c - '0');
        }
        if (version < kOldestVersion || version > kNewestVersion) {
            in_.fail(5, "RDB version " + std::to_string(version) + " is not supported (" +
                            std::to_string(kOldestVersion) + " to " +
                            std::to_string(kNewestVersion) + ": Redis 4.0 to 7.4)");
        }
        stats_.rdb_version = version;
        in_.skip(9, "the header");
    }

    void read_aux() {
        const std::string key = in_.string("AUX field name");
        if (key == "redis-ver") {
            stats_.redis_version = in_.string("AUX field value");
        } else {
            in_.skip_string("AUX field value");
        }
    }

    void read_module_aux(std::uint64_t at) {
        const std::uint64_t id = in_.length("MODULE_AUX module id");
        if (in_.length("MODULE_AUX when opcode") != kModuleUint) {
            in_.fail(at, "MODULE_AUX without its when opcode");
        }
        in_.length("MODULE_AUX when");
        skip_module_fields(in_, module_type_name(id));
    }

    void read_checksum(std::uint64_t eof_at) {
        if (stats_.rdb_version >= 5) {
            const std::uint64_t at = in_.offset();
            const std::uint64_t stored = in_.le(8, "the checksum");
            if (stored != 0) {
                const std::uint64_t computed = Crc64().of(in_.at(0), eof_at + 1);
                if (stored != computed) in_.fail(at, "checksum mismatch");
                stats_.checksum_verified = true;
            }
        }
        if (in_.left() != 0) in_.fail(in_.offset(), "bytes after the end of the RDB file");
    }

    void read_key_value(std::uint64_t at, std::uint8_t type, std::uint64_t database,
                        std::int64_t deadline) {
        std::string key = in_.string("a key");
        if (type == kTypeModule2) {
            const std::uint64_t id_at = in_.offset();
            const std::uint64_t id = in_.length("a module type id");
            const std::string name = module_type_name(id);
            const auto encoding = static_cast<std::uint32_t>(id & 1023);
            if (name == kBloomType) {
                bloom::FilterRef filter = bloom_values_.read(id_at, encoding);
                if (!admit(at, key, "Bloom filter", database, deadline)) return;
                ++stats_.filters;
                if (deadline != 0) ++stats_.with_deadline;
                if (on_filter_) on_filter_(std::move(key), std::move(filter), deadline);
                return;
            }
            if (name == kCuckooType) {
                cuckoo::CuckooRef filter = read_cuckoo_value(in_, id_at, encoding);
                if (!admit(at, key, "Cuckoo filter", database, deadline)) return;
                ++stats_.cuckoo_filters;
                if (deadline != 0) ++stats_.cuckoo_with_deadline;
                if (on_cuckoo_) on_cuckoo_(std::move(key), std::move(filter), deadline);
                return;
            }
            skip_module_fields(in_, name);
            ++stats_.skipped[name];
            return;
        }
        if (type == kTypeModulePreGa) {
            in_.fail(at, "pre-release module value format (Redis 4.0 RC) is not supported");
        }
        skip_value(at, type);
        ++stats_.skipped[type_name(type)];
    }

    // Whether a filter (`kind`) read under `key` is handed over: in database
    // 0, not expired, and its key not seen before (else the file is refused).
    bool admit(std::uint64_t at, const std::string& key, const char* kind, std::uint64_t database,
               std::int64_t deadline) {
        if (database != 0) {
            ++stats_.other_databases;
            if (warn_) {
                warn_(std::string(kind) + " " + format::printable_key(key) + " is in database " +
                      std::to_string(database) + ": bloomery serves database 0 only, skipped");
            }
            return false;
        }
        if (deadline < 0) in_.fail(at, "negative expire time");
        if (deadline != 0 && deadline <= now_ms_) {
            ++stats_.expired_skipped;
            return false;
        }
        if (!keys_.insert(key).second) in_.fail(at, "duplicate key " + format::printable_key(key));
        return true;
    }

    // A count that says how many elements follow; each is at least a byte,
    // so a count beyond the bytes left is corrupt (and loops stay bounded).
    std::uint64_t count(const char* what) {
        const std::uint64_t at = in_.offset();
        const std::uint64_t n = in_.length(what);
        if (n > in_.left()) {
            in_.fail(at, std::string(what) + " of " + std::to_string(n) +
                             " exceeds the bytes left in the file");
        }
        return n;
    }

    void skip_value(std::uint64_t at, std::uint8_t type) {
        switch (type) {
            case kTypeString:
            case kTypeHashZipmap:
            case kTypeListZiplist:
            case kTypeSetIntset:
            case kTypeZsetZiplist:
            case kTypeHashZiplist:
            case kTypeHashListpack:
            case kTypeZsetListpack:
            case kTypeSetListpack:
            case kTypeHashListpackExPreGa:
                in_.skip_string("a value");
                return;
            case kTypeHashListpackEx:
                in_.skip(8, "a hash's next expire time");
                in_.skip_string("a value");
                return;
            case kTypeList:
            case kTypeSet:
            case kTypeListQuicklist:
                for (std::uint64_t n = count("an element count"); n > 0; --n) {
                    in_.skip_string("an element");
                }
                return;
            case kTypeListQuicklist2:
                for (std::uint64_t n = count("a node count"); n > 0; --n) {
                    in_.length("a node container");
                    in_.skip_string("a node");
                }
                return;
            case kTypeHash:
                for (std::uint64_t n = count("a field count"); n > 0; --n) {
                    in_.skip_string("a field");
                    in_.skip_string("a field value");
                }
                return;
            case kTypeHashMetadata:
                in_.skip(8, "a hash's next expire time");
                [[fallthrough]];
            case kTypeHashMetadataPreGa:
                for (std::uint64_t n = count("a field count"); n > 0; --n) {
                    in_.length("a field TTL");
                    in_.skip_string("a field");
                    in_.skip_string("a field value");
                }
                return;
            case kTypeZset:
                for (std::uint64_t n = count("a member count"); n > 0; --n) {
                    in_.skip_string("a member");
                    const std::uint8_t length = in_.u8("a score");
                    if (length < 253) in_.skip(length, "a score");
                }
                return;
            case kTypeZset2:
                for (std::uint64_t n = count("a member count"); n > 0; --n) {
                    in_.skip_string("a member");
                    in_.skip(8, "a score");
                }
                return;
            case kTypeStreamListpacks:
            case kTypeStreamListpacks2:
            case kTypeStreamListpacks3:
                skip_stream(type);
                return;
            default:
                in_.fail(at, "unknown value type " + std::to_string(type));
        }
    }

    void skip_stream(std::uint8_t type) {
        for (std::uint64_t n = count("a stream's listpack count"); n > 0; --n) {
            in_.skip_string("a stream node key");
            in_.skip_string("a stream listpack");
        }
        in_.length("a stream's length");
        in_.length("a stream's last id");
        in_.length("a stream's last id");
        if (type >= kTypeStreamListpacks2) {
            for (int i = 0; i < 5; ++i) in_.length("a stream's ids and counters");
        }
        for (std::uint64_t groups = count("a stream's group count"); groups > 0; --groups) {
            in_.skip_string("a consumer group name");
            in_.length("a group's last id");
            in_.length("a group's last id");
            if (type >= kTypeStreamListpacks2) in_.length("a group's entries read");
            for (std::uint64_t pel = count("a group's pending count"); pel > 0; --pel) {
                in_.skip(16, "a pending entry id");
                in_.skip(8, "a pending entry's delivery time");
                in_.length("a pending entry's delivery count");
            }
            for (std::uint64_t consumers = count("a group's consumer count"); consumers > 0;
                 --consumers) {
                in_.skip_string("a consumer name");
                in_.skip(8, "a consumer's seen time");
                if (type >= kTypeStreamListpacks3) in_.skip(8, "a consumer's active time");
                for (std::uint64_t pel = count("a consumer's pending count"); pel > 0; --pel) {
                    in_.skip(16, "a consumer's pending entry id");
                }
            }
        }
    }

    Cursor in_;
    std::int64_t now_ms_;
    const RdbFilterSink& on_filter_;
    const RdbCuckooSink& on_cuckoo_;
    const RdbWarningSink& warn_;
    RdbImportStats& stats_;
    std::unordered_set<std::string> keys_;
    BloomValueReader bloom_values_{in_};
};

}  // namespace
}  // namespace rdb

core::Result<RdbImportStats> read_rdb(std::span<const unsigned char> bytes, std::int64_t now_ms,
                                      const RdbFilterSink& on_filter, const RdbWarningSink& warn,
                                      const RdbCuckooSink& on_cuckoo) {
    RdbImportStats stats;
    try {
        rdb::RdbReader reader(bytes, now_ms, {on_filter, on_cuckoo, warn}, stats);
        reader.read();
        return stats;
    } catch (const rdb::Failure& failure) {
        return core::Error{"offset " + std::to_string(failure.offset) + ": " + failure.reason};
    } catch (const std::bad_alloc&) {
    } catch (const std::length_error&) {
    }
    return core::Error{"out of memory while reading"};
}

}  // namespace bloomery::persist
