#pragma once
// What the parser tests share (resp_parser_test.cpp, resp_parser_limits_test.cpp):
// feeding bytes to a parser the way a connection does and recording what it
// answers, and building requests.

#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/resp/parser.hpp"

namespace bloomery::resp {

// Readable names in assertion failures instead of raw bytes.
inline void PrintTo(ParseStatus status, std::ostream* os) {
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

namespace testing {

using namespace std::string_literals;
using Words = std::vector<std::string>;

// Everything a caller observes while feeding bytes to a parser: the commands
// in order, the bytes each consumed, the error (if any) and the bytes left over.
struct Transcript {
    std::vector<Words> commands;
    std::vector<std::size_t> consumed;
    std::string error;
    std::size_t leftover = 0;
    bool operator==(const Transcript&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const Transcript& transcript) {
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
inline Transcript feed(std::string_view input, const std::vector<std::size_t>& chunk_sizes,
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

inline Transcript feed_whole(std::string_view input, ParserLimits limits = {}) {
    return feed(input, {input.size()}, limits);
}

// One parse() call on the whole input.
struct SingleParse {
    ParseStatus status;
    Words argv;
    std::size_t consumed;
    std::string error;
};

inline SingleParse parse_once(std::string_view input, ParserLimits limits = {}) {
    Parser parser(limits);
    std::vector<std::string_view> argv;
    const ParseResult result = parser.parse(input, argv);
    return {result.status, Words(argv.begin(), argv.end()), result.consumed,
            parser.error_message()};
}

inline std::string error_of(std::string_view input, ParserLimits limits = {}) {
    const SingleParse result = parse_once(input, limits);
    EXPECT_EQ(result.status, ParseStatus::error) << ::testing::PrintToString(std::string(input));
    return result.error;
}

inline std::string multibulk(const Words& words) {
    std::string out = "*" + std::to_string(words.size()) + "\r\n";
    for (const auto& word : words)
        out += "$" + std::to_string(word.size()) + "\r\n" + word + "\r\n";
    return out;
}

// Every split point of the input into two chunks, and one byte at a time, must
// give the same transcript as the whole input at once.
inline void expect_same_at_every_split(std::string_view input, ParserLimits limits = {}) {
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

inline const std::string kMixedPipeline =
    multibulk({"SET", "key", "va\r\nl"}) + "PING\r\n" +
    "bf.add 'my key' \"a\\x41\\n\\\"q\\\"\" plain\r\n" + "*0\r\n" + "\r\n" + "*-1\r\n" +
    multibulk({"", "\0\r\n\x01"s, "BF.EXISTS"}) + "ECHO  back\\slash\tfoo\"bar baz\"\n" +
    "   \t  \n" + multibulk({"PING"});

}  // namespace testing
}  // namespace bloomery::resp
