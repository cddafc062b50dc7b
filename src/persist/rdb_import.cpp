// The RDB reader of `bloomery --import-rdb` (include/bloomery/persist/
// rdb_import.hpp). The format is Redis's (src/rdb.c, src/rdb.h); RedisBloom's
// Bloom filter value is what its BFRdbSave writes through the module
// serialization opcodes (RedisBloom src/rebloom.c), read as BFRdbLoad reads
// it.

#include "bloomery/persist/rdb_import.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/keyspace.hpp"
#include "journal_format.hpp"
#include "mapped_file.hpp"
#include "snapshot_format.hpp"

namespace bloomery::persist {
namespace {

// Opcodes and value types (rdb.h).
enum : std::uint8_t {
    kOpSlotInfo = 244,
    kOpFunction2 = 245,
    kOpFunctionPreGa = 246,
    kOpModuleAux = 247,
    kOpIdle = 248,
    kOpFreq = 249,
    kOpAux = 250,
    kOpResizeDb = 251,
    kOpExpireTimeMs = 252,
    kOpExpireTime = 253,
    kOpSelectDb = 254,
    kOpEof = 255,
};
enum : std::uint8_t {
    kTypeString = 0,
    kTypeList = 1,
    kTypeSet = 2,
    kTypeZset = 3,
    kTypeHash = 4,
    kTypeZset2 = 5,
    kTypeModulePreGa = 6,
    kTypeModule2 = 7,
    kTypeHashZipmap = 9,
    kTypeListZiplist = 10,
    kTypeSetIntset = 11,
    kTypeZsetZiplist = 12,
    kTypeHashZiplist = 13,
    kTypeListQuicklist = 14,
    kTypeStreamListpacks = 15,
    kTypeHashListpack = 16,
    kTypeZsetListpack = 17,
    kTypeListQuicklist2 = 18,
    kTypeStreamListpacks2 = 19,
    kTypeSetListpack = 20,
    kTypeStreamListpacks3 = 21,
    kTypeHashMetadataPreGa = 22,
    kTypeHashListpackExPreGa = 23,
    kTypeHashMetadata = 24,
    kTypeHashListpackEx = 25,
};
// Module value opcodes.
enum : std::uint64_t {
    kModuleEof = 0,
    kModuleSint = 1,
    kModuleUint = 2,
    kModuleFloat = 3,
    kModuleDouble = 4,
    kModuleString = 5,
};

constexpr std::uint32_t kOldestVersion = 8;   // Redis 4.0: module values as MODULE_2
constexpr std::uint32_t kNewestVersion = 12;  // Redis 7.4
// RedisBloom's Bloom filter type, and the newest encoding it writes (2.x: 4).
constexpr std::string_view kBloomType = "MBbloom--";
constexpr std::uint32_t kBloomNewestEncoding = 4;
constexpr std::string_view kCuckooType = "MBbloomCF";
// LZF output per input byte at most: a 3-byte back reference copies 264.
constexpr std::uint64_t kMaxLzfExpansion = 88;

struct Failure {
    std::uint64_t offset;
    std::string reason;
};

// Redis's CRC-64: the Jones polynomial, reflected, no final xor.
class Crc64 {
public:
    Crc64() {
        constexpr std::uint64_t kPoly = 0x95ac9329ac4bc9b5ull;
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint64_t crc = i;
            for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) != 0 ? kPoly : 0);
            table_[i] = crc;
        }
    }
    std::uint64_t of(const unsigned char* data, std::size_t size) const {
        std::uint64_t crc = 0;
        for (std::size_t i = 0; i < size; ++i) crc = table_[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
        return crc;
    }

private:
    std::array<std::uint64_t, 256> table_{};
};

