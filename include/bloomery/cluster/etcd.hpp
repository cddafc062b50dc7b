#pragma once
// A client of etcd's v3 API (etcd 3.4 and later), spoken through etcd's JSON
// gateway over HTTP/1.1 or HTTPS: the store of the cluster's topology.
//
// Every call is synchronous and bounded: each endpoint it tries costs it at
// most EtcdSettings::request_timeout (host names are resolved by the
// system's resolver, whose own timeouts bound that step). On a connection
// error, a timeout or a member that says it cannot serve (no leader), the
// client moves on to the next endpoint, so a cluster that lost a minority of
// its members answers as before. The client keeps one connection alive
// between calls, and connects again once when etcd closed it meanwhile.
//
// A request whose answer was lost is sent again to the next member, so it
// may have been applied twice: a put then has a later revision, and a
// transaction that compares a revision may answer "not succeeded" although
// its first try succeeded. Callers that must know read the key again.
//
// An answer from etcd that refuses the request (a compare that failed is
// not a refusal) is an error whose text says what was asked, which endpoint
// answered and what etcd said, in one line. With a user set, the client
// authenticates before its first request and again, once, when etcd says
// the token is no longer valid. Keys and values are bytes (any content).
//
// Thread safety: any call may come from any thread. The calls other than
// watch() hold the client's mutex, so they run one at a time, on its one
// connection (threads that must not wait for each other use a client each).
// watch() uses a connection of its own, so it may run on one thread while
// other calls run on others; cancel() may be called from any thread.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/core/result.hpp"

namespace bloomery::core {
struct Config;
}

namespace bloomery::cluster {

// Where etcd is and how to reach it.
struct EtcdSettings {
    // "http://host:port" or "https://host:port" (IPv6 as [addr]:port); tried
    // in this order, starting again after the last.
    std::vector<std::string> endpoints;
    // When user is set, the client authenticates and sends etcd's token.
    std::string user, password;
    // TLS (https endpoints): etcd's certificate is verified against ca_file
    // (PEM; empty: the system's trusted roots) and its host name;
    // cert_file + key_file, when set, are the client's own certificate.
    std::string ca_file, cert_file, key_file;
    // The bound of one request to one endpoint: connecting, sending and
    // receiving the whole answer. Make it longer than etcd's election
    // timeout, so that a write made while the members elect a new leader
    // waits for it instead of failing.
    std::chrono::milliseconds request_timeout{1000};
};

// The settings of --cluster-etcd and the options beside it: endpoints
// split at commas; each request bounded by a third of the node timeout,
// within these bounds.
inline constexpr std::int64_t kEtcdMinRequestTimeoutMs = 500;
inline constexpr std::int64_t kEtcdMaxRequestTimeoutMs = 5000;
EtcdSettings etcd_settings_of(const core::Config& config);

// An endpoint as parsed from "scheme://host:port".
struct EtcdEndpoint {
    bool tls = false;  // https
    std::string host;  // without an IPv6 address's brackets
    std::uint16_t port = 0;
    std::string url;  // as written
};

// The endpoints of `settings`, or a one-line error naming the first bad URL
// (empty list, unknown scheme, missing or bad port, a path after the port);
// also refuses https without TLS support files that exist, or a client
// certificate without its key.
core::Result<std::vector<EtcdEndpoint>> parse_etcd_endpoints(const EtcdSettings& settings);

// The largest HTTP answer body the client accepts from etcd (one unary
// answer, or one object of a watch stream); a larger one is an error.
inline constexpr std::size_t kMaxEtcdResponseBytes = 64u << 20;

// One key as etcd holds it. Revisions are etcd's (cluster-wide, increasing).
struct EtcdKeyValue {
    std::string key, value;
    std::int64_t create_revision = 0;  // revision of the key's creation
    std::int64_t mod_revision = 0;     // revision of its last change
    std::int64_t version = 0;          // changes since creation (1 after it)
    std::int64_t lease = 0;            // lease the key is attached to (0: none)
};

// What a range read answers: the keys found, in key order, and the store's
// revision at the read.
struct EtcdRange {
    std::vector<EtcdKeyValue> kvs;
    std::int64_t revision = 0;
};

// One comparison of a transaction: `key`'s `target` compared to a number
// (version, create, mod revision, lease) or to `value`. A key that does not
// exist has version, revisions and lease 0 and fails a value comparison.
struct EtcdCompare {
    enum class Target { version, create_revision, mod_revision, value, lease };
    enum class Op { equal, not_equal, greater, less };
    std::string key;
    Target target = Target::version;
    Op op = Op::equal;
    std::int64_t number = 0;  // for every target but value
    std::string value;        // for Target::value
};

// One operation of a transaction.
struct EtcdOp {
    enum class Kind { put, erase, erase_prefix, get, get_prefix };
    Kind kind = Kind::get;
    std::string key;
    std::string value;       // put
    std::int64_t lease = 0;  // put (0: none)

