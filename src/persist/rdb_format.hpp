#pragma once
// Private to src/persist: what the RDB reader of `--import-rdb` knows of
// Redis's RDB format (Redis src/rdb.h): opcodes, value types, module value
// opcodes, the versions it reads, and how a read fails.

#include <cstdint>
#include <string>
#include <string_view>

namespace bloomery::persist::rdb {

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
// RedisBloom's Cuckoo filter type, and the newest encoding it writes (2.x:
// 4; 0 to 3 have no deletes count, bucket size, iterations or expansion).
constexpr std::string_view kCuckooType = "MBbloomCF";
constexpr std::uint32_t kCuckooNewestEncoding = 4;
// LZF output per input byte at most: a 3-byte back reference copies 264.
constexpr std::uint64_t kMaxLzfExpansion = 88;

// Thrown inside the reader only, caught by read_rdb(): a read has many
// nested reads, each of which can fail, naming the byte offset.
struct Failure {
    std::uint64_t offset;
    std::string reason;
};

}  // namespace bloomery::persist::rdb