// Decompresses LZF (liblzf's format, as Redis writes it) into `out`, which
// holds exactly the expected length; false on any malformed token.
bool lzf_decompress(const unsigned char* in, std::size_t in_size, unsigned char* out,
                    std::size_t out_size) {
    std::size_t ip = 0;
    std::size_t op = 0;
    while (ip < in_size) {
        const unsigned ctrl = in[ip++];
        if (ctrl < 32) {  // a literal run of ctrl + 1 bytes
            const std::size_t run = ctrl + 1;
            if (run > in_size - ip || run > out_size - op) return false;
            std::memcpy(out + op, in + ip, run);
            ip += run;
            op += run;
            continue;
        }
        std::size_t length = ctrl >> 5;  // a back reference
        if (length == 7) {
            if (ip >= in_size) return false;
            length += in[ip++];
        }
        if (ip >= in_size) return false;
        const std::size_t back = ((ctrl & 0x1f) << 8) + in[ip++] + 1;
        if (back > op) return false;
        length += 2;
        if (length > out_size - op) return false;
        for (std::size_t i = 0; i < length; ++i, ++op) out[op] = out[op - back];
    }
    return op == out_size;
}

std::string module_type_name(std::uint64_t id) {
    static constexpr char kCharset[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string name(9, ' ');
    std::uint64_t bits = id >> 10;
    for (int i = 8; i >= 0; --i) {
        name[static_cast<std::size_t>(i)] = kCharset[bits & 63];
        bits >>= 6;
    }
    return name;
}

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

// A bounds-checked cursor over the image. Every read names its offset when
// it fails.
class Cursor {
public:
    explicit Cursor(std::span<const unsigned char> bytes) : bytes_(bytes) {}

    std::uint64_t offset() const { return pos_; }
    std::uint64_t left() const { return bytes_.size() - pos_; }
    const unsigned char* at(std::uint64_t offset) const { return bytes_.data() + offset; }

    [[noreturn]] void fail(std::uint64_t offset, std::string reason) const {
        throw Failure{offset, std::move(reason)};
    }
    void need(std::uint64_t n, const char* what) const {
        if (n > left()) {
            fail(pos_, std::string("unexpected end of file (truncated) reading ") + what);
        }
    }
    std::uint8_t u8(const char* what) {
        need(1, what);
        return bytes_[pos_++];
    }
    std::uint64_t le(std::size_t n, const char* what) {
        need(n, what);
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i)
            v |= static_cast<std::uint64_t>(bytes_[pos_ + i]) << (8 * i);
        pos_ += n;
        return v;
    }
    std::uint64_t be(std::size_t n, const char* what) {
        need(n, what);
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i) v = (v << 8) | bytes_[pos_ + i];
        pos_ += n;
        return v;
    }
    void skip(std::uint64_t n, const char* what) {
        need(n, what);
        pos_ += n;
    }
    double f64(const char* what) { return std::bit_cast<double>(le(8, what)); }

    // A length (rdbLoadLen). `encoded` is set for the special string forms
    // (the low six bits then say which) instead of failing.
    std::uint64_t length(const char* what, bool* encoded = nullptr) {
        const std::uint64_t start = pos_;
        const std::uint8_t first = u8(what);
        switch (first >> 6) {
            case 0:
                return first & 0x3f;
            case 1:
                return (static_cast<std::uint64_t>(first & 0x3f) << 8) | u8(what);
            case 2:
                if (first == 0x80) return be(4, what);
                if (first == 0x81) return be(8, what);
                fail(start, std::string("unknown length encoding in ") + what);
            default:
                if (encoded == nullptr) {
                    fail(start, std::string("an encoded string where a length was expected (") +
                                    what + ")");
                }
                *encoded = true;
                return first & 0x3f;
        }
    }

    // A string, skipped.
    void skip_string(const char* what) { read_string(what, nullptr); }
    // A string, read in full (decompressed, integers as decimal text).
    std::string string(const char* what) {
        std::string decoded;
        const std::string_view bytes = string_bytes(what, decoded);
        return bytes.data() == decoded.data() ? decoded : std::string(bytes);
    }
    // A string's bytes: a view into the image when it is stored raw, or into
    // `scratch`, which receives it decoded otherwise.
    std::string_view string_bytes(const char* what, std::string& scratch) {
        std::string_view raw;
        read_string(what, &scratch, &raw);
        return raw.data() != nullptr ? raw : std::string_view(scratch);
    }

