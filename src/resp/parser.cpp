#include "bloomery/resp/parser.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "bloomery/core/parse_int64.hpp"

namespace bloomery::resp {

namespace {

constexpr std::size_t kCrlfLength = 2;
// Inline word storage kept by shrink(): any usual quoted command fits, and
// 10,000 idle connections keep at most 10 MB of it.
constexpr std::size_t kKeptInlineStorage = 1024;

enum class LineSearch { found, incomplete, too_long };

// Looks for `terminator` in the line that starts at `line_start`, resuming at
// `scan_from` so bytes already searched on an earlier call are not searched
// again. A line may hold at most `max_length` bytes before its terminator; the
// search never looks further than that, which both bounds the work per line and
// makes the too-long verdict independent of how the bytes were split.
LineSearch find_line_end(std::string_view input, std::size_t line_start, std::size_t max_length,
                         char terminator, std::size_t& scan_from, std::size_t& terminator_index) {
    const std::size_t available = input.size() - line_start;
    const std::size_t search_end =
        available > max_length ? line_start + max_length + 1 : input.size();
    if (scan_from < search_end) {
        const void* hit = std::memchr(input.data() + scan_from, terminator, search_end - scan_from);
        if (hit != nullptr) {
            terminator_index =
                static_cast<std::size_t>(static_cast<const char*>(hit) - input.data());
            // Stay on the terminator: if the '\n' after a '\r' is still missing,
            // the next call finds the '\r' again at once.
            scan_from = terminator_index;
            return LineSearch::found;
        }
        scan_from = search_end;
    }
    return available > max_length ? LineSearch::too_long : LineSearch::incomplete;
}

// A header line in its usual form, received whole: `type`, 1 to 9 digits
// without a leading zero, CRLF. A request's `*<count>` and `$<length>` lines
// are such, and reading one in a single pass costs less than a memchr call
// and a parse; any other line (empty, longer, incomplete, invalid) is left
// to the general path, which judges it. `max_length` bounds the line as
// find_line_end() does.
struct ShortLine {
    std::size_t value;
    std::size_t next;  // the offset after its CRLF
};
[[gnu::always_inline]] inline std::optional<ShortLine> short_line(std::string_view input,
                                                                  std::size_t start, char type,
                                                                  std::size_t max_length) {
    const char* at = input.data() + start;
    const std::size_t available = input.size() - start;
    if (available < 4 || at[0] != type || at[1] < '1' || at[1] > '9') return std::nullopt;
    auto value = static_cast<std::size_t>(at[1] - '0');
    std::size_t end = 2;
    for (; end < available && end < 10 && at[end] >= '0' && at[end] <= '9'; ++end) {
        value = value * 10 + static_cast<std::size_t>(at[end] - '0');
    }
    if (end + 1 >= available || at[end] != '\r' || at[end + 1] != '\n' || end > max_length) {
        return std::nullopt;
    }
    return ShortLine{value, start + end + kCrlfLength};
}

// Error text for a bulk header that does not start with '$'. The byte is echoed
// to the client, so anything that is not printable ASCII (CR, LF, NUL, high
// bytes) is spelled as \xHH instead of being sent raw.
std::string expected_dollar_message(char got) {
    std::string message = "expected '$', got '";
    const auto byte = static_cast<unsigned char>(got);
    if (byte >= 0x20 && byte < 0x7f) {
        message.push_back(got);
    } else {
        constexpr char kHexDigits[] = "0123456789abcdef";
        message += "\\x";
        message.push_back(kHexDigits[byte >> 4]);
        message.push_back(kHexDigits[byte & 0x0f]);
    }
    message.push_back('\'');
    return message;
}

// Whitespace as C's isspace() sees it in the "C" locale: what Redis's
// sdssplitargs skips between words and accepts after a closing quote.
bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// What ends an unquoted word in sdssplitargs (narrower than is_blank: a \v or
// \f inside a word is kept, as Redis does).
bool ends_unquoted_word(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool is_hex_digit(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

unsigned hex_value(char c) {
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    return static_cast<unsigned>(c - 'A' + 10);
}

// Appends the body of a "double quoted" section starting just after the opening
// quote; returns the index just past the closing quote, or npos if the quote is
// never closed.
std::size_t unescape_double_quoted(std::string_view line, std::size_t index, std::string& word) {
    while (index < line.size()) {
        const char c = line[index];
        if (c == '\\' && index + 3 < line.size() && line[index + 1] == 'x' &&
            is_hex_digit(line[index + 2]) && is_hex_digit(line[index + 3])) {
            word.push_back(
                static_cast<char>(hex_value(line[index + 2]) * 16 + hex_value(line[index + 3])));
            index += 4;
        } else if (c == '\\' && index + 1 < line.size()) {
            char escaped = line[index + 1];
            switch (escaped) {
                case 'n':
                    escaped = '\n';
                    break;
                case 'r':
                    escaped = '\r';
                    break;
                case 't':
                    escaped = '\t';
                    break;
                case 'b':
                    escaped = '\b';
                    break;
                case 'a':
                    escaped = '\a';
                    break;
                default:
                    break;  // \\, \" and any other \c stand for c itself
            }
            word.push_back(escaped);
            index += 2;
        } else if (c == '"') {
            return index + 1;
        } else {
            word.push_back(c);
            ++index;
        }
    }
    return std::string_view::npos;
}

// Same for a 'single quoted' section, where only \' is an escape.
std::size_t unescape_single_quoted(std::string_view line, std::size_t index, std::string& word) {
    while (index < line.size()) {
        const char c = line[index];
        if (c == '\\' && index + 1 < line.size() && line[index + 1] == '\'') {
            word.push_back('\'');
            index += 2;
        } else if (c == '\'') {
            return index + 1;
        } else {
            word.push_back(c);
            ++index;
        }
    }
    return std::string_view::npos;
}

}  // namespace

Parser::Parser(ParserLimits limits) : limits_(limits) {}

void Parser::reset() {
    reset_command_state();
    error_.clear();
}

std::size_t Parser::memory_bytes() const {
    // An empty std::string holds its small-string buffer inside the object.
    static const std::size_t inline_capacity = std::string().capacity();
    return inline_words_.capacity() > inline_capacity ? inline_words_.capacity() + 1 : 0;
}

void Parser::shrink() {
    if (inline_words_.capacity() > kKeptInlineStorage) std::string().swap(inline_words_);
}

void Parser::reset_command_state() {
    args_expected_ = -1;
    bulk_length_ = -1;
    args_received_ = 0;
    first_arg_ = 0;
    pos_ = 0;
    scan_pos_ = 0;
    bytes_expected_ = 0;
}

ParseStatus Parser::fail(std::string message) {
    error_ = std::move(message);
    reset_command_state();
    return ParseStatus::error;
}

// The general bound first, then the one before authentication, as Redis checks
// them; the same for a `*` count and for inline words.
const char* Parser::count_error(std::size_t arguments) const {
    if (arguments > limits_.max_multibulk_length) return "invalid multibulk length";
    if (limits_.unauthenticated && arguments > limits_.unauthenticated_max_multibulk_length) {
        return "unauthenticated multibulk length";
    }
    return nullptr;
}

const char* Parser::length_error(std::size_t length) const {
    if (length > limits_.max_bulk_length) return "invalid bulk length";
    if (limits_.unauthenticated && length > limits_.unauthenticated_max_bulk_length) {
        return "unauthenticated bulk length";
    }
    return nullptr;
}

ParseResult Parser::parse(std::string_view input, std::vector<std::string_view>& argv) {
    argv.clear();
    if (input.empty()) return {ParseStatus::incomplete};
    // The caller must pass at least the bytes it passed last time. If it did
    // not, start the command over rather than trust offsets past the end.
    if (scan_pos_ > input.size()) reset_command_state();
    return input[0] == '*' ? parse_multibulk(input, argv) : parse_inline(input, argv);
}

// The multibulk's steps below are always inlined into it: they run for every
// argument of every request, and as calls they would keep the parser's
// offsets in memory rather than in registers, a cost callgrind shows on every
// argument.
ParseResult Parser::parse_multibulk(std::string_view input, std::vector<std::string_view>& argv) {
    if (args_expected_ < 0) {
        if (const ParseStatus status = read_argument_count(input);
            status != ParseStatus::complete) {
            return {status};
        }
    }
    const auto args_expected = static_cast<std::size_t>(args_expected_);
    while (args_received_ < args_expected) {
        ParseStatus status = ParseStatus::complete;
        if (bulk_length_ < 0) status = read_bulk_length(input);
        if (status == ParseStatus::complete) status = read_bulk_data(input);
        if (status != ParseStatus::complete) return {status};
    }
    collect_arguments(input, argv);
    const std::size_t consumed = pos_;
    reset_command_state();
    return {ParseStatus::complete, consumed};
}

// The `*<count>` line. `*0` and `*-1` have nothing to run but their bytes are
// used up: they read as a command of no arguments, which completes at once
// with an empty argv.
[[gnu::always_inline]] inline ParseStatus Parser::read_argument_count(std::string_view input) {
    if (const std::optional<ShortLine> line = short_line(input, 0, '*', limits_.max_inline_length);
        line && count_error(line->value) == nullptr) {
        args_expected_ = static_cast<std::int64_t>(line->value);
        pos_ = scan_pos_ = first_arg_ = line->next;
        return ParseStatus::complete;
    }
    std::size_t line_end = 0;
    switch (find_line_end(input, 0, limits_.max_inline_length, '\r', scan_pos_, line_end)) {
        case LineSearch::incomplete:
            return ParseStatus::incomplete;
        case LineSearch::too_long:
            return fail("too big mbulk count string");
        case LineSearch::found:
            break;
    }
    if (line_end + 1 >= input.size()) return ParseStatus::incomplete;  // '\n' not here yet
    std::int64_t count = 0;
    if (input[line_end + 1] != '\n' || !core::parse_int64(input.substr(1, line_end - 1), count)) {
        return fail("invalid multibulk length");
    }
    if (count > 0) {
        if (const char* error = count_error(static_cast<std::uint64_t>(count))) return fail(error);
    }
    args_expected_ = std::max<std::int64_t>(count, 0);
    pos_ = line_end + kCrlfLength;
    scan_pos_ = pos_;
    first_arg_ = pos_;
    return ParseStatus::complete;
}

// The `$<length>` line of the next argument.
[[gnu::always_inline]] inline ParseStatus Parser::read_bulk_length(std::string_view input) {
    if (const std::optional<ShortLine> line =
            short_line(input, pos_, '$', limits_.max_inline_length);
        line && length_error(line->value) == nullptr) {
        bulk_length_ = static_cast<std::int64_t>(line->value);
        pos_ = scan_pos_ = line->next;
        bytes_expected_ = pos_ + line->value + kCrlfLength;
        return ParseStatus::complete;
    }
    std::size_t line_end = 0;
    switch (find_line_end(input, pos_, limits_.max_inline_length, '\r', scan_pos_, line_end)) {
        case LineSearch::incomplete:
            return ParseStatus::incomplete;
        case LineSearch::too_long:
            return fail("too big bulk count string");
        case LineSearch::found:
            break;
    }
    if (line_end + 1 >= input.size()) return ParseStatus::incomplete;
    if (input[pos_] != '$') return fail(expected_dollar_message(input[pos_]));
    std::int64_t length = 0;
    if (input[line_end + 1] != '\n' ||
        !core::parse_int64(input.substr(pos_ + 1, line_end - pos_ - 1), length) || length < 0) {
        return fail("invalid bulk length");
    }
    if (const char* error = length_error(static_cast<std::uint64_t>(length))) return fail(error);
    bulk_length_ = length;
    pos_ = line_end + kCrlfLength;
    scan_pos_ = pos_;
    bytes_expected_ = pos_ + static_cast<std::size_t>(length) + kCrlfLength;
    return ParseStatus::complete;
}

// The body is binary-safe and never scanned: only its size and the CRLF
// after it are checked, so resuming costs O(1) however large it is.
[[gnu::always_inline]] inline ParseStatus Parser::read_bulk_data(std::string_view input) {
    const auto length = static_cast<std::size_t>(bulk_length_);
    if (input.size() - pos_ < length + kCrlfLength) return ParseStatus::incomplete;
    if (input[pos_ + length] != '\r' || input[pos_ + length + 1] != '\n') {
        return fail("missing CRLF after bulk data");
    }
    ++args_received_;
    pos_ += length + kCrlfLength;
    scan_pos_ = pos_;
    bulk_length_ = -1;
    bytes_expected_ = 0;
    return ParseStatus::complete;
}

// Every header was checked as it arrived: `$`, the digits of a length within
// the limits, CRLF. Walking them again costs a few bytes per argument and
// lets a partly received command hold no per-argument state (a million empty
// arguments once held megabytes of offsets per connection while they
// arrived; tests/bench/README.md).
// The reservation is exact, and the bytes received (at least 6 per argument)
// already bound it.
[[gnu::always_inline]] inline void Parser::collect_arguments(
    std::string_view input, std::vector<std::string_view>& argv) const {
    const auto args_expected = static_cast<std::size_t>(args_expected_);
    argv.reserve(args_expected);
    std::size_t header = first_arg_;
    for (std::size_t i = 0; i < args_expected; ++i) {
        std::size_t length = 0;
        std::size_t digit = header + 1;
        for (; input[digit] != '\r'; ++digit) {
            length = length * 10 + static_cast<std::size_t>(input[digit] - '0');
        }
        const std::size_t data = digit + kCrlfLength;
        argv.emplace_back(input.data() + data, length);
        header = data + length + kCrlfLength;
    }
}

ParseResult Parser::parse_inline(std::string_view input, std::vector<std::string_view>& argv) {
    std::size_t newline = 0;
    switch (find_line_end(input, 0, limits_.max_inline_length, '\n', scan_pos_, newline)) {
        case LineSearch::incomplete:
            return {ParseStatus::incomplete};
        case LineSearch::too_long:
            return {fail("too big inline request")};
        case LineSearch::found:
            break;
    }
    std::size_t line_length = newline;
    if (line_length > 0 && input[line_length - 1] == '\r') --line_length;
    if (const char* error = split_inline_words(input.substr(0, line_length), argv)) {
        argv.clear();
        return {fail(error)};
    }
    reset_command_state();
    return {ParseStatus::complete, newline + 1};
}

// Splits an inline line into words with the rules of Redis's sdssplitargs. A
// word without quotes is a view into the line; a word with a quoted section is
// unescaped into inline_words_. Each word is checked against the argument
// limits as it is found, so a line is refused at its first word too many and
// never makes the parser hold more than the limits allow.
const char* Parser::split_inline_words(std::string_view line, std::vector<std::string_view>& argv) {
    inline_words_.clear();
    bool storage_reserved = false;
    std::size_t index = 0;
    while (true) {
        while (index < line.size() && is_blank(line[index])) ++index;
        if (index == line.size()) break;
        if (const char* error = count_error(argv.size() + 1)) return error;

        const std::size_t word_start = index;
        while (index < line.size() && !ends_unquoted_word(line[index]) && line[index] != '"' &&
               line[index] != '\'') {
            ++index;
        }
        std::string_view word;
        if (index == line.size() || ends_unquoted_word(line[index])) {
            word = line.substr(word_start, index - word_start);
        } else {
            // A quote: the word is its unquoted prefix plus the quoted section,
            // which must close and then be followed by whitespace or the line
            // end. An unescaped word is never longer than its source, so room
            // for the rest of the line holds every word still to come and the
            // storage never moves under the views already taken.
            if (!storage_reserved) {
                inline_words_.reserve(line.size() - word_start);
                storage_reserved = true;
            }
            const std::size_t stored_start = inline_words_.size();
            inline_words_.append(line.data() + word_start, index - word_start);
            const char quote = line[index];
            index = quote == '"' ? unescape_double_quoted(line, index + 1, inline_words_)
                                 : unescape_single_quoted(line, index + 1, inline_words_);
            if (index == std::string_view::npos ||
                (index < line.size() && !is_blank(line[index]))) {
                return "unbalanced quotes in request";
            }
            word = std::string_view(inline_words_).substr(stored_start);
        }
        if (const char* error = length_error(word.size())) return error;
        argv.push_back(word);
    }
    return nullptr;
}

}  // namespace bloomery::resp
