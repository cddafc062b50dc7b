#pragma once
// The one rule for reading an integer that someone wrote: a command's
// argument, a RESP length header, a configuration value. It is Redis's
// string2ll, so a client sees the same answers it gets from Redis: an
// optional '-', then decimal digits with no leading zero ("0" alone is fine),
// nothing else (no '+', no spaces, no "-0", not empty), and the value fits in
// a signed 64-bit integer.

#include <cstdint>
#include <limits>
#include <string_view>

namespace bloomery::core {

// True and `out` set if `text` is such an integer; false (and `out`
// untouched) otherwise. No allocation, no locale; safe from any thread.
constexpr bool parse_int64(std::string_view text, std::int64_t& out) {
    std::size_t index = 0;
    const bool negative = !text.empty() && text[0] == '-';
    if (negative) index = 1;
    if (index == text.size()) return false;
    if (text[index] == '0') {
        if (text.size() != 1) return false;  // "00", "007", "-0"
        out = 0;
        return true;
    }
    std::uint64_t magnitude = 0;
    constexpr std::uint64_t kMaxMagnitude = std::numeric_limits<std::uint64_t>::max();
    for (; index < text.size(); ++index) {
        const unsigned digit = static_cast<unsigned char>(text[index]) - unsigned{'0'};
        if (digit > 9) return false;
        if (magnitude > (kMaxMagnitude - digit) / 10) return false;
        magnitude = magnitude * 10 + digit;
    }
    constexpr auto kMaxPositive =
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (magnitude > (negative ? kMaxPositive + 1 : kMaxPositive)) return false;
    // C++20 defines the unsigned-to-signed conversion as modular, so 2^63
    // negated becomes INT64_MIN.
    out = negative ? static_cast<std::int64_t>(std::uint64_t{0} - magnitude)
                   : static_cast<std::int64_t>(magnitude);
    return true;
}

// The other rule, for numbers in a fixed form that the server or an operator
// wrote rather than a client (a port in --replicaof or --cluster-slots, a slot
// range, a replication offset): 1 to `max_digits` decimal digits (at most 19,
// so the value fits), leading zeros allowed, nothing else (no sign, no
// spaces). True and `out` set if `text` is such a number.
constexpr bool parse_digits(std::string_view text, std::size_t max_digits, std::uint64_t& out) {
    if (text.empty() || text.size() > max_digits || max_digits > 19) return false;
    std::uint64_t value = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return false;
        value = value * 10 + static_cast<unsigned>(c - '0');
    }
    out = value;
    return true;
}

}  // namespace bloomery::core
