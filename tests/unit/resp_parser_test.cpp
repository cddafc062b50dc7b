// The RESP request parser: multibulk and inline requests, and the same
// answers however the bytes are split. Its limits are in
// resp_parser_limits_test.cpp.

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

// ---------------------------------------------------------------- multibulk

TEST(RespParser, ParsesMultibulkCommand) {
    const SingleParse result = parse_once("*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\nextra");
    ASSERT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.argv, (Words{"ECHO", "hello"}));
    EXPECT_EQ(result.consumed, 25u);
}

TEST(RespParser, ArgvViewsPointIntoTheInputBuffer) {
    const std::string input = multibulk({"GET", "key"});
    Parser parser;
    std::vector<std::string_view> argv;
    ASSERT_EQ(parser.parse(input, argv).status, ParseStatus::complete);
    ASSERT_EQ(argv.size(), 2u);
    for (auto word : argv) {
        EXPECT_GE(word.data(), input.data());
        EXPECT_LE(word.data() + word.size(), input.data() + input.size());
    }
}

TEST(RespParser, BulkPayloadsAreBinarySafe) {
    const std::string payload = "a\r\nb\0c\r\n\r\n\n\r\xff"s;
    const SingleParse result = parse_once(multibulk({"SET", payload, "\0"s}));
    ASSERT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.argv, (Words{"SET", payload, "\0"s}));
}

TEST(RespParser, EmptyBulkIsAnEmptyArgument) {
    const SingleParse result = parse_once("*2\r\n$0\r\n\r\n$0\r\n\r\n");
    ASSERT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.argv, (Words{"", ""}));
    EXPECT_EQ(result.consumed, 16u);
}

TEST(RespParser, ZeroOrNegativeMultibulkCountIsConsumedWithEmptyArgv) {
    for (std::string input : {"*0\r\n", "*-1\r\n", "*-100\r\n"}) {
        const SingleParse result = parse_once(input + "PING\r\n");
        ASSERT_EQ(result.status, ParseStatus::complete) << input;
        EXPECT_TRUE(result.argv.empty());
        EXPECT_EQ(result.consumed, input.size());
    }
}

TEST(RespParser, IncompleteMultibulkAsksForMoreBytes) {
    for (std::string input : {"*", "*2", "*2\r", "*2\r\n", "*2\r\n$", "*2\r\n$3\r",
                              "*2\r\n$3\r\nGET", "*2\r\n$3\r\nGET\r", "*2\r\n$3\r\nGET\r\n"}) {
        const SingleParse result = parse_once(input);
        EXPECT_EQ(result.status, ParseStatus::incomplete) << input;
        EXPECT_EQ(result.consumed, 0u);
        EXPECT_TRUE(result.argv.empty());
    }
}

TEST(RespParser, InvalidMultibulkCountIsRejected) {
    for (std::string input :
         {"*abc\r\n", "*\r\n", "*01\r\n", "*+1\r\n", "* 1\r\n", "*1 \r\n", "*-0\r\n", "*-\r\n",
          "*1a\r\n", "*99999999999999999999\r\n", "*9223372036854775808\r\n", "*1\rX"}) {
        EXPECT_EQ(error_of(input), "invalid multibulk length") << input;
    }
}

TEST(RespParser, BulkHeaderMustStartWithDollar) {
    EXPECT_EQ(error_of("*1\r\n:5\r\n"), "expected '$', got ':'");
    EXPECT_EQ(error_of("*2\r\n$1\r\na\r\nxyz\r\n"), "expected '$', got 'x'");
    EXPECT_EQ(error_of("*1\r\n'\r\n"), "expected '$', got '''");
}

TEST(RespParser, UnprintableByteInDollarErrorIsEscaped) {
    EXPECT_EQ(error_of("*1\r\n\r\n"), "expected '$', got '\\x0d'");
    EXPECT_EQ(error_of("*1\r\n\n\r\n"), "expected '$', got '\\x0a'");
    EXPECT_EQ(error_of("*1\r\n\0\r\n"s), "expected '$', got '\\x00'");
    EXPECT_EQ(error_of("*1\r\n\xff\r\n"), "expected '$', got '\\xff'");
    EXPECT_EQ(error_of("*1\r\n\x7f\r\n"), "expected '$', got '\\x7f'");
}

TEST(RespParser, InvalidBulkLengthIsRejected) {
    for (std::string header : {"$-1", "$abc", "$", "$01", "$+1", "$1 ", "$ 1", "$-0",
                               "$99999999999999999999", "$1\rX"}) {
        EXPECT_EQ(error_of("*1\r\n" + header + "\r\nx\r\n"), "invalid bulk length") << header;
    }
}

