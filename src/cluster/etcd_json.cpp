#include "etcd_json.hpp"

#include <array>
#include <utility>

#include "bloomery/core/parse_int64.hpp"

namespace bloomery::cluster::etcd_json {

namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// -1 for a byte outside the alphabet.
constexpr std::array<int, 256> make_decode_table() {
    std::array<int, 256> table{};
    for (int& entry : table) entry = -1;
    for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
        table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int>(i);
    }
    return table;
}
constexpr std::array<int, 256> kDecodeTable = make_decode_table();

// The string field `name` of `object` ("" when absent).
core::Result<std::string> string_field(const Json& object, std::string_view name) {
    const auto it = object.find(name);
    if (it == object.end()) return std::string{};
    if (!it->is_string()) return core::Error{"field " + std::string(name) + " is not a string"};
    return it->get<std::string>();
}

core::Result<std::string> bytes_field(const Json& object, std::string_view name) {
    auto text = string_field(object, name);
    if (!text) return text;
    auto bytes = base64_decode(*text);
    if (!bytes) return core::Error{"field " + std::string(name) + ": " + bytes.error()};
    return bytes;
}

bool bool_field(const Json& object, std::string_view name) {
    const auto it = object.find(name);
    return it != object.end() && it->is_boolean() && it->get<bool>();
}

// The array field `name` (an empty array when absent), or null when it is
// something else.
const Json* array_field(const Json& object, std::string_view name) {
    static const Json kEmpty = Json::array();
    const auto it = object.find(name);
    if (it == object.end()) return &kEmpty;
    return it->is_array() ? &*it : nullptr;
}

core::Result<EtcdKeyValue> decode_kv(const Json& object) {
    if (!object.is_object()) return core::Error{"a key-value is not an object"};
    EtcdKeyValue kv;
    auto key = bytes_field(object, "key");
    if (!key) return key.failure();
    auto value = bytes_field(object, "value");
    if (!value) return value.failure();
    kv.key = std::move(*key);
    kv.value = std::move(*value);
    const std::pair<std::string_view, std::int64_t*> numbers[] = {
        {"create_revision", &kv.create_revision},
        {"mod_revision", &kv.mod_revision},
        {"version", &kv.version},
        {"lease", &kv.lease}};
    for (const auto& [name, out] : numbers) {
        auto number = int_field(object, name);
        if (!number) return number.failure();
        *out = *number;
    }
    return kv;
}

const char* target_name(EtcdCompare::Target target) {
    switch (target) {
        case EtcdCompare::Target::version:
            return "VERSION";
        case EtcdCompare::Target::create_revision:
            return "CREATE";
        case EtcdCompare::Target::mod_revision:
            return "MOD";
        case EtcdCompare::Target::value:
            return "VALUE";
        case EtcdCompare::Target::lease:
            return "LEASE";
    }
    return "VERSION";
}

// The Compare message's field that holds the operand of each target.
const char* target_field(EtcdCompare::Target target) {
    switch (target) {
        case EtcdCompare::Target::version:
            return "version";
        case EtcdCompare::Target::create_revision:
            return "create_revision";
        case EtcdCompare::Target::mod_revision:
            return "mod_revision";
        case EtcdCompare::Target::value:
            return "value";
        case EtcdCompare::Target::lease:
            return "lease";
    }
    return "version";
}

const char* op_name(EtcdCompare::Op op) {
    switch (op) {
        case EtcdCompare::Op::equal:
            return "EQUAL";
        case EtcdCompare::Op::not_equal:
            return "NOT_EQUAL";
        case EtcdCompare::Op::greater:
            return "GREATER";
        case EtcdCompare::Op::less:
            return "LESS";
    }
    return "EQUAL";
}

Json compare_request(const EtcdCompare& compare) {
    Json json{{"key", base64_encode(compare.key)},
              {"target", target_name(compare.target)},
              {"result", op_name(compare.op)}};
    if (compare.target == EtcdCompare::Target::value) {
        json["value"] = base64_encode(compare.value);
    } else {
        json[target_field(compare.target)] = std::to_string(compare.number);
    }
    return json;
}

Json op_request(const EtcdOp& op) {
    switch (op.kind) {
        case EtcdOp::Kind::put:
            return {{"request_put", put_request(op.key, op.value, op.lease)}};
        case EtcdOp::Kind::erase:
            return {{"request_delete_range", delete_request(op.key, "")}};
        case EtcdOp::Kind::erase_prefix:
            return {{"request_delete_range", prefix_request(op.key)}};
        case EtcdOp::Kind::get:
            return {{"request_range", range_request(op.key, "")}};
        case EtcdOp::Kind::get_prefix:
            return {{"request_range", prefix_request(op.key)}};
    }
    return Json::object();
}

