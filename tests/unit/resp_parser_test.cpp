#include "bloomery/resp/parser.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace bloomery::resp {
namespace {

using namespace std::string_literals;
using Words = std::vector<std::string>;

}  // namespace

// Readable names in assertion failures instead of raw bytes.
void PrintTo(ParseStatus status, std::ostream* os) {
    switch (status) {
        case ParseStatus::complete:
            *os << "complete";
            break;
        case ParseStatus::incomplete:
            *os << "incomplete";
            break;
        case ParseStatus::error:
            *os << "error";
            break;
    }
}

namespace {

// Everything a caller observes while feeding bytes to a parser: the commands
// in order, the bytes each consumed, the error (if any) and the bytes left over.
struct Transcript {
    std::vector<Words> commands;
    std::vector<std::size_t> consumed;
    std::string error;
    std::size_t leftover = 0;
    bool operator==(const Transcript&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Transcript& transcript) {
    os << "{commands:";
    for (const auto& words : transcript.commands) {
        os << " [";
        for (const auto& word : words) os << '<' << ::testing::PrintToString(word) << '>';
        os << ']';
    }
    os << " error:'" << transcript.error << "' leftover:" << transcript.leftover << '}';
    return os;
}

// Feeds `input` to a fresh parser in chunks of the given sizes (the rest in a
// last chunk), the way a connection would: append what arrived, parse until
// incomplete, drop consumed bytes. Before every parse() call the buffer is
// copied to a new allocation, so a parser that kept pointers instead of
// offsets would read freed memory (and ASan would say so).
Transcript feed(std::string_view input, const std::vector<std::size_t>& chunk_sizes,
                ParserLimits limits = {}) {
    Parser parser(limits);
    Transcript transcript;
    std::string buffer;
    std::vector<std::string_view> argv;
    std::size_t offset = 0;
    auto next_chunk = chunk_sizes.begin();
    while (offset < input.size()) {
        std::size_t size = input.size() - offset;
        if (next_chunk != chunk_sizes.end()) size = std::min(size, *next_chunk++);
        buffer.append(input.substr(offset, size));
        offset += size;
        while (true) {
            std::string moved(buffer);
            buffer.swap(moved);
            const auto [status, consumed] = parser.parse(buffer, argv);
            if (status == ParseStatus::incomplete) {
                EXPECT_EQ(consumed, 0u);
                EXPECT_TRUE(argv.empty());
                break;
            }
            if (status == ParseStatus::error) {
                transcript.error = parser.error_message();
                EXPECT_EQ(transcript.error.find_first_of("\r\n"), std::string::npos);
                return transcript;
            }
            EXPECT_GT(consumed, 0u);
            EXPECT_LE(consumed, buffer.size());
            transcript.commands.emplace_back(argv.begin(), argv.end());
            transcript.consumed.push_back(consumed);
            buffer.erase(0, consumed);
        }
    }
    transcript.leftover = buffer.size();
    return transcript;
}

Transcript feed_whole(std::string_view input, ParserLimits limits = {}) {
    return feed(input, {input.size()}, limits);
}

// One parse() call on the whole input.
struct SingleParse {
    ParseStatus status;
    Words argv;
    std::size_t consumed;
    std::string error;
};

SingleParse parse_once(std::string_view input, ParserLimits limits = {}) {
    Parser parser(limits);
    std::vector<std::string_view> argv;
    const ParseResult result = parser.parse(input, argv);
    return {result.status, Words(argv.begin(), argv.end()), result.consumed,
            parser.error_message()};
}

std::string error_of(std::string_view input, ParserLimits limits = {}) {
    const SingleParse result = parse_once(input, limits);
    EXPECT_EQ(result.status, ParseStatus::error) << ::testing::PrintToString(std::string(input));
    return result.error;
}

std::string multibulk(const Words& words) {
    std::string out = "*" + std::to_string(words.size()) + "\r\n";
    for (const auto& word : words)
        out += "$" + std::to_string(word.size()) + "\r\n" + word + "\r\n";
    return out;
}

// Every split point of the input into two chunks, and one byte at a time, must
// give the same transcript as the whole input at once.
void expect_same_at_every_split(std::string_view input, ParserLimits limits = {}) {
    const Transcript whole = feed_whole(input, limits);
    for (std::size_t split = 0; split <= input.size(); ++split) {
        ASSERT_EQ(feed(input, {split}, limits), whole) << "split at byte " << split;
    }
    ASSERT_EQ(feed(input, std::vector<std::size_t>(input.size(), 1), limits), whole)
        << "one byte at a time";
    std::mt19937 random(42);
    for (int round = 0; round < 50; ++round) {
        std::vector<std::size_t> chunks;
        for (std::size_t total = 0; total < input.size();) {
            chunks.push_back(1 + random() % 7);
            total += chunks.back();
        }
        ASSERT_EQ(feed(input, chunks, limits), whole) << "random chunks, round " << round;
    }
}

const std::string kMixedPipeline =
    multibulk({"SET", "key", "va\r\nl"}) + "PING\r\n" +
    "bf.add 'my key' \"a\\x41\\n\\\"q\\\"\" plain\r\n" + "*0\r\n" + "\r\n" + "*-1\r\n" +
    multibulk({"", "\0\r\n\x01"s, "BF.EXISTS"}) + "ECHO  back\\slash\tfoo\"bar baz\"\n" +
    "   \t  \n" + multibulk({"PING"});

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
