#include "bloomery/resp/writer.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "bloomery/core/error_stats.hpp"

namespace bloomery::resp {

namespace {

constexpr std::string_view kCrlf = "\r\n";

// Appends `<type><value>\r\n`, formatting into a stack buffer so the only
// allocation is the output buffer growing.
template <typename Integer>
void append_header(std::string& out, char type, Integer value) {
    // type byte + up to 20 digits and a sign + CRLF
    char buffer[1 + std::numeric_limits<Integer>::digits10 + 2 + 2];
    buffer[0] = type;
    char* end = std::to_chars(buffer + 1, buffer + sizeof(buffer) - 2, value).ptr;
    *end++ = '\r';
    *end++ = '\n';
    out.append(buffer, static_cast<std::size_t>(end - buffer));
}

// Appends `<type><text>\r\n` for the line-based types. A CR or LF inside the
// text would end the reply early and let the rest be read as another reply, so
// each one becomes a space.
void append_line(std::string& out, char type, std::string_view text) {
    const std::size_t text_start = out.size() + 1;
    out.push_back(type);
    out.append(text);
    std::replace_if(
        out.begin() + static_cast<std::ptrdiff_t>(text_start), out.end(),
        [](char c) { return c == '\r' || c == '\n'; }, ' ');
    out.append(kCrlf);
}

// Shortest text that reads back as the same double ("0.1", "1e+300"), with
// Redis's spellings for the values that have no digits.
std::string_view format_real(double value, char (&buffer)[32]) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
    const char* end = std::to_chars(buffer, buffer + sizeof(buffer), value).ptr;
    return {buffer, static_cast<std::size_t>(end - buffer)};
}

}  // namespace

void Writer::simple(std::string_view text) {
    append_line(*out_, '+', text);
}

void Writer::error(std::string_view text) {
    ++errors_written_;
    if (error_stats_ != nullptr) error_stats_->record(text);
    append_line(*out_, '-', text);
}

void Writer::integer(std::int64_t value) {
    append_header(*out_, ':', value);
}

void Writer::bulk(std::string_view bytes) {
    append_header(*out_, '$', bytes.size());
    out_->append(bytes);
    out_->append(kCrlf);
}

void Writer::null() {
    if (protocol_ >= 3) {
        out_->append("_\r\n");
    } else {
        out_->append("$-1\r\n");
    }
}

void Writer::null_array() {
    if (protocol_ >= 3) {
        out_->append("_\r\n");
    } else {
        out_->append("*-1\r\n");
    }
}

void Writer::array(std::size_t count) {
    append_header(*out_, '*', count);
}

void Writer::push(std::size_t count) {
    append_header(*out_, protocol_ >= 3 ? '>' : '*', count);
}

void Writer::map(std::size_t pairs) {
    if (protocol_ >= 3) {
        append_header(*out_, '%', pairs);
    } else {
        append_header(*out_, '*', pairs * 2);
    }
}

void Writer::set(std::size_t count) {
    append_header(*out_, protocol_ >= 3 ? '~' : '*', count);
}

void Writer::boolean(bool value) {
    if (protocol_ >= 3) {
        out_->append(value ? "#t\r\n" : "#f\r\n");
    } else {
        out_->append(value ? ":1\r\n" : ":0\r\n");
    }
}

void Writer::booleans(std::span<const std::uint8_t> values) {
    // Every reply is 4 bytes in either protocol: sized once, then filled.
    const bool resp3 = protocol_ >= 3;
    const char type = resp3 ? '#' : ':';
    const char yes = resp3 ? 't' : '1';
    const char no = resp3 ? 'f' : '0';
    const std::size_t start = out_->size();
    out_->resize(start + 4 * values.size());
    char* at = out_->data() + start;
    for (const std::uint8_t value : values) {
        at[0] = type;
        at[1] = value != 0 ? yes : no;
        at[2] = '\r';
        at[3] = '\n';
        at += 4;
    }
}

void Writer::real(double value) {
    char buffer[32];
    const std::string_view text = format_real(value, buffer);
    if (protocol_ >= 3) {
        out_->push_back(',');
        out_->append(text);
        out_->append(kCrlf);
    } else {
        bulk(text);
    }
}

void Writer::verbatim(std::string_view text) {
    if (protocol_ < 3) {
        bulk(text);
        return;
    }
    constexpr std::string_view kFormatPrefix = "txt:";
    append_header(*out_, '=', text.size() + kFormatPrefix.size());
    out_->append(kFormatPrefix);
    out_->append(text);
    out_->append(kCrlf);
}

std::string encode_command(std::initializer_list<std::string_view> words) {
    std::string out;
    out += '*';
    out += std::to_string(words.size());
    out += "\r\n";
    for (const std::string_view word : words) {
        out += '$';
        out += std::to_string(word.size());
        out += "\r\n";
        out += word;
        out += "\r\n";
    }
    return out;
}

}  // namespace bloomery::resp
