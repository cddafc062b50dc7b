#pragma once
// Replies as trees, for tests: a strict RESP2/RESP3 decoder and gmock
// matchers over what it decodes, so a test says what a reply is
// (IsArray(IsInt(1), IsError(StartsWith("ERR")))) instead of spelling its
// bytes.
//
//   EXPECT_THAT(run({"BF.MADD", "k", "a", "b"}), IsArray(IsInt(1), IsInt(1)));
//   EXPECT_THAT(run({"BF.ADD", "k"}), IsError(HasSubstr("wrong number")));
//   EXPECT_THAT(run({"HELLO", "3"}), HasEntry(IsBulk("proto"), IsInt(3)));
//
// Every matcher takes either a decoded RespValue or the raw bytes (a
// std::string or string_view holding exactly one reply); Replies(...) takes
// the bytes of several. The decoder is strict: lengths and integers in
// Redis's canonical form (no '+', no leading zero, no "-0"), every line
// ending in CRLF, nothing left over. So a tree matched exactly (IsInt(1),
// IsBulk("x"), IsArray(...) with every element) stands for exactly one byte
// string: such a matcher pins a reply as tightly as comparing its bytes.
// The one exception is a double, kept and matched as the text it was
// written in.
//
// Accepted: + - : $ * (and their RESP2 nulls $-1, *-1), and RESP3's _ # ,
// = % ~ >. Not accepted: big numbers and attributes (the server writes
// neither).

#include <gmock/gmock.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace bloomery::resp::testing {

enum class RespType {
    simple,      // +text
    error,       // -text
    integer,     // :n
    bulk,        // $len text
    null_bulk,   // $-1 (RESP2)
    array,       // *n
    null_array,  // *-1 (RESP2)
    null,        // _ (RESP3)
    boolean,     // #t / #f
    real,        // ,text (RESP3 double, kept as written)
    verbatim,    // =len fmt:text
    map,         // %n
    set,         // ~n
    push,        // >n
    invalid,     // not a reply: `text` says why
};

struct RespValue {
    RespType type = RespType::invalid;
    // simple and error (without the '+' or '-'), bulk, real, verbatim (after
    // its format), invalid (why).
    std::string text;
    std::string format;               // verbatim: "txt" or "mkd"
    std::int64_t integer = 0;         // integer; boolean: 1 or 0
    std::vector<RespValue> elements;  // array, set, push; map: key, value, key, value, ...
};

// Decodes `bytes` as exactly one reply. Anything else (nothing, a reply and
// more bytes, a malformed reply) decodes as a RespValue of type `invalid`
// whose text says why; every matcher refuses it.
RespValue decode_reply(std::string_view bytes);
// Every reply in `bytes`, in order; a malformed one ends the list as an
// `invalid` value.
std::vector<RespValue> decode_replies(std::string_view bytes);

// Readable, for failure messages: :1, +OK, -ERR x, "bulk", $-1, *[:1, "a"],
// %{+key: :1}, #t, ,1.5, =txt:"...", _.
void PrintTo(const RespValue& value, std::ostream* os);

namespace internal {

// A matcher of decoded replies that also reads raw bytes.
class ReplyMatcher {
public:
    explicit ReplyMatcher(::testing::Matcher<const RespValue&> inner) : inner_(std::move(inner)) {}

    template <class T>
    bool MatchAndExplain(const T& value, ::testing::MatchResultListener* listener) const {
        if constexpr (std::is_convertible_v<const T&, std::string_view>) {
            return MatchAndExplain(decode_reply(std::string_view(value)), listener);
        } else {
            static_assert(std::is_same_v<T, RespValue>, "a RespValue or the bytes of a reply");
            if (value.type == RespType::invalid) {
                *listener << "which is not one RESP reply: " << value.text;
                return false;
            }
            return inner_.MatchAndExplain(value, listener);
        }
    }
    void DescribeTo(std::ostream* os) const { inner_.DescribeTo(os); }
    void DescribeNegationTo(std::ostream* os) const { inner_.DescribeNegationTo(os); }

private:
    ::testing::Matcher<const RespValue&> inner_;
};

// The bytes of several replies, matched as a list.
class RepliesMatcher {
public:
    explicit RepliesMatcher(::testing::Matcher<const std::vector<RespValue>&> inner)
        : inner_(std::move(inner)) {}

