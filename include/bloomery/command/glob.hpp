#pragma once
// Redis-style glob matching for KEYS, SCAN MATCH, CONFIG GET, COMMAND LIST
// and ACL key patterns: '*', '?', '[abc]', '[^a-z]', '\x' escapes.
//
// A pattern is compiled once into the runs of single-character tests
// between its stars. Matching then never backtracks: the first run must
// match at the start of the text, the last one at its end, and each one in
// between at its leftmost place after the previous one (leftmost is always
// right: a later place would only leave less text for the runs after it).
// A run of plain characters is found with memmem (linear time); a run with
// classes or '?' with a bit-parallel scan, O(text · run / 64). So a hostile
// pattern against a long key costs about one pass over the key, never
// pattern × key.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bloomery::command {

// Whether letters match their other case too: ACL, KEYS, SCAN and Pub/Sub
// patterns match case-sensitively as Redis's; CONFIG GET and COMMAND LIST
// names without regard to ASCII case.
enum class GlobCase { sensitive, insensitive };

class GlobPattern {
public:
    explicit GlobPattern(std::string_view pattern, GlobCase letters = GlobCase::sensitive);
    bool match(std::string_view text) const;
    // "*" (or any run of stars alone): every text matches.
    bool matches_everything() const { return anything_; }

private:
    using CharSet = std::array<std::uint64_t, 4>;  // one bit per byte value
    struct Run {
        std::vector<CharSet> sets;  // one per character of the run
        std::string literal;        // the run's bytes, when every set is one byte
        bool is_literal = true;
        // Shift-And masks, 256 × words: bit j of word w for byte c is set
        // when position 64w + j accepts c (runs with classes only).
        std::vector<std::uint64_t> masks;
        std::size_t words = 0;
        std::size_t size() const { return sets.size(); }
        bool matches_at(std::string_view text, std::size_t at) const;
        // Leftmost start >= from where the run matches wholly inside text.
        std::size_t find(std::string_view text, std::size_t from) const;
        void prepare();
    };
    std::vector<Run> runs_;
    bool starts_with_star_ = false;
    bool ends_with_star_ = false;
    bool anything_ = false;
};

// One-off form (compiles the pattern for one text).
bool glob_match(std::string_view pattern, std::string_view text,
                GlobCase letters = GlobCase::sensitive);

}  // namespace bloomery::command
