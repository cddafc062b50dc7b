#pragma once
// Argument parsing shared by the command families: Redis's strict number
// rules (no spaces, no trailing bytes, no NaN) and case-insensitive tokens;
// the cursor that reads them is bloomery/command/arg_cursor.hpp.

#include <cstdint>
#include <string>
#include <string_view>

#include "bloomery/command/arg_cursor.hpp"
#include "bloomery/core/ascii.hpp"
#include "bloomery/core/parse_int64.hpp"

namespace bloomery::command {

using core::iequals;

// Every integer a client sends is read by Redis's string2ll rules
// (core/parse_int64.hpp), the same as the RESP parser's length headers.
using core::parse_int64;

}  // namespace bloomery::command
