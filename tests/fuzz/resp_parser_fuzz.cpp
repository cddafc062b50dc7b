// libFuzzer target for resp::Parser.
//
// The first bytes of each input choose the parser limits and a seed for how the
// rest is split into chunks; the rest is the byte stream a client sends. The
// stream is parsed twice: whole, and chunk by chunk the way a connection
// receives it (the buffer moved to a fresh allocation before every call). Both
// runs must yield the same commands, consumed counts and error, and every
// result must respect the parser's contract. Any difference aborts.
//
// Build: clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined \
//            -Iinclude src/resp/parser.cpp tests/fuzz/resp_parser_fuzz.cpp

#include "bloomery/resp/parser.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

using bloomery::resp::Parser;
using bloomery::resp::ParserLimits;
using bloomery::resp::ParseStatus;

struct Transcript {
    std::vector<std::vector<std::string>> commands;
    std::vector<std::size_t> consumed;
    std::string error;
    bool operator==(const Transcript&) const = default;
};

void require(bool condition) {
    if (!condition) std::abort();
}

// Parses as much of `buffer` as possible, appending to the transcript; returns
// false once the parser reported an error.
bool drain(Parser& parser, std::string& buffer, const ParserLimits& limits,
           Transcript& transcript) {
    std::vector<std::string_view> argv;
    while (true) {
        std::string moved(buffer);  // a parser holding pointers would now read freed memory
        buffer.swap(moved);
        const auto [status, consumed] = parser.parse(buffer, argv);
        if (status == ParseStatus::incomplete) {
            require(consumed == 0 && argv.empty());
            return true;
        }
        if (status == ParseStatus::error) {
            const std::string& message = parser.error_message();
            require(!message.empty());
            require(message.find_first_of("\r\n") == std::string::npos);
            require(argv.empty());
            transcript.error = message;
            return false;
        }
        require(consumed > 0 && consumed <= buffer.size());
        require(argv.size() <= limits.max_multibulk_length || buffer[0] != '*');
        for (std::string_view word : argv) {
            require(buffer[0] != '*' || word.size() <= limits.max_bulk_length);
        }
        transcript.commands.emplace_back(argv.begin(), argv.end());
        transcript.consumed.push_back(consumed);
        buffer.erase(0, consumed);
    }
}

Transcript parse_in_chunks(std::string_view stream, const ParserLimits& limits,
                           std::uint32_t split_seed, std::size_t max_chunk) {
    Parser parser(limits);
    Transcript transcript;
    std::string buffer;
    std::minstd_rand random(split_seed);
    for (std::size_t offset = 0; offset < stream.size();) {
        const std::size_t chunk =
            max_chunk == 0 ? stream.size() : 1 + static_cast<std::size_t>(random() % max_chunk);
        const std::size_t size = std::min(chunk, stream.size() - offset);
        buffer.append(stream.substr(offset, size));
        offset += size;
        if (!drain(parser, buffer, limits, transcript)) break;
    }
    return transcript;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 5) return 0;
    ParserLimits limits;
    if (data[0] & 1) {
        // Small limits, so the at-limit and past-limit paths are reachable.
        limits.max_bulk_length = 1 + data[0] % 16;
        limits.max_inline_length = 1 + (data[0] >> 1) % 32;
        limits.max_multibulk_length = 1 + (data[0] >> 4);
    }
    const std::uint32_t split_seed = static_cast<std::uint32_t>(data[1]) |
                                     static_cast<std::uint32_t>(data[2]) << 8 |
                                     static_cast<std::uint32_t>(data[3]) << 16;
    const std::size_t max_chunk = data[4] % 16;  // 0: one chunk
    const std::string_view stream(reinterpret_cast<const char*>(data) + 5, size - 5);

    const Transcript whole = parse_in_chunks(stream, limits, 0, 0);
    const Transcript split = parse_in_chunks(stream, limits, split_seed, max_chunk);
    require(whole == split);
    return 0;
}
