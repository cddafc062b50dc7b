#include "resp_matchers.hpp"

#include <cstdint>
#include <memory>
#include <optional>

#include "bloomery/core/parse_int64.hpp"

namespace bloomery::resp::testing {
namespace {

constexpr std::string_view kCrlf = "\r\n";

RespValue of_type(RespType type) {
    RespValue value;
    value.type = type;
    return value;
}

// Reads replies from the front of the bytes; every problem makes the value
// it was reading `invalid`, with where and why.
class Decoder {
public:
    explicit Decoder(std::string_view bytes) : bytes_(bytes) {}

    bool at_end() const { return pos_ == bytes_.size(); }
    std::size_t position() const { return pos_; }

    RespValue next() {
        if (at_end()) return invalid("no reply");
        const char prefix = bytes_[pos_++];
        const std::optional<std::string_view> line = read_line();
        if (!line) return invalid("a line without CRLF");
        switch (prefix) {
            case '+':
                return text_value(RespType::simple, *line);
            case '-':
                return text_value(RespType::error, *line);
            case ',':
                return text_value(RespType::real, *line);
            case ':':
                return integer(*line);
            case '#':
                return boolean(*line);
            case '_':
                return line->empty() ? of_type(RespType::null) : invalid("'_' with a payload");
            case '$':
                return bulk(*line, RespType::bulk);
            case '=':
                return bulk(*line, RespType::verbatim);
            case '*':
                return aggregate(*line, RespType::array, 1);
            case '~':
                return aggregate(*line, RespType::set, 1);
            case '>':
                return aggregate(*line, RespType::push, 1);
            case '%':
                return aggregate(*line, RespType::map, 2);
            default:
                return invalid("unknown type byte '" + std::string(1, prefix) + "'");
        }
    }

private:
    RespValue invalid(std::string why) const {
        RespValue value;
        value.type = RespType::invalid;
        value.text = std::move(why) + " at byte " + std::to_string(pos_);
        return value;
    }

    // The rest of the line, up to a CRLF that it then skips.
    std::optional<std::string_view> read_line() {
        const std::size_t end = bytes_.find(kCrlf, pos_);
        if (end == std::string_view::npos) return std::nullopt;
        const std::string_view line = bytes_.substr(pos_, end - pos_);
        pos_ = end + kCrlf.size();
        return line;
    }

    static RespValue text_value(RespType type, std::string_view text) {
        RespValue value;
        value.type = type;
        value.text = std::string(text);
        return value;
    }

    RespValue integer(std::string_view line) const {
        RespValue value;
        value.type = RespType::integer;
        if (!core::parse_int64(line, value.integer))
            return invalid("integer '" + std::string(line) + "'");
        return value;
    }

    RespValue boolean(std::string_view line) const {
        if (line != "t" && line != "f") return invalid("boolean '" + std::string(line) + "'");
        RespValue value;
        value.type = RespType::boolean;
        value.integer = line == "t" ? 1 : 0;
        return value;
    }

    // A length or count: canonical, at least -1.
    std::optional<std::int64_t> size_of(std::string_view line) const {
        std::int64_t size = 0;
        if (!core::parse_int64(line, size) || size < -1) return std::nullopt;
        return size;
    }

    RespValue bulk(std::string_view line, RespType type) {
        const std::optional<std::int64_t> length = size_of(line);
        if (!length) return invalid("length '" + std::string(line) + "'");
        if (*length == -1) {
            return type == RespType::bulk ? of_type(RespType::null_bulk)
                                          : invalid("a null verbatim string");
        }
        const auto size = static_cast<std::size_t>(*length);
        if (bytes_.size() - pos_ < size + kCrlf.size()) return invalid("a string cut short");
        if (bytes_.substr(pos_ + size, kCrlf.size()) != kCrlf) {
            return invalid("a string not followed by CRLF");
        }
        RespValue value;
        value.type = type;
        value.text = std::string(bytes_.substr(pos_, size));
        pos_ += size + kCrlf.size();
        if (type == RespType::verbatim) {
            if (value.text.size() < 4 || value.text[3] != ':') {
                return invalid("a verbatim string without its format");
            }
            value.format = value.text.substr(0, 3);
            value.text.erase(0, 4);
        }
        return value;
    }

    // `per_entry` values per counted entry: 2 for a map's key and value.
    RespValue aggregate(std::string_view line, RespType type, std::int64_t per_entry) {
        const std::optional<std::int64_t> count = size_of(line);
        if (!count) return invalid("count '" + std::string(line) + "'");
        if (*count == -1) {
            return type == RespType::array ? of_type(RespType::null_array)
                                           : invalid("a null aggregate other than an array");
        }
        RespValue value;
        value.type = type;
        for (std::int64_t i = 0; i < *count * per_entry; ++i) {
            RespValue element = next();
            if (element.type == RespType::invalid) return element;
            value.elements.push_back(std::move(element));
        }
        return value;
    }