private:
    void read_string(const char* what, std::string* out, std::string_view* raw = nullptr) {
        bool encoded = false;
        const std::uint64_t start = pos_;
        const std::uint64_t n = length(what, &encoded);
        if (!encoded) {
            need(n, what);
            const auto* at = reinterpret_cast<const char*>(bytes_.data() + pos_);
            if (raw) {
                *raw = std::string_view(at == nullptr ? "" : at, n);
            } else if (out) {
                out->assign(at, n);
            }
            pos_ += n;
            return;
        }
        switch (n) {
            case 0:
            case 1:
            case 2: {  // an integer of 1, 2 or 4 bytes, little-endian, signed
                const std::size_t size = n == 0 ? 1 : (n == 1 ? 2 : 4);
                const std::uint64_t bits = le(size, what);
                const std::uint64_t sign = std::uint64_t{1} << (8 * size - 1);
                const auto value = static_cast<std::int64_t>((bits ^ sign) - sign);
                if (out) *out = std::to_string(value);
                return;
            }
            case 3: {  // LZF
                const std::uint64_t compressed = length(what);
                const std::uint64_t size = length(what);
                need(compressed, what);
                if (size == 0 || compressed == 0 || size / kMaxLzfExpansion > compressed) {
                    fail(start, std::string("LZF string of ") + std::to_string(compressed) +
                                    " bytes cannot hold " + std::to_string(size) + " (" + what +
                                    ")");
                }
                if (out) {
                    out->resize(size);
                    if (!lzf_decompress(bytes_.data() + pos_, compressed,
                                        reinterpret_cast<unsigned char*>(out->data()), size)) {
                        fail(start, std::string("corrupt LZF-compressed string (") + what + ")");
                    }
                }
                pos_ += compressed;
                return;
            }
            default:
                fail(start, std::string("unknown string encoding ") + std::to_string(n) + " (" +
                                what + ")");
        }
    }

    std::span<const unsigned char> bytes_;
    std::uint64_t pos_ = 0;
};

// RedisBloom's value: the module opcodes of one field after another.
class ModuleReader {
public:
    explicit ModuleReader(Cursor& in) : in_(in) {}
    std::uint64_t unsigned_field(const char* what) {
        expect(kModuleUint, what);
        return in_.length(what);
    }
    double double_field(const char* what) {
        expect(kModuleDouble, what);
        return in_.f64(what);
    }
    // A view into the file, or into `scratch` when the string had to be
    // decoded (LZF, an integer).
    std::string_view string_field(const char* what, std::string& scratch) {
        expect(kModuleString, what);
        return in_.string_bytes(what, scratch);
    }
    void end(const char* type) {
        const std::uint64_t at = in_.offset();
        if (in_.length("module value end") != kModuleEof) {
            in_.fail(at, std::string("the ") + type + " value does not end where it should");
        }
    }

private:
    void expect(std::uint64_t opcode, const char* what) {
        const std::uint64_t at = in_.offset();
        const std::uint64_t got = in_.length(what);
        if (got != opcode) {
            in_.fail(at, std::string("module opcode ") + std::to_string(got) + " where " + what +
                             " (opcode " + std::to_string(opcode) + ") was expected");
        }
    }
    Cursor& in_;
};

