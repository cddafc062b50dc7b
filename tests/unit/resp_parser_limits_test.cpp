// The RESP request parser's limits: what is accepted at each limit and refused
// one past it (multibulk and inline alike, before and after AUTH), and what a
// request makes the parser hold.

#include "bloomery/resp/parser.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "resp_parser_support.hpp"

namespace bloomery::resp {
namespace {

using namespace bloomery::resp::testing;  // the parser tests' helpers

// ------------------------------------------------------------------- limits

TEST(RespParser, MultibulkCountAtLimitIsAcceptedOnePastIsRejected) {
    const ParserLimits limits{.max_multibulk_length = 3};
    const SingleParse result = parse_once(multibulk({"a", "b", "c"}), limits);
    ASSERT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.argv, (Words{"a", "b", "c"}));
    EXPECT_EQ(error_of(multibulk({"a", "b", "c", "d"}), limits), "invalid multibulk length");
}

TEST(RespParser, BulkLengthAtLimitIsAcceptedOnePastIsRejected) {
    const ParserLimits limits{.max_bulk_length = 8};
    const SingleParse result = parse_once(multibulk({"12345678"}), limits);
    ASSERT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.argv, Words{"12345678"});
    EXPECT_EQ(error_of("*1\r\n$9\r\n", limits), "invalid bulk length");
}

TEST(RespParser, InlineLineAtLimitIsAcceptedOnePastIsRejected) {
    const ParserLimits limits{.max_inline_length = 16};
    // The limit counts every byte before the '\n', a '\r' included.
    const std::string sixteen = "ECHO 12345678901";
    ASSERT_EQ(sixteen.size(), 16u);
    EXPECT_EQ(parse_once(sixteen + "\n", limits).argv, (Words{"ECHO", "12345678901"}));
    EXPECT_EQ(parse_once(sixteen.substr(0, 15) + "\r\n", limits).argv,
              (Words{"ECHO", "1234567890"}));
    EXPECT_EQ(parse_once(sixteen, limits).status, ParseStatus::incomplete);
    EXPECT_EQ(error_of(sixteen + "2\n", limits), "too big inline request");
    EXPECT_EQ(error_of(sixteen + "\r\n", limits), "too big inline request");
    EXPECT_EQ(error_of(sixteen + "2", limits), "too big inline request");
}

TEST(RespParser, MultibulkCountLineAtLimitIsAcceptedOnePastIsRejected) {
    const ParserLimits limits{.max_inline_length = 3};
    EXPECT_EQ(parse_once("*12\r\n", limits).status, ParseStatus::incomplete);
    EXPECT_EQ(parse_once("*12", limits).status, ParseStatus::incomplete);
    EXPECT_EQ(error_of("*123\r\n", limits), "too big mbulk count string");
    EXPECT_EQ(error_of("*123", limits), "too big mbulk count string");
}

TEST(RespParser, BulkCountLineAtLimitIsAcceptedOnePastIsRejected) {
    const ParserLimits limits{.max_inline_length = 3};
    const SingleParse result = parse_once("*1\r\n$10\r\n0123456789\r\n", limits);
    ASSERT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.argv, Words{"0123456789"});
    EXPECT_EQ(parse_once("*1\r\n$10", limits).status, ParseStatus::incomplete);
    EXPECT_EQ(error_of("*1\r\n$100\r\n", limits), "too big bulk count string");
    EXPECT_EQ(error_of("*1\r\n$100", limits), "too big bulk count string");
}

TEST(RespParser, DefaultLimitsMatchRedis) {
    const ParserLimits limits;
    EXPECT_EQ(limits.max_bulk_length, 512u * 1024 * 1024);
    EXPECT_EQ(limits.max_inline_length, 64u * 1024);
    EXPECT_EQ(limits.max_multibulk_length, 1024u * 1024);
    const std::string long_line(64 * 1024 + 1, 'a');
    EXPECT_EQ(error_of(long_line), "too big inline request");
    EXPECT_EQ(parse_once(long_line.substr(1) + "\n").status, ParseStatus::complete);
}

// Inline words are arguments like multibulk ones: the same count and length
// limits apply, before authentication and after, checked as the words are split.

std::string inline_line(const Words& words, bool quoted) {
    std::string line;
    for (const auto& word : words) {
        if (!line.empty()) line += ' ';
        line += quoted ? "\"" + word + "\"" : word;
    }
    return line + "\r\n";
}

TEST(RespParser, InlineWordCountIsBoundedLikeAMultibulkCount) {
    const ParserLimits limits{.max_multibulk_length = 3};
    for (const bool quoted : {false, true}) {
        EXPECT_EQ(parse_once(inline_line({"a", "b", "c"}, quoted), limits).argv,
                  (Words{"a", "b", "c"}));
        EXPECT_EQ(error_of(inline_line({"a", "b", "c", "d"}, quoted), limits),
                  error_of(multibulk({"a", "b", "c", "d"}), limits));
    }
}

TEST(RespParser, InlineWordLengthIsBoundedLikeABulkLength) {
    const ParserLimits limits{.max_bulk_length = 8};
    EXPECT_EQ(parse_once("ECHO 12345678\r\n", limits).argv, (Words{"ECHO", "12345678"}));
    EXPECT_EQ(error_of("ECHO 123456789\r\n", limits), error_of("*1\r\n$9\r\n", limits));
    // The length is the argument's, as the command gets it: unescaped, no quotes.
    EXPECT_EQ(parse_once("ECHO \"\\x41234567\\n\"\r\n", limits).argv, (Words{"ECHO", "A234567\n"}));
    EXPECT_EQ(error_of("ECHO a\"1234567\\n\"\r\n", limits), "invalid bulk length");
}