    std::string_view bytes_;
    std::size_t pos_ = 0;
};

void print_quoted(const std::string& text, std::ostream* os) {
    *os << '"';
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            *os << '\\' << c;
        } else if (c == '\r') {
            *os << "\\r";
        } else if (c == '\n') {
            *os << "\\n";
        } else if (byte < 0x20 || byte >= 0x7f) {
            constexpr char kHex[] = "0123456789abcdef";
            *os << "\\x" << kHex[byte >> 4] << kHex[byte & 0xf];
        } else {
            *os << c;
        }
    }
    *os << '"';
}

void print_elements(const RespValue& value, std::ostream* os) {
    const bool map = value.type == RespType::map;
    *os << (map ? '{' : '[');
    for (std::size_t i = 0; i < value.elements.size(); ++i) {
        if (i > 0) *os << (map && i % 2 == 1 ? ": " : ", ");
        PrintTo(value.elements[i], os);
    }
    *os << (map ? '}' : ']');
}

const char* type_name(RespType type) {
    switch (type) {
        case RespType::simple:
            return "a simple string";
        case RespType::error:
            return "an error";
        case RespType::integer:
            return "an integer";
        case RespType::bulk:
            return "a bulk string";
        case RespType::null_bulk:
            return "a RESP2 null bulk string ($-1)";
        case RespType::array:
            return "an array";
        case RespType::null_array:
            return "a RESP2 null array (*-1)";
        case RespType::null:
            return "a RESP3 null (_)";
        case RespType::boolean:
            return "a RESP3 boolean";
        case RespType::real:
            return "a RESP3 double";
        case RespType::verbatim:
            return "a RESP3 verbatim string";
        case RespType::map:
            return "a RESP3 map";
        case RespType::set:
            return "a RESP3 set";
        case RespType::push:
            return "a RESP3 push";
        case RespType::invalid:
            break;
    }
    return "not a reply";
}

// A reply of one type whose field (text, integer or elements) matches.
template <class Field>
class TypedReply final : public ::testing::MatcherInterface<const RespValue&> {
public:
    TypedReply(RespType type, Field RespValue::*field, ::testing::Matcher<const Field&> inner)
        : type_(type), field_(field), inner_(std::move(inner)) {}

    bool MatchAndExplain(const RespValue& value,
                         ::testing::MatchResultListener* listener) const override {
        if (value.type != type_) {
            *listener << "which is " << type_name(value.type) << ": "
                      << ::testing::PrintToString(value);
            return false;
        }
        ::testing::StringMatchResultListener inner_listener;
        const bool matched = inner_.MatchAndExplain(value.*field_, &inner_listener);
        *listener << "which is " << ::testing::PrintToString(value);
        if (!inner_listener.str().empty()) *listener << ", " << inner_listener.str();
        return matched;
    }
    void DescribeTo(std::ostream* os) const override {
        *os << "is " << type_name(type_) << " that ";
        inner_.DescribeTo(os);
    }
    void DescribeNegationTo(std::ostream* os) const override {
        *os << "is not " << type_name(type_) << " that ";
        inner_.DescribeTo(os);
    }

private:
    RespType type_;
    Field RespValue::*field_;
    ::testing::Matcher<const Field&> inner_;
};

// A reply of one type that carries nothing (the nulls).
class EmptyReply final : public ::testing::MatcherInterface<const RespValue&> {
public:
    explicit EmptyReply(RespType type) : type_(type) {}

    bool MatchAndExplain(const RespValue& value,
                         ::testing::MatchResultListener* listener) const override {
        *listener << "which is " << ::testing::PrintToString(value);
        return value.type == type_;
    }
    void DescribeTo(std::ostream* os) const override { *os << "is " << type_name(type_); }
    void DescribeNegationTo(std::ostream* os) const override {
        *os << "is not " << type_name(type_);
    }

private:
    RespType type_;
};

// A map or an array of keys and values holding an entry that matches.
class EntryMatcher final : public ::testing::MatcherInterface<const RespValue&> {
public:
    EntryMatcher(::testing::Matcher<const RespValue&> key,
                 ::testing::Matcher<const RespValue&> value)
        : key_(std::move(key)), value_(std::move(value)) {}

    bool MatchAndExplain(const RespValue& reply,
                         ::testing::MatchResultListener* listener) const override {
        *listener << "which is " << ::testing::PrintToString(reply);
        if (reply.type != RespType::map && reply.type != RespType::array) return false;
        for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2) {
            if (key_.Matches(reply.elements[i]) && value_.Matches(reply.elements[i + 1])) {
                return true;
            }
        }
        return false;
    }
    void DescribeTo(std::ostream* os) const override {
        *os << "is a map (or an array of keys and values) with an entry whose key ";
        key_.DescribeTo(os);
        *os << " and whose value ";
        value_.DescribeTo(os);
    }
    void DescribeNegationTo(std::ostream* os) const override {
        *os << "has no entry whose key ";
        key_.DescribeTo(os);
        *os << " and whose value ";
        value_.DescribeTo(os);
    }

private:
    ::testing::Matcher<const RespValue&> key_;
    ::testing::Matcher<const RespValue&> value_;
};