TEST(RespParser, MissingCrlfAfterBulkDataIsRejected) {
    EXPECT_EQ(error_of("*1\r\n$3\r\nabcX\r\n"), "missing CRLF after bulk data");
    EXPECT_EQ(error_of("*1\r\n$3\r\nabc\rX"), "missing CRLF after bulk data");
    EXPECT_EQ(error_of("*1\r\n$3\r\nabc\n\r"), "missing CRLF after bulk data");
    EXPECT_EQ(parse_once("*1\r\n$3\r\nabc\r").status, ParseStatus::incomplete);
}

TEST(RespParser, BytesExpectedCoversThePendingBulk) {
    Parser parser;
    std::vector<std::string_view> argv;
    EXPECT_EQ(parser.parse("*2\r\n$1\r\n", argv).status, ParseStatus::incomplete);
    EXPECT_EQ(parser.bytes_expected(), 11u);
    std::string input = "*2\r\n$1\r\na\r\n$100\r\nabc";
    EXPECT_EQ(parser.parse(input, argv).status, ParseStatus::incomplete);
    EXPECT_EQ(parser.bytes_expected(), 11u + 6u + 100u + 2u);
    input.resize(input.size() - 3);
    input += std::string(100, 'z') + "\r\n";
    const ParseResult result = parser.parse(input, argv);
    EXPECT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.consumed, 11u + 6u + 100u + 2u);
    EXPECT_EQ(parser.bytes_expected(), 0u);
}

// ------------------------------------------------------------------- inline

TEST(RespParser, ParsesInlineCommandEndedByCrlfOrLf) {
    SingleParse result = parse_once("PING\r\nPING\r\n");
    ASSERT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.argv, Words{"PING"});
    EXPECT_EQ(result.consumed, 6u);
    result = parse_once("PING\n");
    ASSERT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.argv, Words{"PING"});
    EXPECT_EQ(result.consumed, 5u);
}

TEST(RespParser, InlineWordsSplitOnSpacesAndTabs) {
    const SingleParse result = parse_once("  set \t key\t\tvalue  \r\n");
    ASSERT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.argv, (Words{"set", "key", "value"}));
}

TEST(RespParser, InlineWhitespaceFollowsRedisSplitRules) {
    // A stray CR ends a word like a space; \v and \f separate words only
    // between them, inside a word they are kept (as sdssplitargs does).
    EXPECT_EQ(parse_once("a\rb\r\n").argv, (Words{"a", "b"}));
    EXPECT_EQ(parse_once("\va\fb \f c\n").argv, (Words{"a\fb", "c"}));
}

TEST(RespParser, InlineNulIsAnOrdinaryByte) {
    EXPECT_EQ(parse_once("a\0b c\r\n"s).argv, (Words{"a\0b"s, "c"}));
}

TEST(RespParser, EmptyInlineLineIsConsumedWithEmptyArgv) {
    for (std::string input : {"\r\n", "\n", "   \t \r\n", " \n"}) {
        const SingleParse result = parse_once(input + "PING\r\n");
        ASSERT_EQ(result.status, ParseStatus::complete) << input;
        EXPECT_TRUE(result.argv.empty());
        EXPECT_EQ(result.consumed, input.size());
    }
}

TEST(RespParser, InlineDoubleQuotesUnescape) {
    const SingleParse result =
        parse_once(R"(SET "a b" "\n\r\t\b\a\\\"" "\x41\x4a\x7e\xff" "\xZZ\q\x4")"
                   "\r\n");
    ASSERT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.argv, (Words{"SET", "a b", "\n\r\t\b\a\\\"", "AJ~\xff", "xZZqx4"}));
}

TEST(RespParser, InlineSingleQuotesOnlyUnescapeQuote) {
    const SingleParse result = parse_once(R"('it\'s' 'a\nb' 'x"y' 'a\\b')"
                                          "\n");
    ASSERT_EQ(result.status, ParseStatus::complete);
    EXPECT_EQ(result.argv, (Words{"it's", "a\\nb", "x\"y", "a\\\\b"}));
}

TEST(RespParser, InlineEmptyQuotesAreEmptyArguments) {
    EXPECT_EQ(parse_once("SET \"\" ''\r\n").argv, (Words{"SET", "", ""}));
}