core::Result<EtcdEvent> decode_event(const Json& object) {
    if (!object.is_object()) return core::Error{"a watch event is not an object"};
    auto type = string_field(object, "type");
    if (!type) return type.failure();
    EtcdEvent event;
    if (*type == "DELETE") {
        event.type = EtcdEvent::Type::erase;
    } else if (!type->empty() && *type != "PUT") {
        return core::Error{"unknown watch event type " + *type};
    }
    const auto kv = object.find("kv");
    if (kv == object.end()) return core::Error{"a watch event without its key"};
    auto decoded = decode_kv(*kv);
    if (!decoded) return decoded.failure();
    event.kv = std::move(*decoded);
    return event;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
    std::string text;
    text.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const auto group = (std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
                           (std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
                           std::uint32_t{static_cast<unsigned char>(bytes[i + 2])};
        for (int shift = 18; shift >= 0; shift -= 6) text += kAlphabet[(group >> shift) & 63];
    }
    const std::size_t rest = bytes.size() - i;
    if (rest > 0) {
        std::uint32_t group = std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
        if (rest == 2) group |= std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
        text += kAlphabet[(group >> 18) & 63];
        text += kAlphabet[(group >> 12) & 63];
        text += rest == 2 ? kAlphabet[(group >> 6) & 63] : '=';
        text += '=';
    }
    return text;
}

core::Result<std::string> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) return core::Error{"base64 text of a length not a multiple of 4"};
    std::size_t padding = 0;
    while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') {
        ++padding;
    }
    std::string bytes;
    bytes.reserve(text.size() / 4 * 3);
    std::uint32_t group = 0;
    const std::size_t significant = text.size() - padding;
    for (std::size_t i = 0; i < text.size(); ++i) {
        int sextet = 0;
        if (i < significant) {
            sextet = kDecodeTable[static_cast<unsigned char>(text[i])];
            if (sextet < 0) return core::Error{"a byte outside base64's alphabet"};
        }
        group = (group << 6) | static_cast<std::uint32_t>(sextet);
        if (i % 4 == 3) {
            bytes += static_cast<char>((group >> 16) & 0xff);
            bytes += static_cast<char>((group >> 8) & 0xff);
            bytes += static_cast<char>(group & 0xff);
            group = 0;
        }
    }
    bytes.resize(bytes.size() - padding);
    return bytes;
}

std::string prefix_end(std::string_view prefix) {
    std::string end(prefix);
    while (!end.empty()) {
        auto& last = reinterpret_cast<unsigned char&>(end.back());
        if (last != 0xff) {
            ++last;
            return end;
        }
        end.pop_back();
    }
    // Not {1, '\0'}: braces would pick the initializer-list constructor.
    return std::string(1, '\0');  // NOLINT(modernize-return-braced-init-list)
}

std::string dump(const Json& request) {
    return request.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json range_request(std::string_view key, std::string_view range_end) {
    Json json{{"key", base64_encode(key)}};
    if (!range_end.empty()) json["range_end"] = base64_encode(range_end);
    return json;
}

Json put_request(std::string_view key, std::string_view value, std::int64_t lease) {
    Json json{{"key", base64_encode(key)}, {"value", base64_encode(value)}};
    if (lease != 0) json["lease"] = std::to_string(lease);
    return json;
}

Json prefix_request(std::string_view prefix) {
    // etcd refuses an empty key; "\0" to "\0" is its way of saying every key.
    const std::string_view first = prefix.empty() ? std::string_view("\0", 1) : prefix;
    return range_request(first, prefix_end(prefix));
}

Json delete_request(std::string_view key, std::string_view range_end) {
    return range_request(key, range_end);
}

Json txn_request(const EtcdTxn& txn) {
    Json compares = Json::array(), success = Json::array(), failure = Json::array();
    for (const auto& compare : txn.compares) compares.push_back(compare_request(compare));
    for (const auto& op : txn.success) success.push_back(op_request(op));
    for (const auto& op : txn.failure) failure.push_back(op_request(op));
    return {{"compare", std::move(compares)},
            {"success", std::move(success)},
            {"failure", std::move(failure)}};
}

Json watch_create_request(std::string_view prefix, std::int64_t start_revision) {
    Json create = prefix_request(prefix);
    if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
    return {{"create_request", std::move(create)}};
}

core::Result<Json> parse_object(std::string_view body) {
    Json json = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) return core::Error{"the answer is not JSON"};
    if (!json.is_object()) return core::Error{"the answer is not a JSON object"};
    return json;
}