    template <class T>
    bool MatchAndExplain(const T& bytes, ::testing::MatchResultListener* listener) const {
        static_assert(std::is_convertible_v<const T&, std::string_view>, "the bytes of replies");
        const std::vector<RespValue> replies = decode_replies(std::string_view(bytes));
        *listener << "whose replies are " << ::testing::PrintToString(replies);
        return inner_.Matches(replies);
    }
    void DescribeTo(std::ostream* os) const {
        *os << "are replies that ";
        inner_.DescribeTo(os);
    }
    void DescribeNegationTo(std::ostream* os) const {
        *os << "are not replies that ";
        inner_.DescribeTo(os);
    }

private:
    ::testing::Matcher<const std::vector<RespValue>&> inner_;
};

}  // namespace internal

using ReplyMatcher = ::testing::PolymorphicMatcher<internal::ReplyMatcher>;
using TextMatcher = ::testing::Matcher<const std::string&>;
using ElementsMatcher = ::testing::Matcher<const std::vector<RespValue>&>;

ReplyMatcher IsSimple(TextMatcher text);  // +text
ReplyMatcher IsOk();                      // +OK
ReplyMatcher IsError(TextMatcher text);   // -text, text with its prefix ("ERR ...")
ReplyMatcher IsInt(::testing::Matcher<std::int64_t> value);
ReplyMatcher IsBulk(TextMatcher text);
ReplyMatcher IsNullBulk();   // RESP2 $-1
ReplyMatcher IsNullArray();  // RESP2 *-1
ReplyMatcher IsNull3();      // RESP3 _
ReplyMatcher IsBool(bool value);
ReplyMatcher IsReal(TextMatcher text);      // as written: "1.5", "inf"
ReplyMatcher IsVerbatim(TextMatcher text);  // the text after "txt:"
ReplyMatcher IsArrayThat(ElementsMatcher elements);
ReplyMatcher IsMapThat(ElementsMatcher keys_and_values);  // key, value, key, value, ...
ReplyMatcher IsSetThat(ElementsMatcher elements);
ReplyMatcher IsPushThat(ElementsMatcher elements);

// A map, or a RESP2 array of keys and values (what a map is in RESP2), with
// an entry whose key and value match.
ReplyMatcher HasEntry(::testing::Matcher<const RespValue&> key,
                      ::testing::Matcher<const RespValue&> value);

// Exactly these elements, in order (a map: key, value, key, value, ...).
template <class... M>
ReplyMatcher IsArray(M&&... elements) {
    return IsArrayThat(::testing::ElementsAre(std::forward<M>(elements)...));
}
template <class... M>
ReplyMatcher IsMap(M&&... keys_and_values) {
    static_assert(sizeof...(M) % 2 == 0, "a map is keys and values");
    return IsMapThat(::testing::ElementsAre(std::forward<M>(keys_and_values)...));
}
template <class... M>
ReplyMatcher IsSet(M&&... elements) {
    return IsSetThat(::testing::ElementsAre(std::forward<M>(elements)...));
}
template <class... M>
ReplyMatcher IsPush(M&&... elements) {
    return IsPushThat(::testing::ElementsAre(std::forward<M>(elements)...));
}

// The bytes of exactly these replies, in order (a pipeline's answers).
template <class... M>
::testing::PolymorphicMatcher<internal::RepliesMatcher> Replies(M&&... replies) {
    return ::testing::MakePolymorphicMatcher(
        internal::RepliesMatcher(::testing::ElementsAre(std::forward<M>(replies)...)));
}

}  // namespace bloomery::resp::testing
