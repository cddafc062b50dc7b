#pragma once
// Every error text the server sends, in one place, worded as Redis and
// RedisBloom word them (lower case, no trailing period, never raw CR/LF).

#include <string_view>

namespace bloomery::command::errors {

inline constexpr std::string_view kSyntax = "ERR syntax error";
// Dispatch's refusals (Redis's texts). The command's name follows the first
// one, then "' command"; the name and the start of the arguments follow the
// second; the subcommand follows the third, then "'. Try CONTAINER HELP.".
inline constexpr std::string_view kWrongArity = "ERR wrong number of arguments for '";
inline constexpr std::string_view kUnknownCommand = "ERR unknown command '";
inline constexpr std::string_view kUnknownSubcommand = "ERR unknown subcommand '";
// A subscribed RESP2 client's other commands: the command's name goes
// between the two.
inline constexpr std::string_view kCannotExecute = "ERR Can't execute '";
inline constexpr std::string_view kOnlySubscriptionCommands =
    "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context";
inline constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kNoSuchKey = "ERR no such key";
inline constexpr std::string_view kDbIndexOutOfRange = "ERR DB index is out of range";
inline constexpr std::string_view kNxXxGtLt =
    "ERR NX and XX, GT or LT options at the same time are not compatible";
inline constexpr std::string_view kGtLtNx =
    "ERR GT and LT options at the same time are not compatible";
inline constexpr std::string_view kInvalidCursor = "ERR invalid cursor";
// The EXPIRE family: the option or the command's name follows.
inline constexpr std::string_view kUnsupportedOption = "ERR Unsupported option ";
inline constexpr std::string_view kInvalidExpireTime = "ERR invalid expire time in '";
// CLIENT KILL. The type or user name follows the last two, then "'".
inline constexpr std::string_view kNoSuchClient = "ERR No such client";
inline constexpr std::string_view kClientIdNotPositive = "ERR client-id should be greater than 0";
inline constexpr std::string_view kUnknownClientType = "ERR Unknown client type '";
inline constexpr std::string_view kNoSuchUser = "ERR No such user '";
inline constexpr std::string_view kProtocolVersion = "NOPROTO unsupported protocol version";
// HELLO, CLIENT SETNAME, SETINFO and LIST (Redis 7.2's texts). The option
// follows the texts ending in "'", then "'".
inline constexpr std::string_view kProtocolNotInteger =
    "ERR Protocol version is not an integer or out of range";
inline constexpr std::string_view kHelloSyntax = "ERR Syntax error in HELLO option '";
inline constexpr std::string_view kClientNameInvalid =
    "ERR Client names cannot contain spaces, newlines or special characters.";
inline constexpr std::string_view kClientLibraryInvalid =
    "ERR lib-name and lib-ver cannot contain spaces, newlines or special characters.";
inline constexpr std::string_view kUnrecognizedOption = "ERR Unrecognized option '";
inline constexpr std::string_view kInvalidClientId = "ERR Invalid client ID";
inline constexpr std::string_view kBgsaveInProgress = "ERR Background save already in progress";
// BGREWRITEAOF while a snapshot is written (the journal's rewrite is one).
inline constexpr std::string_view kRewriteInProgress =
    "ERR Background append only file rewriting already in progress (a snapshot is being written)";
// SHUTDOWN that failed (its save) or was cancelled (SHUTDOWN ABORT), and an
// ABORT with nothing to cancel (Redis 7's texts).
inline constexpr std::string_view kShutdownFailed = "ERR Errors trying to SHUTDOWN. Check logs.";
inline constexpr std::string_view kNoShutdownInProgress = "ERR No shutdown in progress.";
// Redis's text, naming bloomery and its log.
// Redis's text when the AOF cannot be written; the reason follows.
inline constexpr std::string_view kMisconfJournal = "MISCONF Errors writing to the AOF file: ";
inline constexpr std::string_view kNoReplicas = "NOREPLICAS Not enough good replicas to write.";
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

// Access control (Redis 7.2's texts). NOPERM for a command is built in
// dispatch from the first: "NOPERM User NAME has no permissions to run the
// 'CMD' command".
inline constexpr std::string_view kNoPermUser = "NOPERM User ";
inline constexpr std::string_view kNoAuth = "NOAUTH Authentication required.";
inline constexpr std::string_view kWrongPass =
    "WRONGPASS invalid username-password pair or user is disabled.";
inline constexpr std::string_view kAuthWithoutPassword =
    "ERR AUTH <password> called without any password configured for the default user. Are you "
    "sure your configuration is correct?";
inline constexpr std::string_view kHelloNoAuth =
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
    "<proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP "
    "protocol version at the same time";
inline constexpr std::string_view kNoPermKey = "NOPERM No permissions to access a key";
// ACL CAT of a category that does not exist: its name follows, then "'".
inline constexpr std::string_view kUnknownCategory = "ERR Unknown category '";
// Sent raw by the network layer to a non-loopback client in protected mode,
// then the connection is closed: Redis's text, naming bloomery's remedies.
inline constexpr std::string_view kProtectedModeDenied =
    "-DENIED bloomery is running in protected mode because protected mode is enabled and no "
    "password is set for the default user. In this mode connections are only accepted from the "
    "loopback interface. If you want to connect from external computers to bloomery you may "
    "adopt one of the following solutions: 1) Set a password for the default user: restart "
    "with '--requirepass PASSWORD' (or the BLOOMERY_REQUIREPASS environment variable, or "
    "'--requirepass-file FILE'), or define users with '--aclfile FILE'. 2) Restart with "
    "'--protected-mode no', however MAKE SURE bloomery is not publicly accessible from the "
    "internet if you do so. NOTE: You only need to do one of the above things in order for the "
    "server to start accepting connections from the outside. If no external client should "
    "connect, listen on the loopback interface only with '--bind 127.0.0.1'.\r\n";

// Redis Cluster's texts (cluster_commands.cpp). MOVED is built in dispatch:
// "MOVED <slot> <host>:<port>".
inline constexpr std::string_view kClusterDisabled =
    "ERR This instance has cluster support disabled";
inline constexpr std::string_view kCrossSlot =
    "CROSSSLOT Keys in request don't hash to the same slot";
inline constexpr std::string_view kInvalidSlot = "ERR Invalid slot";
inline constexpr std::string_view kInvalidOrOutOfRangeSlot = "ERR Invalid or out of range slot";
inline constexpr std::string_view kTryAgain =
    "TRYAGAIN Multiple keys request during rehashing of slot";
inline constexpr std::string_view kClusterDown = "CLUSTERDOWN The cluster is down";
inline constexpr std::string_view kSlotNotServed = "CLUSTERDOWN Hash slot not served";
inline constexpr std::string_view kSetSlotOnReplica = "ERR Please use SETSLOT only with masters.";
inline constexpr std::string_view kInvalidBasePort = "ERR Invalid base port specified: ";
inline constexpr std::string_view kInvalidBusPort = "ERR Invalid bus port specified: ";
inline constexpr std::string_view kResetWithKeys =
    "ERR CLUSTER RESET can't be called with master nodes containing keys";
inline constexpr std::string_view kNotAMaster = "ERR The specified node is not a master";
inline constexpr std::string_view kUnknownNode = "ERR Unknown node ";
inline constexpr std::string_view kSetSlotSyntax =
    "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP";
inline constexpr std::string_view kInvalidSlotOrCount = "ERR Invalid slot or number of keys";

// COMMAND GETKEYS (Redis 7's texts).
inline constexpr std::string_view kGetkeysUnknownCommand = "ERR Invalid command specified";
inline constexpr std::string_view kGetkeysWrongArity =
    "ERR Invalid number of arguments specified for command";
inline constexpr std::string_view kGetkeysNoKeys = "ERR The command has no key arguments";

// DUMP, RESTORE, MIGRATE, COPY (Redis 7's texts, bloomery's last three).
inline constexpr std::string_view kBusyKey = "BUSYKEY Target key name already exists.";
inline constexpr std::string_view kBadDumpPayload =
    "ERR DUMP payload version or checksum are wrong";
inline constexpr std::string_view kBadDataFormat = "ERR Bad data format";
inline constexpr std::string_view kInvalidTtl = "ERR Invalid TTL value, must be >= 0";
inline constexpr std::string_view kInvalidIdletime = "ERR Invalid IDLETIME value, must be >= 0";
inline constexpr std::string_view kInvalidFreq = "ERR Invalid FREQ value, must be >= 0 and <= 255";
inline constexpr std::string_view kSameObject = "ERR source and destination objects are the same";
inline constexpr std::string_view kMigrateKeysWithKey =
    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string";
inline constexpr std::string_view kMigrateConnect =
    "IOERR error or timeout connecting to the client";
inline constexpr std::string_view kMigrateWrite =
    "IOERR error or timeout writing to target instance";
inline constexpr std::string_view kMigrateRead =
    "IOERR error or timeout reading to target instance";
// The target's error line follows.
inline constexpr std::string_view kMigrateTargetError = "ERR Target instance replied with error: ";
inline constexpr std::string_view kDumpTooLarge =
    "ERR DUMP payload would exceed proto-max-bulk-len (see CONFIG GET proto-max-bulk-len): no "
    "server could RESTORE it; BF.SCANDUMP dumps a filter of any size";
inline constexpr std::string_view kMigrateKeyChanged =
    "ERR a key changed while MIGRATE sent it: it is kept here, and the target holds the copy it "
    "was sent; MIGRATE it again with REPLACE";

// RedisBloom's texts (2.4, byte for byte: some have no "ERR " prefix, one a
// trailing space).
inline constexpr std::string_view kItemExists = "ERR item exists";
inline constexpr std::string_view kNotFound = "ERR not found";
inline constexpr std::string_view kBadErrorRate = "ERR (0 < error rate range < 1) ";
inline constexpr std::string_view kBadCapacity = "ERR (capacity should be larger than 0)";
inline constexpr std::string_view kErrorRateNotNumber = "ERR bad error rate";
inline constexpr std::string_view kCapacityNotNumber = "ERR bad capacity";
inline constexpr std::string_view kExpansionNotNumber = "ERR bad expansion";
inline constexpr std::string_view kNoExpansion = "ERR no expansion";
inline constexpr std::string_view kNonScalingExpansion = "Nonscaling filters cannot expand";
inline constexpr std::string_view kNonScalingFull = "ERR non scaling filter is full";
// The CF.* family's (RedisBloom 2.4's texts, prefixes as it sends them).
inline constexpr std::string_view kCuckooBadCapacity = "Bad capacity";
inline constexpr std::string_view kCuckooSmallCapacity =
    "Capacity must be at least (BucketSize * 2)";
inline constexpr std::string_view kCuckooUnknownArgument = "Unknown argument received";
inline constexpr std::string_view kCuckooFull = "Filter is full";
inline constexpr std::string_view kCuckooGrowFailed = "Memory allocation failure";
inline constexpr std::string_view kCuckooMaxExpansions = "Maximum expansions reached";
inline constexpr std::string_view kCuckooDelNotFound = "Not found";
inline constexpr std::string_view kCuckooNotFound = "Cuckoo filter was not found";
inline constexpr std::string_view kCuckooPosition = "Invalid position";
inline constexpr std::string_view kCuckooBadHeader = "Invalid header";
inline constexpr std::string_view kCuckooCannotCreate = "Couldn't create filter!";
inline constexpr std::string_view kCuckooBadChunk = "Couldn't load chunk!";
inline constexpr std::string_view kInvalidInfoField = "Invalid information value";
inline constexpr std::string_view kOutOfMemory = "ERR Insufficient memory to create filter";
// Set operations (BF.MERGE, BF.CARD of several keys, BF.INTERCARD).
inline constexpr std::string_view kSetSchemesDiffer =
    "ERR the filters hash items differently (hash schemes differ) and cannot be combined";
inline constexpr std::string_view kMergeNonscalingShape =
    "ERR a NONSCALING filter merges only with filters of the same size and hash functions";
inline constexpr std::string_view kMergeTooManyLayers =
    "ERR the merged filter would have more than 64 sub-filters";
inline constexpr std::string_view kSetShapesDiffer =
    "ERR the filters must have one sub-filter each, all of the same size and hash functions";
inline constexpr std::string_view kSetTooManyFilters = "ERR at most 8 filters can be combined";
inline constexpr std::string_view kMergeKindsDiffer =
    "ERR a COUNTING filter merges only with COUNTING filters";
// Followed by the rate, the target and "; FORCE merges anyway".
inline constexpr std::string_view kMergeRateExceeded =
    "ERR the merged filter's estimated false positive rate ";
inline constexpr std::string_view kInterCardNumKeys = "ERR numkeys should be between 2 and 8";
inline constexpr std::string_view kInterCardKeyCount =
    "ERR Number of keys can't be different from numkeys";
// BF.INSERT's option texts.
inline constexpr std::string_view kInsertUnknownOption = "Unknown argument received";
inline constexpr std::string_view kInsertBadErrorRate = "Bad error rate";
inline constexpr std::string_view kInsertBadCapacity = "Bad capacity";
inline constexpr std::string_view kInsertBadExpansion = "Bad expansion";
inline constexpr std::string_view kInsertBadArgument = "Bad argument received";
// BF.SCANDUMP's and BF.LOADCHUNK's iterator; then BF.LOADCHUNK's payload
// that is no header of either format, or data at an iterator of 1 or less
// for a filter that exists.
inline constexpr std::string_view kScandumpIterator = "Second argument must be numeric";
inline constexpr std::string_view kLoadchunkIterator = "ERR Second argument must be numeric";
inline constexpr std::string_view kBadChunkData = "ERR received bad data";
// RedisBloom 2.8's, for an expansion below 1 (2.4 took it).
inline constexpr std::string_view kBadExpansion = "ERR expansion should be greater or equal to 1";
// bloomery's bounds (bloom/bounds.hpp), beyond RedisBloom's.
inline constexpr std::string_view kErrorRateTooSmall = "ERR error rate should be at least 1e-15";
inline constexpr std::string_view kCapacityTooLarge =
    "ERR capacity should be at most 281474976710656 (2^48)";
inline constexpr std::string_view kExpansionTooLarge = "ERR expansion should be at most 32768";
// bloomery's LAYOUT option (BF.RESERVE, BF.INSERT).
inline constexpr std::string_view kBadLayout = "ERR LAYOUT must be AUTO, CLASSIC or BLOCKED";
// COUNTING beside what it cannot have.
inline constexpr std::string_view kCountingLayout =
    "ERR COUNTING filters have their own layout and take no LAYOUT";
inline constexpr std::string_view kCountingScheme =
    "ERR COUNTING filters cannot use SCHEME REDISBLOOM (RedisBloom has no counting filter)";
inline constexpr std::string_view kCountingErrorRate =
    "ERR COUNTING filters need an error rate of at least 1e-7";
// BF.DEL on a filter that is not a counting one.
inline constexpr std::string_view kNotCounting =
    "ERR only COUNTING filters can delete items (create one with BF.RESERVE ... COUNTING)";
// bloomery's SCHEME option (BF.RESERVE, BF.INSERT).
inline constexpr std::string_view kBadScheme = "ERR SCHEME must be BLOOMERY or REDISBLOOM";
inline constexpr std::string_view kSchemeLayout =
    "ERR LAYOUT cannot be used with the redisbloom scheme: its filters are sized and laid out as "
    "RedisBloom's";
// valkey-bloom's VALIDATESCALETO texts (BF.RESERVE, BF.INSERT): growth would
// pass max-filter-bytes, or stop first at the sub-filter limit or a bound
// (the error rates halve at each sub-filter); then NONSCALING beside it. A
// value that is no positive integer answers kCapacityNotNumber.
inline constexpr std::string_view kValidateScaleToTooLarge =
    "ERR provided VALIDATESCALETO causes bloom object to exceed memory limit";
inline constexpr std::string_view kValidateScaleToUnreachable =
    "ERR provided VALIDATESCALETO causes false positive to degrade to 0";
inline constexpr std::string_view kValidateScaleToNonScaling =
    "ERR cannot use NONSCALING and VALIDATESCALETO options together";
// valkey-bloom's TIGHTENING texts (BF.RESERVE, BF.INSERT): a value that is
// no number, then one outside (0, 1); then bloomery's for a ratio the
// redisbloom scheme cannot have.
inline constexpr std::string_view kBadTightening = "ERR bad tightening ratio";
inline constexpr std::string_view kTighteningRange = "ERR (0 < tightening ratio range < 1)";
inline constexpr std::string_view kSchemeTightening =
    "ERR TIGHTENING must be 0.5 with the redisbloom scheme: its error rates halve at each "
    "sub-filter, as RedisBloom's";
// Expiring filters' options (BF.RESERVE and BF.INSERT's WINDOW and SLICES).
inline constexpr std::string_view kBadWindow =
    "ERR WINDOW must be ITEMS or a whole number with a unit: ms, s, m, h or d (e.g. 7d)";
inline constexpr std::string_view kWindowTooShort =
    "ERR WINDOW too short: each of its l generations needs at least 1 ms";
inline constexpr std::string_view kBadSlices =
    "ERR SLICES takes two whole numbers: k from 1 to 64 and l from 1 to 4096";
inline constexpr std::string_view kSlicesWithoutWindow = "ERR SLICES needs WINDOW";
inline constexpr std::string_view kWindowOptions =
    "ERR an expiring filter (WINDOW) takes only ERROR, CAPACITY, NOCREATE and SLICES";
inline constexpr std::string_view kWindowUnreachable =
    "ERR no expiring filter of these slices reaches this error rate";
inline constexpr std::string_view kMergeExpiringUnaligned =
    "ERR expiring filters merge only with expiring filters of the same shape, window and "
    "generation";
// What expiring filters do not take: DUMP, RESTORE and MIGRATE (their
// payload has no expiring form: BF.SCANDUMP and BF.LOADCHUNK carry them),
// BF.CARD of several keys and BF.INTERCARD.
inline constexpr std::string_view kExpiringUnsupported =
    "ERR this command does not take expiring filters (WINDOW); BF.SCANDUMP and BF.LOADCHUNK "
    "copy them";
inline constexpr std::string_view kMaxLayers = "ERR maximum number of sub-filters reached";
inline constexpr std::string_view kFilterTooLarge =
    "ERR filter would exceed max-filter-bytes (see CONFIG GET max-filter-bytes)";
// Redis's reply when a command that may allocate finds used_memory above
// maxmemory (or, here, would take it there).
inline constexpr std::string_view kOom = "OOM command not allowed when used memory > 'maxmemory'.";
// An allocation failed while a command ran (before it changed anything).
inline constexpr std::string_view kNoMemory = "OOM not enough memory to run the command";
// Redis's answer to a command on a key holding another type (a Bloom
// filter's key given to CF.*, a Cuckoo filter's to BF.*).
inline constexpr std::string_view kWrongType =
    "WRONGTYPE Operation against a key holding the wrong kind of value";

// Replication (Redis's texts, naming bloomery where Redis names itself).
inline constexpr std::string_view kReadOnlyReplica =
    "READONLY You can't write against a read only replica.";
inline constexpr std::string_view kLoading = "LOADING bloomery is loading the dataset in memory";
inline constexpr std::string_view kReplicationNeedsJournal =
    "ERR this server cannot feed replicas: it runs with --appendonly no, and replicas are fed "
    "from the journal";
inline constexpr std::string_view kNoChainedReplication =
    "ERR this server is a replica; replicas of replicas are not supported";
inline constexpr std::string_view kWaitOnReplica =
    "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a "
    "replica is configured to be writable (which is not the default) writes to replicas are just "
    "local and are not propagated.";
inline constexpr std::string_view kTimeoutNegative = "ERR timeout is negative";
inline constexpr std::string_view kInvalidMasterPort = "ERR Invalid master port";
// REPLCONF with an option it does not know: the option follows.
inline constexpr std::string_view kUnknownReplconfOption = "ERR Unrecognized REPLCONF option: ";
// In a cluster the slot map says who replicates whom (--cluster-slots).
inline constexpr std::string_view kReplicaofInCluster =
    "ERR REPLICAOF not allowed in cluster mode.";
inline constexpr std::string_view kMasterDownStale =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
inline constexpr std::string_view kMasterDownUnsynced =
    "MASTERDOWN this replica has no copy of its primary yet (the first synchronization has not "
    "finished): its answers could be false negatives";
// LATENCY GRAPH of an event without samples: Redis's text, the event's name
// follows, then "'".
inline constexpr std::string_view kNoLatencySamples = "ERR No samples available for event '";
// SLOWLOG GET's count (Redis's text, for a non-integer too).
inline constexpr std::string_view kSlowlogCount = "ERR count should be greater than or equal to -1";
// CONFIG SET of a parameter bloomery can change at run time (Redis 7's
// texts): the prefix, then the parameter's name, then one of the reasons:
// kConfigSetReason and the reason the option spec gives for the value
// (core/options.hpp, in Redis's words: "argument couldn't be parsed into an
// integer", "argument must be between MIN and MAX inclusive", ...).
inline constexpr std::string_view kConfigSetFailed =
    "ERR CONFIG SET failed (possibly related to argument '";
inline constexpr std::string_view kConfigSetReason = "') - ";
inline constexpr std::string_view kConfigSetDuplicate = "') - duplicate parameter";

// CONFIG REWRITE of a server started without --config (Redis's text).
inline constexpr std::string_view kNoConfigFile = "ERR The server is running without a config file";

// Pub/Sub.
inline constexpr std::string_view kNoPermChannel =
    "NOPERM this user has no permissions to access one of the channels used as arguments";
inline constexpr std::string_view kSubscriptionsTooLarge =
    "ERR the subscriptions would exceed client-query-buffer-limit";

// Transactions (MULTI/EXEC), in Redis 7's words.
inline constexpr std::string_view kMultiNested = "ERR MULTI calls can not be nested";
inline constexpr std::string_view kExecWithoutMulti = "ERR EXEC without MULTI";
inline constexpr std::string_view kDiscardWithoutMulti = "ERR DISCARD without MULTI";
inline constexpr std::string_view kWatchInsideMulti = "ERR WATCH inside MULTI is not allowed";
inline constexpr std::string_view kNotInTransaction =
    "ERR Command not allowed inside a transaction";
inline constexpr std::string_view kExecAbort =
    "EXECABORT Transaction discarded because of previous errors.";
// EXEC refused by a check before it ran; the refusal follows.
inline constexpr std::string_view kExecAbortBecause =
    "EXECABORT Transaction discarded because of: ";
// A queued command whose ACL no longer allows it at EXEC: the command, or
// the keys it names.
inline constexpr std::string_view kNoPermChangedCommand =
    "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC "
    "call. This command is no longer allowed for the following reason: no permission to execute "
    "the command or subcommand";
inline constexpr std::string_view kNoPermChangedKeys =
    "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC "
    "call. This command is no longer allowed for the following reason: no permission to touch "
    "the specified keys";
inline constexpr std::string_view kTransactionTooLarge =
    "ERR the transaction's queue would exceed client-query-buffer-limit";
inline constexpr std::string_view kWatchTooLarge =
    "ERR the watched keys would exceed client-query-buffer-limit";

}  // namespace bloomery::command::errors