core::Result<std::int64_t> int_field(const Json& object, std::string_view name) {
    const auto it = object.find(name);
    if (it == object.end()) return std::int64_t{0};
    if (it->is_number_integer()) return it->get<std::int64_t>();
    std::int64_t value = 0;
    if (it->is_string() && core::parse_int64(it->get_ref<const std::string&>(), value)) {
        return value;
    }
    return core::Error{"field " + std::string(name) + " is not an integer"};
}

core::Result<std::int64_t> header_revision(const Json& answer) {
    const auto header = answer.find("header");
    if (header == answer.end() || !header->is_object()) {
        return core::Error{"the answer has no header"};
    }
    return int_field(*header, "revision");
}

core::Result<EtcdRange> decode_range(const Json& answer) {
    EtcdRange range;
    auto revision = header_revision(answer);
    if (!revision) return revision.failure();
    range.revision = *revision;
    const Json* kvs = array_field(answer, "kvs");
    if (!kvs) return core::Error{"field kvs is not an array"};
    for (const auto& item : *kvs) {
        auto kv = decode_kv(item);
        if (!kv) return kv.failure();
        range.kvs.push_back(std::move(*kv));
    }
    return range;
}

core::Result<EtcdTxnResult> decode_txn(const Json& answer) {
    EtcdTxnResult result;
    auto revision = header_revision(answer);
    if (!revision) return revision.failure();
    result.revision = *revision;
    result.succeeded = bool_field(answer, "succeeded");
    const Json* responses = array_field(answer, "responses");
    if (!responses) return core::Error{"field responses is not an array"};
    for (const auto& response : *responses) {
        if (!response.is_object()) return core::Error{"a transaction response is not an object"};
        const auto range = response.find("response_range");
        if (range == response.end()) continue;
        if (!range->is_object()) return core::Error{"field response_range is not an object"};
        // A range inside a transaction has a header without its revision.
        EtcdRange decoded;
        const Json* kvs = array_field(*range, "kvs");
        if (!kvs) return core::Error{"field kvs is not an array"};
        for (const auto& item : *kvs) {
            auto kv = decode_kv(item);
            if (!kv) return kv.failure();
            decoded.kvs.push_back(std::move(*kv));
        }
        decoded.revision = result.revision;
        result.ranges.push_back(std::move(decoded));
    }
    return result;
}

core::Result<EtcdLease> decode_lease(const Json& answer) {
    auto id = int_field(answer, "ID");
    if (!id) return id.failure();
    auto ttl = int_field(answer, "TTL");
    if (!ttl) return ttl.failure();
    auto error = string_field(answer, "error");
    if (error && !error->empty()) return core::Error{*error};
    return EtcdLease{*id, *ttl};
}

Refusal decode_refusal(unsigned http_status, std::string_view body) {
    const std::string status = "HTTP " + std::to_string(http_status);
    auto json = parse_object(body);
    if (json) {
        Refusal refusal;
        if (stream_refusal(*json, refusal)) return refusal;
    }
    return Refusal{0, status + " without etcd's error object"};
}

bool stream_refusal(const Json& object, Refusal& refusal) {
    const auto error = object.find("error");
    if (error == object.end()) return false;
    // Unary answers: {"error": text, "code": N}; streams: {"error": {...}}.
    const Json& holder = error->is_object() ? *error : object;
    auto message = string_field(holder, error->is_object() ? "message" : "error");
    auto code = int_field(holder, error->is_object() ? "grpc_code" : "code");
    refusal.message = message && !message->empty() ? *message : "an error without its text";
    refusal.code = code ? static_cast<int>(*code) : 0;
    return true;
}

core::Result<WatchMessage> decode_watch_message(const Json& object) {
    const auto result = object.find("result");
    if (result == object.end() || !result->is_object()) {
        return core::Error{"a watch message without its result"};
    }
    WatchMessage message;
    message.created = bool_field(*result, "created");
    message.canceled = bool_field(*result, "canceled");
    auto compact = int_field(*result, "compact_revision");
    auto reason = string_field(*result, "cancel_reason");
    if (!compact || !reason) return core::Error{"a watch message with bad fields"};
    message.compact_revision = *compact;
    message.cancel_reason = std::move(*reason);
    auto revision = header_revision(*result);
    if (!revision) return revision.failure();
    message.revision = *revision;
    const Json* events = array_field(*result, "events");
    if (!events) return core::Error{"field events is not an array"};
    for (const auto& item : *events) {
        auto event = decode_event(item);
        if (!event) return event.failure();
        message.events.push_back(std::move(*event));
    }
    return message;
}

}  // namespace bloomery::cluster::etcd_json