TEST(RespParser, UnauthenticatedLimitsBoundInlineRequestsAsMultibulkOnes) {
    ParserLimits limits;
    limits.unauthenticated = true;
    const Words ten(10, "x");
    const Words eleven(11, "x");
    for (const bool quoted : {false, true}) {
        EXPECT_EQ(parse_once(inline_line(ten, quoted), limits).argv, ten);
        EXPECT_EQ(error_of(inline_line(eleven, quoted), limits),
                  "unauthenticated multibulk length");
        EXPECT_EQ(error_of(multibulk(eleven), limits), "unauthenticated multibulk length");
        const std::string longest(16 * 1024, 'y');
        EXPECT_EQ(parse_once(inline_line({"AUTH", longest}, quoted), limits).argv,
                  (Words{"AUTH", longest}));
        EXPECT_EQ(error_of(inline_line({"AUTH", longest + "y"}, quoted), limits),
                  "unauthenticated bulk length");
        EXPECT_EQ(error_of(multibulk({"AUTH", longest + "y"}), limits),
                  "unauthenticated bulk length");
    }
    // Authenticated: the same requests pass.
    limits.unauthenticated = false;
    EXPECT_EQ(parse_once(inline_line(eleven, true), limits).argv, eleven);
}

TEST(RespParser, InlineLimitsAreTheSameAtEverySplit) {
    ParserLimits limits{.max_bulk_length = 4, .max_multibulk_length = 3};
    expect_same_at_every_split("a b c\r\n\"a\" 'b'\r\na b c d\r\n", limits);
    expect_same_at_every_split("a b\r\nabcd \"abcde\"\r\n", limits);
    limits.unauthenticated = true;
    limits.unauthenticated_max_multibulk_length = 2;
    limits.unauthenticated_max_bulk_length = 2;
    expect_same_at_every_split("a b\r\nab \"\\x41b\"\r\na b c\r\n", limits);
    expect_same_at_every_split("ab\r\nabc\r\n", limits);
}

// ------------------------------------------------------------ memory held

// A hostile inline AUTH of 21,800 empty quoted words (the most a 64 KiB line
// holds) once made the parser keep a string per word, 1.6 MB per connection.
// Before authentication it stops at the eleventh word and keeps no more than
// the line's own size.
TEST(RespParser, HostileInlineRequestBeforeAuthIsRefusedAtItsEleventhWord) {
    ParserLimits limits;
    limits.unauthenticated = true;
    std::string line = "AUTH";
    for (int i = 0; i < 21800; ++i) line += " \"\"";
    line += "\r\n";
    ASSERT_LE(line.size(), limits.max_inline_length);
    Parser parser(limits);
    std::vector<std::string_view> argv;
    ASSERT_EQ(parser.parse(line, argv).status, ParseStatus::error);
    EXPECT_EQ(parser.error_message(), "unauthenticated multibulk length");
    EXPECT_LE(argv.capacity(), 16u);
    EXPECT_LE(parser.memory_bytes(), line.size());
}

TEST(RespParser, PartialMultibulkHoldsNoPerArgumentBookkeeping) {
    Parser parser;
    std::vector<std::string_view> argv;
    std::string input = "*100000\r\n";
    for (int i = 0; i < 99999; ++i) input += "$0\r\n\r\n";
    ASSERT_EQ(parser.parse(input, argv).status, ParseStatus::incomplete);
    EXPECT_EQ(parser.memory_bytes(), 0u);
    EXPECT_EQ(argv.capacity(), 0u);
    input += "$1\r\nz\r\n";
    const ParseResult result = parser.parse(input, argv);
    ASSERT_EQ(result.status, ParseStatus::complete);
    ASSERT_EQ(argv.size(), 100000u);
    EXPECT_EQ(argv.back(), "z");
    EXPECT_EQ(result.consumed, input.size());
    // One view per argument, reserved once: no doubling past what is needed.
    EXPECT_EQ(argv.capacity(), 100000u);
    EXPECT_EQ(parser.memory_bytes(), 0u);
}

TEST(RespParser, InlineStorageOfALargeCommandIsGivenBackByShrink) {
    Parser parser;
    std::vector<std::string_view> argv;
    std::string line = "ECHO";
    for (int i = 0; i < 6000; ++i) line += " \"w\\x41\"";
    line += "\r\n";
    ASSERT_EQ(parser.parse(line, argv).status, ParseStatus::complete);
    ASSERT_EQ(argv.size(), 6001u);
    EXPECT_EQ(argv[6000], "wA");
    const std::size_t held = parser.memory_bytes();
    EXPECT_GE(held, 6000u * 2);
    EXPECT_LE(held, line.size() + 64);
    parser.shrink();
    EXPECT_LE(parser.memory_bytes(), 1024u);
    // Small commands keep their storage across shrink(): steady state does
    // not allocate.
    ASSERT_EQ(parser.parse("SET \"a b\" c\r\n", argv).status, ParseStatus::complete);
    EXPECT_EQ(Words(argv.begin(), argv.end()), (Words{"SET", "a b", "c"}));
    const std::size_t small = parser.memory_bytes();
    parser.shrink();
    EXPECT_EQ(parser.memory_bytes(), small);
    EXPECT_EQ(Words(argv.begin(), argv.end()), (Words{"SET", "a b", "c"}));
}

}  // namespace
}  // namespace bloomery::resp