template <class Field>
ReplyMatcher typed(RespType type, Field RespValue::*field, ::testing::Matcher<const Field&> inner) {
    return ::testing::MakePolymorphicMatcher(internal::ReplyMatcher(
        ::testing::MakeMatcher(new TypedReply<Field>(type, field, std::move(inner)))));
}

ReplyMatcher empty(RespType type) {
    return ::testing::MakePolymorphicMatcher(
        internal::ReplyMatcher(::testing::MakeMatcher(new EmptyReply(type))));
}

}  // namespace

RespValue decode_reply(std::string_view bytes) {
    Decoder decoder(bytes);
    RespValue value = decoder.next();
    if (value.type != RespType::invalid && !decoder.at_end()) {
        RespValue extra;
        extra.type = RespType::invalid;
        extra.text =
            "a reply and " + std::to_string(bytes.size() - decoder.position()) + " bytes more";
        return extra;
    }
    return value;
}

std::vector<RespValue> decode_replies(std::string_view bytes) {
    Decoder decoder(bytes);
    std::vector<RespValue> replies;
    while (!decoder.at_end()) {
        replies.push_back(decoder.next());
        if (replies.back().type == RespType::invalid) break;
    }
    return replies;
}

void PrintTo(const RespValue& value, std::ostream* os) {
    switch (value.type) {
        case RespType::simple:
            *os << '+' << value.text;
            return;
        case RespType::error:
            *os << '-' << value.text;
            return;
        case RespType::integer:
            *os << ':' << value.integer;
            return;
        case RespType::bulk:
            print_quoted(value.text, os);
            return;
        case RespType::null_bulk:
            *os << "$-1";
            return;
        case RespType::null_array:
            *os << "*-1";
            return;
        case RespType::null:
            *os << '_';
            return;
        case RespType::boolean:
            *os << (value.integer != 0 ? "#t" : "#f");
            return;
        case RespType::real:
            *os << ',' << value.text;
            return;
        case RespType::verbatim:
            *os << '=' << value.format << ':';
            print_quoted(value.text, os);
            return;
        case RespType::array:
        case RespType::set:
        case RespType::push:
        case RespType::map: {
            constexpr std::string_view kPrefixes = "*~>%";
            const std::size_t which = value.type == RespType::array  ? 0
                                      : value.type == RespType::set  ? 1
                                      : value.type == RespType::push ? 2
                                                                     : 3;
            *os << kPrefixes[which];
            print_elements(value, os);
            return;
        }
        case RespType::invalid:
            *os << "(not a reply: " << value.text << ')';
            return;
    }
}

ReplyMatcher IsSimple(TextMatcher text) {
    return typed(RespType::simple, &RespValue::text, std::move(text));
}
ReplyMatcher IsOk() {
    return IsSimple("OK");
}
ReplyMatcher IsError(TextMatcher text) {
    return typed(RespType::error, &RespValue::text, std::move(text));
}
ReplyMatcher IsInt(::testing::Matcher<std::int64_t> value) {
    return typed<std::int64_t>(RespType::integer, &RespValue::integer,
                               ::testing::SafeMatcherCast<const std::int64_t&>(value));
}
ReplyMatcher IsBulk(TextMatcher text) {
    return typed(RespType::bulk, &RespValue::text, std::move(text));
}
ReplyMatcher IsNullBulk() {
    return empty(RespType::null_bulk);
}
ReplyMatcher IsNullArray() {
    return empty(RespType::null_array);
}
ReplyMatcher IsNull3() {
    return empty(RespType::null);
}
ReplyMatcher IsBool(bool value) {
    return typed<std::int64_t>(RespType::boolean, &RespValue::integer,
                               ::testing::Eq(std::int64_t{value ? 1 : 0}));
}
ReplyMatcher IsReal(TextMatcher text) {
    return typed(RespType::real, &RespValue::text, std::move(text));
}
ReplyMatcher IsVerbatim(TextMatcher text) {
    return ::testing::MakePolymorphicMatcher(internal::ReplyMatcher(
        ::testing::AllOf(::testing::MakeMatcher(new TypedReply<std::string>(
                             RespType::verbatim, &RespValue::text, std::move(text))),
                         ::testing::Field("format", &RespValue::format, std::string("txt")))));
}
ReplyMatcher HasEntry(::testing::Matcher<const RespValue&> key,
                      ::testing::Matcher<const RespValue&> value) {
    return ::testing::MakePolymorphicMatcher(internal::ReplyMatcher(
        ::testing::MakeMatcher(new EntryMatcher(std::move(key), std::move(value)))));
}
ReplyMatcher IsArrayThat(ElementsMatcher elements) {
    return typed(RespType::array, &RespValue::elements, std::move(elements));
}
ReplyMatcher IsMapThat(ElementsMatcher keys_and_values) {
    return typed(RespType::map, &RespValue::elements, std::move(keys_and_values));
}
ReplyMatcher IsSetThat(ElementsMatcher elements) {
    return typed(RespType::set, &RespValue::elements, std::move(elements));
}
ReplyMatcher IsPushThat(ElementsMatcher elements) {
    return typed(RespType::push, &RespValue::elements, std::move(elements));
}

}  // namespace bloomery::resp::testing