    static EtcdOp put(std::string key, std::string value, std::int64_t lease = 0);
    static EtcdOp erase(std::string key);
    static EtcdOp erase_prefix(std::string prefix);
    static EtcdOp get(std::string key);
    static EtcdOp get_prefix(std::string prefix);
};

// If every compare holds, the success ops run, else the failure ops; all
// at one revision, atomically.
struct EtcdTxn {
    std::vector<EtcdCompare> compares;
    std::vector<EtcdOp> success, failure;
};

struct EtcdTxnResult {
    bool succeeded = false;
    std::int64_t revision = 0;  // the store's revision after the transaction
    // One per get/get_prefix op of the branch that ran, in op order.
    std::vector<EtcdRange> ranges;
};

struct EtcdLease {
    std::int64_t id = 0;
    std::int64_t ttl_seconds = 0;  // as granted: etcd raises a TTL below its minimum
};

struct EtcdEvent {
    enum class Type { put, erase };
    Type type = Type::put;
    EtcdKeyValue kv;  // for erase: the key and its mod_revision (the deletion's)
};

// Called on the watching thread with each batch of events of a watch, in
// revision order, and the revision etcd was at when it sent them (ahead of
// the events while a watch from an old revision catches up: a watch resumes
// from the last event's kv.mod_revision + 1, not from this).
using EtcdWatchHandler =
    std::function<void(const std::vector<EtcdEvent>& events, std::int64_t revision)>;

// How a watch ended.
enum class EtcdWatchEnd {
    stopped,    // stop was requested (stop_token or cancel()): not an error
    compacted,  // start_revision is older than etcd's compaction: reload, then watch
                // from the reload's revision + 1
};

class EtcdClient {
public:
    // No connection is made yet; the endpoints are checked (parse_etcd_endpoints).
    static core::Result<std::unique_ptr<EtcdClient>> create(EtcdSettings settings);
    ~EtcdClient();
    EtcdClient(const EtcdClient&) = delete;
    EtcdClient& operator=(const EtcdClient&) = delete;

    // One key (empty kvs when absent) / every key that starts with `prefix`.
    core::Result<EtcdRange> get(std::string_view key);
    core::Result<EtcdRange> get_prefix(std::string_view prefix);
    // Sets `key`, attached to `lease_id` when not 0; the new revision.
    core::Result<std::int64_t> put(std::string_view key, std::string_view value,
                                   std::int64_t lease_id = 0);
    // Deletes `key` (absent is fine); how many keys were deleted (0 or 1).
    core::Result<std::int64_t> erase(std::string_view key);
    // Runs the transaction; whether its compares held, and what its gets read.
    core::Result<EtcdTxnResult> txn(const EtcdTxn& txn);

    // A lease of `ttl_seconds` (>= 1); keys put with its id vanish when it lapses.
    core::Result<EtcdLease> grant(std::int64_t ttl_seconds);
    // Renews the lease; its remaining TTL in seconds, 0 when it has lapsed
    // (or never existed).
    core::Result<std::int64_t> keep_alive(std::int64_t lease_id);
    // Ends the lease now and deletes its keys (an unknown lease is an error).
    core::Status revoke(std::int64_t lease_id);

    // Streams the changes of every key under `prefix` from `start_revision`
    // (0: from now) to `on_events`, on the calling thread, until `stop` is
    // requested or cancel() is called (EtcdWatchEnd::stopped; noticed within
    // request_timeout), etcd answers that start_revision was compacted
    // (EtcdWatchEnd::compacted), or an error (the connection, etcd's
    // refusal): then the caller watches again from the last revision it saw
    // + 1 (kv.mod_revision). Only the connecting fails over between endpoints. A member that
    // stops answering without closing the connection is not noticed (a
    // quiet watch carries no bytes): callers that need to know watch a key
    // they update themselves.
    core::Result<EtcdWatchEnd> watch(std::string_view prefix, std::int64_t start_revision,
                                     const EtcdWatchHandler& on_events,
                                     const std::stop_token& stop = {});
    // Ends the watch() running on another thread (and any that starts later,
    // until reset_cancel()).
    void cancel();
    void reset_cancel();

    struct Impl;  // its state (src/cluster/etcd_client_impl.hpp)

private:
    explicit EtcdClient(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace bloomery::cluster