TEST(RespParser, InlineQuoteInsideWordJoinsPrefixAndQuotedPart) {
    EXPECT_EQ(parse_once("foo\"bar baz\" a'b c'\td\r\n").argv, (Words{"foobar baz", "ab c", "d"}));
}

TEST(RespParser, InlineUnbalancedQuotesAreRejected) {
    for (std::string input :
         {"SET \"abc\r\n", "SET 'abc\r\n", "SET \"abc\"def\r\n", "SET 'a'b\r\n", "SET \"abc\\\r\n",
          "SET \"a\\\"\r\n", "SET 'a\\'\r\n", "\"\"\"\r\n", "\"\n"}) {
        EXPECT_EQ(error_of(input), "unbalanced quotes in request") << input;
    }
}

TEST(RespParser, InlineStoredWordsStayValidWhenStorageGrows) {
    // Many quoted words, long enough to live on the heap and short enough for
    // the small-string buffer, make the storage vector grow mid-command.
    std::string line;
    Words expected;
    for (int i = 0; i < 100; ++i) {
        const std::string word = "w" + std::to_string(i) + std::string(i % 3 == 0 ? 40 : 2, 'x');
        line += "\"" + word + "\" " + word + " ";
        expected.push_back(word);
        expected.push_back(word);
    }
    Parser parser;
    std::vector<std::string_view> argv;
    const std::string input = line + "\r\n";
    ASSERT_EQ(parser.parse(input, argv).status, ParseStatus::complete);
    EXPECT_EQ(Words(argv.begin(), argv.end()), expected);
    // A second command reuses the storage and again yields correct views.
    ASSERT_EQ(parser.parse("'one' \"two\"\n", argv).status, ParseStatus::complete);
    EXPECT_EQ(Words(argv.begin(), argv.end()), (Words{"one", "two"}));
}

// ------------------------------------------------------------- incremental

TEST(RespParser, CommandSplitAtEveryByteParsesTheSame) {
    const Transcript whole = feed_whole(kMixedPipeline);
    ASSERT_EQ(whole.commands, (std::vector<Words>{{"SET", "key", "va\r\nl"},
                                                  {"PING"},
                                                  {"bf.add", "my key", "aA\n\"q\"", "plain"},
                                                  {},
                                                  {},
                                                  {},
                                                  {"", "\0\r\n\x01"s, "BF.EXISTS"},
                                                  {"ECHO", "back\\slash", "foobar baz"},
                                                  {},
                                                  {"PING"}}));
    EXPECT_TRUE(whole.error.empty());
    EXPECT_EQ(whole.leftover, 0u);
    expect_same_at_every_split(kMixedPipeline);
}

TEST(RespParser, ErrorsAreTheSameAtEverySplit) {
    const ParserLimits limits{
        .max_bulk_length = 8, .max_inline_length = 12, .max_multibulk_length = 3};
    const std::string good = multibulk({"PING"}) + "PING\r\n";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"*x\r\n", "invalid multibulk length"},
        {"*4\r\n", "invalid multibulk length"},
        {"*1\r\n%3\r\nabc\r\n", "expected '$', got '%'"},
        {"*1\r\n$9\r\n", "invalid bulk length"},
        {"*1\r\n$3\r\nabcd\r\n", "missing CRLF after bulk data"},
        {"SET 'a\r\n", "unbalanced quotes in request"},
        {"SET a b c d e f g h\r\n", "too big inline request"},
        {"*1234567890123\r\n", "too big mbulk count string"},
        {"*1\r\n$1234567890123\r\n", "too big bulk count string"},
    };
    for (const auto& [bad, message] : cases) {
        const std::string input = good + bad + good;
        const Transcript whole = feed_whole(input, limits);
        EXPECT_EQ(whole.commands.size(), 2u) << bad;
        EXPECT_EQ(whole.error, message) << bad;
        expect_same_at_every_split(input, limits);
    }
}

TEST(RespParser, LimitsAreTheSameAtEverySplit) {
    const ParserLimits limits{
        .max_bulk_length = 4, .max_inline_length = 6, .max_multibulk_length = 2};
    expect_same_at_every_split("*2\r\n$4\r\nabcd\r\n$0\r\n\r\nab cd\r\n'ab'\n*-1\r\n", limits);
}

TEST(RespParser, ResumesAfterBufferMovesBetweenCalls) {
    Parser parser;
    std::vector<std::string_view> argv;
    auto buffer = std::make_unique<std::string>("*2\r\n$3\r\nGET\r\n$3\r\nk");
    ASSERT_EQ(parser.parse(*buffer, argv).status, ParseStatus::incomplete);
    auto moved = std::make_unique<std::string>(*buffer + "ey\r\n");
    buffer.reset();
    ASSERT_EQ(parser.parse(*moved, argv).status, ParseStatus::complete);
    EXPECT_EQ(Words(argv.begin(), argv.end()), (Words{"GET", "key"}));
}