class RdbReader {
public:
    RdbReader(std::span<const unsigned char> bytes, std::int64_t now_ms,
              const RdbFilterSink& on_filter, const RdbWarningSink& warn, RdbImportStats& stats)
        : in_(bytes), now_ms_(now_ms), on_filter_(on_filter), warn_(warn), stats_(stats) {}

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
        skip_module_fields(module_type_name(id));
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
            if (name == kBloomType) {
                bloom::FilterRef filter = read_bloom(id_at, static_cast<std::uint32_t>(id & 1023));
                take_filter(at, std::move(key), std::move(filter), database, deadline);
                return;
            }
            skip_module_fields(name);
            count_skipped(name, key, database);
            return;
        }
        if (type == kTypeModulePreGa) {
            in_.fail(at, "pre-release module value format (Redis 4.0 RC) is not supported");
        }
        skip_value(at, type);
        count_skipped(type_name(type), key, database);
    }

    void count_skipped(const std::string& type, const std::string& key, std::uint64_t database) {
        ++stats_.skipped[type];
        if (type == kCuckooType && warn_) {
            warn_("key " + format::printable_key(key) + " in database " + std::to_string(database) +
                  " is a Cuckoo filter: not supported yet, skipped");
        }
    }

    void take_filter(std::uint64_t at, std::string key, bloom::FilterRef filter,
                     std::uint64_t database, std::int64_t deadline) {
        if (database != 0) {
            ++stats_.other_databases;
            if (warn_) {
                warn_("Bloom filter " + format::printable_key(key) + " is in database " +
                      std::to_string(database) + ": bloomery serves database 0 only, skipped");
            }
            return;
        }
        if (deadline < 0) in_.fail(at, "negative expire time");
        if (deadline != 0 && deadline <= now_ms_) {
            ++stats_.expired_skipped;
            return;
        }
        if (!keys_.insert(key).second) in_.fail(at, "duplicate key " + format::printable_key(key));
        ++stats_.filters;
        if (deadline != 0) ++stats_.with_deadline;
        if (on_filter_) on_filter_(std::move(key), std::move(filter), deadline);
    }

    // BFRdbLoad, encodings 0 to 4, checked as RedisBloom checks a loaded
    // chain and then against bloomery's bounds before anything is allocated.
    bloom::FilterRef read_bloom(std::uint64_t at, std::uint32_t encoding) {
        if (encoding > kBloomNewestEncoding) {
            in_.fail(at, "RedisBloom Bloom filter encoding " + std::to_string(encoding) +
                             " is newer than this reader knows (" +
                             std::to_string(kBloomNewestEncoding) + ")");
        }
        ModuleReader m(in_);
        const std::uint64_t size = m.unsigned_field("the item count");
        const std::uint64_t count_at = in_.offset();
        const std::uint64_t nfilters = m.unsigned_field("the sub-filter count");
        if (nfilters == 0) in_.fail(count_at, "Bloom filter without sub-filters");
        if (nfilters > bloom::kMaxLayers) {
            in_.fail(count_at, "Bloom filter of " + std::to_string(nfilters) +
                                   " sub-filters, more than the " +
                                   std::to_string(bloom::kMaxLayers) + " bloomery keeps");
        }
        std::uint64_t options = 0;
        std::uint64_t growth = 2;
        const std::uint64_t options_at = in_.offset();
        if (encoding >= 2) options = m.unsigned_field("the options");
        if (encoding >= 4) growth = m.unsigned_field("the expansion");
        if (options > std::numeric_limits<std::uint32_t>::max() ||
            growth > std::numeric_limits<std::uint32_t>::max()) {
            in_.fail(options_at, "Bloom filter options or expansion out of range");
        }
        bloom::FilterOptions filter_options;
        filter_options.scheme = bloom::HashScheme::redisbloom;
        filter_options.redisbloom_options = static_cast<std::uint32_t>(options);
        filter_options.nonscaling = (options & bloom::kRedisBloomNoScaling) != 0;
        filter_options.expansion = static_cast<std::uint32_t>(growth);
        if (filter_options.nonscaling && nfilters != 1) {
            in_.fail(at,
                     "NONSCALING Bloom filter with " + std::to_string(nfilters) + " sub-filters");
        }
        // Built sub-filter by sub-filter as the value is read, each array
        // stored straight from the file (or from its decompressed copy): the
        // file's size bounds what is allocated before the value is checked.
        bloom::FilterRef filter;
        std::uint64_t total = 0;
        for (std::uint64_t i = 0; i < nfilters; ++i) {
            const std::uint64_t link_at = in_.offset();
            bloom::LayerGeometry layer;
            layer.scheme = bloom::HashScheme::redisbloom;
            layer.capacity = m.unsigned_field("a sub-filter's entries");
            layer.error_rate = m.double_field("a sub-filter's error rate");
            const std::uint64_t hashes = m.unsigned_field("a sub-filter's hash count");
            layer.redisbloom_bpe = m.double_field("a sub-filter's bits per entry");
            std::uint64_t bits = 0;
            std::uint64_t n2 = 0;
            if (encoding == 0) {
                const double wanted = static_cast<double>(layer.capacity) * layer.redisbloom_bpe;
                if (!(wanted >= 0 && wanted < 9.2e18)) {
                    in_.fail(link_at, "sub-filter size out of range");
                }
                bits = static_cast<std::uint64_t>(wanted);
            } else {
                bits = m.unsigned_field("a sub-filter's bit count");
                n2 = m.unsigned_field("a sub-filter's n2");
            }
            const std::uint64_t array_at = in_.offset();
            const std::string_view array = m.string_field("a sub-filter's bit array", scratch_);
            // BFRdbLoad: the array holds the bits, its length is the byte
            // count; then bloom_validate_integrity.
            const std::uint64_t bytes = array.size();
            if (hashes > std::numeric_limits<std::uint32_t>::max() || n2 > 63 ||
                bytes < (bits + 7) / 8 || bytes > std::numeric_limits<std::uint64_t>::max() / 8 ||
                bits != bytes * 8 || bits == 0 || (n2 != 0 && bits < (std::uint64_t{1} << n2)) ||
                !(layer.error_rate > 0) || !(layer.error_rate < 1.0) ||
                bloom::redisbloom_hashes(layer.redisbloom_bpe) != hashes) {
                in_.fail(array_at, "Bloom filter sub-filter " + std::to_string(i) +
                                       " fails RedisBloom's own checks (bits " +
                                       std::to_string(bits) + ", bytes " + std::to_string(bytes) +
                                       ", hashes " + std::to_string(hashes) + ")");
            }
            layer.bits = bits;
            layer.hashes = static_cast<std::uint32_t>(hashes);
            layer.redisbloom_n2 = static_cast<std::uint8_t>(n2);
            if (const bloom::BoundsError e = bloom::check_layer(layer, 0);
                e != bloom::BoundsError::none) {
                in_.fail(link_at, "Bloom filter sub-filter " + std::to_string(i) +
                                      " is outside what bloomery keeps: " + bloom::describe(e));
            }
            if (i == 0) {
                // RedisBloom keeps no requested rate or capacity: the first
                // sub-filter's say what they were (as for its dumps).
                filter_options.capacity = layer.capacity;
                filter_options.error_rate =
                    filter_options.nonscaling ? layer.error_rate : layer.error_rate / 0.5;
                if (const bloom::BoundsError e = bloom::check_stored_options(filter_options);
                    e != bloom::BoundsError::none) {
                    in_.fail(at,
                             "Bloom filter is outside what bloomery keeps: " + bloom::describe(e));
                }
                filter = bloom::ScalableFilter::create(filter_options, std::span(&layer, 1));
            } else {
                filter->append_layer_for_load(layer);
            }
            bloom::BloomLayer& target = filter->layer(i);
            for (std::uint64_t first = 0; first < target.num_words(); first += format::kWordChunk) {
                const std::uint64_t count =
                    std::min<std::uint64_t>(format::kWordChunk, target.num_words() - first);
                words_.resize(count);
                std::memcpy(words_.data(), array.data() + first * 8, count * 8);
                format::words_little_to_host(words_.data(), count);
                target.store_words(first, count, words_.data());
            }
            std::string().swap(scratch_);
            const std::uint64_t items_at = in_.offset();
            const std::uint64_t items = m.unsigned_field("a sub-filter's item count");
            if (items > bloom::kMaxLayerItems ||
                items > std::numeric_limits<std::uint64_t>::max() - total) {
                in_.fail(items_at, "Bloom filter sub-filter " + std::to_string(i) + " item count " +
                                       std::to_string(items) + " out of range");
            }
            target.set_items(items);
            total += items;
        }
        m.end("Bloom filter");
        if (total != size) {
            in_.fail(at, "Bloom filter item count " + std::to_string(size) +
                             " is not the sum of its sub-filters' (" + std::to_string(total) + ")");
        }
        return filter;
    }

    // The module opcodes of a value of a module this reader does not load,
    // up to its end marker (rdbLoadCheckModuleValue).
    void skip_module_fields(const std::string& name) {
        for (;;) {
            const std::uint64_t at = in_.offset();
            const std::uint64_t opcode = in_.length("a module opcode");
            switch (opcode) {
                case kModuleEof:
                    return;
                case kModuleSint:
                case kModuleUint:
                    in_.length("a module integer");
                    break;
                case kModuleFloat:
                    in_.skip(4, "a module float");
                    break;
                case kModuleDouble:
                    in_.skip(8, "a module double");
                    break;
                case kModuleString:
                    in_.skip_string("a module string");
                    break;
                default:
                    in_.fail(at, "unknown module opcode " + std::to_string(opcode) +
                                     " in a value of module type '" + name + "'");
            }
        }
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
    const RdbWarningSink& warn_;
    RdbImportStats& stats_;
    std::unordered_set<std::string> keys_;
    std::string scratch_;               // a decoded bit array
    std::vector<std::uint64_t> words_;  // words on their way into a layer
};

}  // namespace

