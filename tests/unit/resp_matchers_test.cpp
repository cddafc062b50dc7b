// The reply decoder and matchers the command tests use (resp_matchers.hpp):
// they must accept exactly what the writer writes and pin it as tightly as
// its bytes.

#include "resp_matchers.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "bloomery/resp/writer.hpp"

namespace bloomery::resp::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

TEST(RespMatchers, DecodeWhatTheWriterWritesInBothProtocols) {
    for (const int protocol : {2, 3}) {
        std::string out;
        resp::Writer writer(out);
        writer.set_protocol(protocol);
        writer.array(9);
        writer.ok();
        writer.error("ERR no");
        writer.integer(-42);
        writer.bulk(std::string("a\r\n\0b", 5));
        writer.null();
        writer.map(1);
        writer.simple("k");
        writer.boolean(true);
        writer.set(0);
        writer.real(1.5);
        writer.verbatim("text");
        if (protocol == 2) {
            EXPECT_THAT(out, IsArray(IsOk(), IsError("ERR no"), IsInt(-42),
                                     IsBulk(std::string("a\r\n\0b", 5)), IsNullBulk(),
                                     IsArray(IsSimple("k"), IsInt(1)), IsArray(), IsBulk("1.5"),
                                     IsBulk("text")));
        } else {
            EXPECT_THAT(out, IsArray(IsOk(), IsError("ERR no"), IsInt(-42),
                                     IsBulk(std::string("a\r\n\0b", 5)), IsNull3(),
                                     IsMap(IsSimple("k"), IsBool(true)), IsSet(), IsReal("1.5"),
                                     IsVerbatim("text")));
        }
    }
}

TEST(RespMatchers, TypesAreToldApart) {
    EXPECT_THAT(":1\r\n", Not(IsBool(true)));
    EXPECT_THAT("#t\r\n", Not(IsInt(1)));
    EXPECT_THAT("+OK\r\n", Not(IsBulk("OK")));
    EXPECT_THAT("$2\r\nOK\r\n", Not(IsOk()));
    EXPECT_THAT("$-1\r\n", Not(IsNullArray()));
    EXPECT_THAT("*-1\r\n", IsNullArray());
    EXPECT_THAT("_\r\n", Not(IsNullBulk()));
    EXPECT_THAT("%1\r\n+a\r\n:1\r\n", Not(IsArray(IsSimple("a"), IsInt(1))));
    EXPECT_THAT(">2\r\n$7\r\nmessage\r\n$1\r\nx\r\n", IsPush(IsBulk("message"), IsBulk("x")));
}

TEST(RespMatchers, OnlyCanonicalWholeRepliesDecode) {
    for (const char* bad : {"", ":01\r\n", ":+1\r\n", ":-0\r\n", ":1\n", ":1", "$3\r\nab\r\n",
                            "$2\r\nabc\r\n", "$01\r\na\r\n", "*2\r\n:1\r\n", ":1\r\n:2\r\n",
                            "#x\r\n", "_x\r\n", "~-1\r\n", "(12\r\n", "=3\r\nabc\r\n"}) {
        EXPECT_EQ(decode_reply(bad).type, RespType::invalid) << ::testing::PrintToString(bad);
        EXPECT_THAT(bad, Not(IsInt(::testing::_))) << ::testing::PrintToString(bad);
    }
}

TEST(RespMatchers, MatchersTakeGmockMatchersForTheirContents) {
    EXPECT_THAT("-ERR unknown command 'x'\r\n", IsError(StartsWith("ERR unknown")));
    EXPECT_THAT(":7\r\n", IsInt(::testing::Gt(5)));
    EXPECT_THAT("*3\r\n:1\r\n:2\r\n:3\r\n", IsArrayThat(SizeIs(3)));
    EXPECT_THAT("*2\r\n$1\r\na\r\n$1\r\nb\r\n",
                IsArrayThat(::testing::UnorderedElementsAre(IsBulk("b"), IsBulk("a"))));
    EXPECT_THAT("$5\r\nhello\r\n", IsBulk(HasSubstr("ell")));
}

TEST(RespMatchers, EntriesAreFoundInMapsAndInArraysOfKeysAndValues) {
    EXPECT_THAT("%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n", HasEntry(IsSimple("b"), IsInt(2)));
    EXPECT_THAT("*4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n:2\r\n", HasEntry(IsBulk("a"), IsInt(1)));
    // Keys are at even places only: a value equal to a key is no key.
    EXPECT_THAT("*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nb\r\n:2\r\n",
                Not(HasEntry(IsBulk("b"), IsBulk("b"))));
    EXPECT_THAT(":1\r\n", Not(HasEntry(::testing::_, ::testing::_)));
}

TEST(RespMatchers, SeveralRepliesMatchInOrder) {
    EXPECT_THAT("-ERR a\r\n+OK\r\n:3\r\n", Replies(IsError("ERR a"), IsOk(), IsInt(3)));
    EXPECT_THAT("+OK\r\n:3\r\n", Not(Replies(IsOk())));
    EXPECT_THAT("+OK\r\n:3", Not(Replies(IsOk(), IsInt(3))));
    EXPECT_THAT(decode_replies("+OK\r\n+OK\r\n"), ElementsAre(IsOk(), IsOk()));
}

TEST(RespMatchers, FailuresShowTheReplyReadably) {
    const auto explain = [](const auto& matcher, std::string_view bytes) {
        ::testing::StringMatchResultListener listener;
        EXPECT_FALSE(::testing::ExplainMatchResult(matcher, std::string(bytes), &listener));
        return listener.str();
    };
    EXPECT_THAT(explain(IsInt(1), "$1\r\n1\r\n"), HasSubstr("a bulk string: \"1\""));
    EXPECT_THAT(explain(IsArray(IsInt(1)), "*1\r\n:2\r\n"), HasSubstr("*[:2]"));
    EXPECT_THAT(explain(IsOk(), "+OK\r\nx"), HasSubstr("not one RESP reply"));
}

}  // namespace
}  // namespace bloomery::resp::testing
