#pragma once
// Every error text the server sends, in one place, worded as Redis and
// RedisBloom word them (lower case, no trailing period, never raw CR/LF).

#include <string_view>

namespace bloomery::command::errors {

inline constexpr std::string_view kSyntax = "ERR syntax error";
inline constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kNoSuchKey = "ERR no such key";
inline constexpr std::string_view kDbIndexOutOfRange = "ERR DB index is out of range";
inline constexpr std::string_view kNxXxGtLt =
    "ERR NX and XX, GT or LT options at the same time are not compatible";
inline constexpr std::string_view kGtLtNx =
    "ERR GT and LT options at the same time are not compatible";
inline constexpr std::string_view kInvalidCursor = "ERR invalid cursor";
inline constexpr std::string_view kProtocolVersion = "NOPROTO unsupported protocol version";
inline constexpr std::string_view kBgsaveInProgress = "ERR Background save already in progress";
// Redis's text, naming bloomery and its log.
inline constexpr std::string_view kMisconf =
    "MISCONF bloomery is configured to save snapshots, but it's currently unable to persist to "
    "disk. Commands that may modify the data set are disabled, because this instance is "
    "configured to report errors during writes if snapshotting fails "
    "(stop-writes-on-bgsave-error option). Please check the bloomery log for details about the "
    "snapshot error.";
// A deferred reply whose handle was dropped without an answer (a bug, but the
// client must not wait forever), or a command that needs to wait run where it
// cannot.
inline constexpr std::string_view kNoReply = "ERR command finished without a reply";
inline constexpr std::string_view kCannotWait = "ERR this command cannot wait for its reply here";

// RedisBloom's texts.
inline constexpr std::string_view kItemExists = "ERR item exists";
inline constexpr std::string_view kNotFound = "ERR not found";
inline constexpr std::string_view kBadErrorRate = "ERR (0 < error rate range < 1)";
// bloomery's bounds (bloom/bounds.hpp), beyond RedisBloom's.
inline constexpr std::string_view kErrorRateTooSmall = "ERR error rate should be at least 1e-15";
inline constexpr std::string_view kCapacityTooLarge =
    "ERR capacity should be at most 281474976710656 (2^48)";
inline constexpr std::string_view kBadCapacity = "ERR (capacity should be larger than 0)";
inline constexpr std::string_view kBadExpansion = "ERR expansion should be greater or equal to 1";
inline constexpr std::string_view kExpansionTooLarge = "ERR expansion should be at most 32768";
inline constexpr std::string_view kErrorRateNotNumber = "ERR bad error rate";
inline constexpr std::string_view kCapacityNotNumber = "ERR bad capacity";
inline constexpr std::string_view kExpansionNotNumber = "ERR bad expansion";
inline constexpr std::string_view kNonScalingExpansion = "ERR Nonscaling filters cannot expand";
inline constexpr std::string_view kNonScalingFull = "ERR non scaling filter is full";
inline constexpr std::string_view kMaxLayers = "ERR maximum number of sub-filters reached";
inline constexpr std::string_view kFilterTooLarge =
    "ERR filter would exceed max-filter-bytes (see CONFIG GET max-filter-bytes)";
inline constexpr std::string_view kOutOfMemory = "ERR Insufficient memory to create filter";
// Redis's reply when a command that may allocate finds used_memory above
// maxmemory (or, here, would take it there).
inline constexpr std::string_view kOom = "OOM command not allowed when used memory > 'maxmemory'.";
inline constexpr std::string_view kInvalidInfoField = "ERR Invalid information value";
inline constexpr std::string_view kInvalidIterator = "ERR invalid iterator";
inline constexpr std::string_view kBadOption = "ERR unknown argument received";

}  // namespace bloomery::command::errors