TEST(RespParser, LargeBulkAndLongInlineFedByteByByteParse) {
    const std::string big(1 << 20, 'b');
    const std::string input = multibulk({"SET", big}) + "ECHO " + std::string(60000, 'i') + "\n";
    Parser parser;
    std::vector<std::string_view> argv;
    std::string buffer;
    std::vector<Words> commands;
    for (char byte : input) {
        buffer.push_back(byte);
        if (const ParseResult result = parser.parse(buffer, argv);
            result.status == ParseStatus::complete) {
            commands.emplace_back(argv.begin(), argv.end());
            buffer.erase(0, result.consumed);
        }
    }
    ASSERT_EQ(commands.size(), 2u);
    EXPECT_EQ(commands[0], (Words{"SET", big}));
    EXPECT_EQ(commands[1], (Words{"ECHO", std::string(60000, 'i')}));
    EXPECT_TRUE(buffer.empty());
}

TEST(RespParser, LargePipelineOfTenThousandCommandsIsConsumedInOrder) {
    std::string pipeline;
    for (int i = 0; i < 10000; ++i) {
        const std::string item = "item" + std::to_string(i);
        if (i % 3 == 0) {
            pipeline += "BF.EXISTS filter " + item + "\r\n";
        } else {
            pipeline += multibulk({"BF.ADD", "filter", item});
        }
    }
    Parser parser;
    std::vector<std::string_view> argv;
    std::string_view rest = pipeline;
    for (int i = 0; i < 10000; ++i) {
        const ParseResult result = parser.parse(rest, argv);
        ASSERT_EQ(result.status, ParseStatus::complete) << i;
        ASSERT_EQ(argv.size(), 3u);
        EXPECT_EQ(argv[0], i % 3 == 0 ? "BF.EXISTS" : "BF.ADD");
        EXPECT_EQ(argv[2], "item" + std::to_string(i));
        rest.remove_prefix(result.consumed);
    }
    EXPECT_TRUE(rest.empty());
    EXPECT_EQ(parser.parse(rest, argv).status, ParseStatus::incomplete);
}

TEST(RespParser, ArgvCapacityIsReusedAcrossCommands) {
    Parser parser;
    std::vector<std::string_view> argv;
    const std::string first = multibulk({"a", "b", "c", "d"});
    ASSERT_EQ(parser.parse(first, argv).status, ParseStatus::complete);
    const auto* storage = argv.data();
    const std::string second = multibulk({"e", "f"});
    ASSERT_EQ(parser.parse(second, argv).status, ParseStatus::complete);
    ASSERT_EQ(parser.parse("g h i\r\n", argv).status, ParseStatus::complete);
    EXPECT_EQ(argv.data(), storage);
}

TEST(RespParser, ParserIsReadyForTheNextCommandAfterAnError) {
    Parser parser;
    std::vector<std::string_view> argv;
    ASSERT_EQ(parser.parse("*1\r\n$3\r\nabcX\r\n", argv).status, ParseStatus::error);
    EXPECT_EQ(parser.error_message(), "missing CRLF after bulk data");
    EXPECT_TRUE(argv.empty());
    ASSERT_EQ(parser.parse("PING\r\n", argv).status, ParseStatus::complete);
    EXPECT_EQ(Words(argv.begin(), argv.end()), Words{"PING"});
}

TEST(RespParser, ResetForgetsAPartialCommandAndTheError) {
    Parser parser;
    std::vector<std::string_view> argv;
    ASSERT_EQ(parser.parse("*x\r\n", argv).status, ParseStatus::error);
    ASSERT_EQ(parser.parse("*2\r\n$3\r\nfoo\r\n", argv).status, ParseStatus::incomplete);
    parser.reset();
    EXPECT_TRUE(parser.error_message().empty());
    ASSERT_EQ(parser.parse("*1\r\n$4\r\nPING\r\n", argv).status, ParseStatus::complete);
    EXPECT_EQ(Words(argv.begin(), argv.end()), Words{"PING"});
}

TEST(RespParser, EmptyInputIsIncomplete) {
    EXPECT_EQ(parse_once("").status, ParseStatus::incomplete);
}

}  // namespace
}  // namespace bloomery::resp