bool read_rdb(std::span<const unsigned char> bytes, std::int64_t now_ms,
              const RdbFilterSink& on_filter, const RdbWarningSink& warn, RdbImportStats& stats,
              std::string& error) {
    stats = RdbImportStats{};
    try {
        RdbReader reader(bytes, now_ms, on_filter, warn, stats);
        reader.read();
        return true;
    } catch (const Failure& failure) {
        error = "offset " + std::to_string(failure.offset) + ": " + failure.reason;
    } catch (const std::bad_alloc&) {
        error = "out of memory while reading";
    } catch (const std::length_error&) {
        error = "out of memory while reading";
    }
    return false;
}

bool import_rdb(const std::string& rdb_path, const core::Config& config, std::string& report,
                std::string& error) {
    report.clear();
    const std::string target = config.snapshot_path();
    std::error_code ec;
    // The data directory as the server makes it at start, if it is missing.
    std::filesystem::create_directories(config.dir, ec);
    if (ec) {
        error = config.dir + ": cannot create: " + ec.message();
        return false;
    }
    if (std::filesystem::exists(target, ec)) {
        error = target +
                " exists: --import-rdb writes a new snapshot and replaces none (move it "
                "away, or import into another --dir)";
        return false;
    }
    for (const auto& entry : std::filesystem::directory_iterator(config.dir, ec)) {
        std::uint64_t start = 0;
        if (journal_format::parse_segment_name(entry.path().filename().string(),
                                               config.appendfilename, start)) {
            error = "journal segments (" + entry.path().string() + ") exist in " + config.dir +
                    ": --import-rdb imports into an empty data directory only";
            return false;
        }
    }
    if (ec && ec != std::errc::no_such_file_or_directory) {
        error = config.dir + ": " + ec.message();
        return false;
    }
    MappedFile file;
    if (const core::Status opened = file.open(rdb_path); !opened) {
        error = opened.error();
        return false;
    }
    store::Keyspace keyspace(config.keyspace_shards);
    RdbImportStats stats;
    std::string warnings;
    const RdbFilterSink on_filter = [&](std::string key, bloom::FilterRef filter,
                                        std::int64_t deadline) {
        keyspace.put(key, std::move(filter), deadline);
    };
    const RdbWarningSink warn = [&](const std::string& warning) {
        warnings += "warning: " + warning + "\n";
    };
    std::string why;
    if (!read_rdb(std::span<const unsigned char>(file.data(), file.size()), store::now_ms(),
                  on_filter, warn, stats, why)) {
        error = rdb_path + ": " + why;
        return false;
    }
    report += "file: " + rdb_path + "\n";
    report += "RDB version " + std::to_string(stats.rdb_version);
    if (!stats.redis_version.empty()) report += " (Redis " + stats.redis_version + ")";
    report += stats.checksum_verified ? ", checksum ok\n" : ", no checksum in the file\n";
    report += warnings;
    report += "Bloom filters imported: " + std::to_string(stats.filters) + " (" +
              std::to_string(stats.with_deadline) + " with a TTL)\n";
    report += "Bloom filters skipped: " + std::to_string(stats.expired_skipped) + " expired, " +
              std::to_string(stats.other_databases) + " outside database 0\n";
    std::uint64_t skipped = 0;
    std::string by_type;
    for (const auto& [type, n] : stats.skipped) {
        skipped += n;
        by_type += (by_type.empty() ? "" : ", ") + type + " " + std::to_string(n);
    }
    if (skipped != 0) {
        // bloomery holds Bloom filters only: say what stays behind.
        report += "warning: skipped " + std::to_string(skipped) +
                  " values that are not Bloom filters (by type: " + by_type + ")\n";
    }
    report += "other values skipped: " + std::to_string(skipped) + "\n";
    const core::Result<SaveStats> saved = save_snapshot(keyspace, target);
    if (!saved) {
        error = saved.error();
        return false;
    }
    report += "snapshot written: " + target + " (" + std::to_string(saved->keys) + " keys, " +
              std::to_string(saved->bytes) + " bytes)\n";
    return true;
}

}  // namespace bloomery::persist
