#pragma once
// The JSON of etcd's gateway: requests built from the client's types, and
// answers read back into them. Keys and values travel in base64, int64s as
// strings, and a field at its zero value (0, false, "", the first enum
// value) is left out of an answer. Decoding never throws and never trusts
// the answer's shape: a missing field is its zero value, a field of the wrong
// type or a bad base64 text is an error naming the field.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bloomery/cluster/etcd.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::cluster::etcd_json {

using Json = nlohmann::json;

std::string base64_encode(std::string_view bytes);
core::Result<std::string> base64_decode(std::string_view text);
// The range_end that selects every key starting with `prefix` ("\0": every
// key, for an empty prefix or one of only 0xff bytes).
std::string prefix_end(std::string_view prefix);
// The request's text (invalid UTF-8 replaced, so it cannot throw).
std::string dump(const Json& request);

Json range_request(std::string_view key, std::string_view range_end);
Json put_request(std::string_view key, std::string_view value, std::int64_t lease);
// The key and range_end of every key that starts with `prefix` (a range or
// a delete request).
Json prefix_request(std::string_view prefix);
Json delete_request(std::string_view key, std::string_view range_end);
Json txn_request(const EtcdTxn& txn);
Json watch_create_request(std::string_view prefix, std::int64_t start_revision);

// `body` as a JSON object, or an error.
core::Result<Json> parse_object(std::string_view body);
// An int64 field (a string or a number); 0 when absent.
core::Result<std::int64_t> int_field(const Json& object, std::string_view name);
// The answer's header.revision.
core::Result<std::int64_t> header_revision(const Json& answer);
core::Result<EtcdRange> decode_range(const Json& answer);
core::Result<EtcdTxnResult> decode_txn(const Json& answer);
core::Result<EtcdLease> decode_lease(const Json& answer);

// What etcd said when it refused a request: {"error": "...", "code": N}, or
// in a stream {"error": {"grpc_code": N, "message": "..."}}.
struct Refusal {
    int code = 0;  // gRPC status code (16: unauthenticated, 14: unavailable)
    std::string message;
};
// The refusal in a non-200 answer's body (a text of its own when the body
// is not etcd's error object).
Refusal decode_refusal(unsigned http_status, std::string_view body);
// The refusal inside a streamed object, if it holds one.
bool stream_refusal(const Json& object, Refusal& refusal);

// One message of a watch stream ({"result": {...}}).
struct WatchMessage {
    bool created = false;
    bool canceled = false;
    std::int64_t compact_revision = 0;
    std::string cancel_reason;
    std::int64_t revision = 0;
    std::vector<EtcdEvent> events;
};
core::Result<WatchMessage> decode_watch_message(const Json& object);

}  // namespace bloomery::cluster::etcd_json
