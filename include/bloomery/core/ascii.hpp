#pragma once
// Case-insensitive text as the protocol means it: command names, options,
// ACL categories, host names. ASCII letters only, whatever the locale (as
// Redis's strcasecmp in the C locale); other bytes compare as they are.

#include <cstddef>
#include <string>
#include <string_view>

namespace bloomery::core {

constexpr char ascii_lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

constexpr bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    }
    return true;
}

inline std::string ascii_lower(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = ascii_lower(c);
    return out;
}

}  // namespace bloomery::core
