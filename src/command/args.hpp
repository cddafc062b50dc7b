#pragma once
// Argument parsing shared by the command families: Redis's strict number
// rules (no spaces, no trailing bytes, no NaN) and case-insensitive tokens.

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "bloomery/core/ascii.hpp"
#include "bloomery/core/parse_int64.hpp"

namespace bloomery::command {

using core::iequals;

// Every integer a client sends is read by Redis's string2ll rules
// (core/parse_int64.hpp), the same as the RESP parser's length headers.
using core::parse_int64;

// Like Redis's getDoubleFromObject: the whole string is a finite-or-infinite
// number; NaN and leading spaces are refused.
inline bool parse_double(std::string_view text, double& out) {
    if (text.empty() || text.size() > 256) return false;
    if (text[0] == ' ' || text[0] == '\t') return false;
    std::string copy(text);  // strtod needs a terminator; options are rare, not hot
    char* end = nullptr;
    errno = 0;
    out = std::strtod(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size() || std::isnan(out)) return false;
    if (errno == ERANGE && !std::isinf(out) && out != 0) return false;
    return true;
}

}  // namespace bloomery::command
