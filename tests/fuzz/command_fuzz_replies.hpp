#pragma once
// command_fuzz's reply checker: reads the bytes of a command's reply as RESP
// values and aborts the fuzzer on anything that is not well formed (a line
// without CRLF or with a bare CR or LF, a bad integer or length, a RESP3 type
// in RESP2, an error without an upper-case code, nesting past 16).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace bloomery::fuzz {

inline void require(bool condition, const char* what) {
    if (!condition) {
        std::fprintf(stderr, "command_fuzz invariant violated: %s\n", what);
        std::abort();
    }
}

struct Value {
    char type = 0;                // the RESP type byte
    std::string text;             // simple, error, bulk, verbatim, double, big number
    std::int64_t integer = 0;     // integer, boolean; -1 for a RESP2 null
    std::vector<Value> elements;  // aggregates (maps flattened: key, value, ...)
};

class ReplyReader {
public:
    ReplyReader(std::string_view buffer, bool resp3) : buffer_(buffer), resp3_(resp3) {}

    // Reads exactly one value that ends at the end of the buffer.
    Value read_whole() {
        Value v = read(0);
        require(pos_ == buffer_.size(), "trailing bytes after one reply");
        return v;
    }
    // Reads one or more values that end at the end of the buffer (SUBSCRIBE
    // and its kin answer once per channel); returns the last.
    Value read_each() {
        Value v = read(0);
        while (pos_ < buffer_.size()) v = read(0);
        return v;
    }

private:
    std::string_view line() {
        const std::size_t end = buffer_.find("\r\n", pos_);
        require(end != std::string_view::npos, "reply line without CRLF");
        const std::string_view text = buffer_.substr(pos_, end - pos_);
        require(text.find_first_of("\r\n") == std::string_view::npos, "bare CR or LF in a line");
        pos_ = end + 2;
        return text;
    }

    static std::int64_t to_int(std::string_view text) {
        require(!text.empty() && text.size() <= 20, "bad integer length");
        std::size_t i = text[0] == '-' ? 1 : 0;
        require(i < text.size(), "bad integer");
        // Accumulate as negative so INT64_MIN parses.
        std::int64_t value = 0;
        for (; i < text.size(); ++i) {
            require(text[i] >= '0' && text[i] <= '9', "non-digit in integer");
            require(value >= (INT64_MIN + (text[i] - '0')) / 10, "integer overflow");
            value = value * 10 - (text[i] - '0');
        }
        if (text[0] == '-') return value;
        require(value != INT64_MIN, "integer overflow");
        return -value;
    }

    std::string_view payload(std::int64_t length) {
        require(length >= 0 && static_cast<std::uint64_t>(length) <= buffer_.size() - pos_ &&
                    buffer_.size() - pos_ - static_cast<std::size_t>(length) >= 2,
                "bulk length past the buffer");
        const std::string_view bytes = buffer_.substr(pos_, static_cast<std::size_t>(length));
        pos_ += static_cast<std::size_t>(length);
        require(buffer_.substr(pos_, 2) == "\r\n", "bulk not followed by CRLF");
        pos_ += 2;
        return bytes;
    }

    Value read(int depth) {
        require(depth < 16, "replies nested too deeply");
        require(pos_ < buffer_.size(), "reply missing");
        Value v;
        v.type = buffer_[pos_++];
        switch (v.type) {
            case '+':
                v.text = line();
                break;
            case '-':
                v.text = line();
                require(!v.text.empty() && v.text[0] >= 'A' && v.text[0] <= 'Z',
                        "error reply without an upper-case code");
                break;
            case ':':
                v.integer = to_int(line());
                break;
            case '$': {
                v.integer = to_int(line());
                if (v.integer == -1) break;  // RESP2 null
                v.text = payload(v.integer);
                break;
            }
            case '*':
            case '~':
            case '%':
            case '>': {
                require(v.type == '*' || resp3_, "RESP3 aggregate in RESP2");
                const std::int64_t count = to_int(line());
                if (count == -1 && v.type == '*') break;
                require(count >= 0 && count <= 1 << 20, "bad aggregate count");
                const std::int64_t elements = v.type == '%' ? 2 * count : count;
                for (std::int64_t i = 0; i < elements; ++i) v.elements.push_back(read(depth + 1));
                break;
            }
            case '_':
                require(resp3_, "RESP3 null in RESP2");
                require(line().empty(), "null with a payload");
                break;
            case '#': {
                require(resp3_, "RESP3 boolean in RESP2");
                const std::string_view t = line();
                require(t == "t" || t == "f", "bad boolean");
                v.integer = t == "t";
                break;
            }
            case ',': {
                require(resp3_, "RESP3 double in RESP2");
                v.text = line();
                require(!v.text.empty(), "empty double");
                break;
            }
            case '=': {
                require(resp3_, "RESP3 verbatim in RESP2");
                v.text = payload(to_int(line()));
                require(v.text.size() >= 4 && v.text[3] == ':', "verbatim without format");
                break;
            }
            default:
                require(false, "unknown reply type");
        }
        return v;
    }

    std::string_view buffer_;
    std::size_t pos_ = 0;
    bool resp3_;
};

}  // namespace bloomery::fuzz
