#pragma once
// Redis-style glob matching for KEYS, SCAN MATCH, CONFIG GET and COMMAND LIST:
// '*', '?', '[abc]', '[^a-z]', '\x' escapes. Runs in O(pattern · text) time
// (backtracking only to the last '*'), so hostile patterns cannot blow up.

#include <string_view>

namespace bloomery::command {
bool glob_match(std::string_view pattern, std::string_view text, bool nocase = false);
}
