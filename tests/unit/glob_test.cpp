// KEYS, SCAN MATCH, PUBSUB and ACL patterns: Redis's glob rules, and a
// compiled matcher that stays linear on long patterns and keys.

#include <gtest/gtest.h>

#include <cctype>
#include <random>
#include <string>
#include <string_view>
#include <utility>

#include "bloomery/command/glob.hpp"

namespace bloomery::command {
namespace {

TEST(Glob, MatchesLikeRedis) {
    EXPECT_TRUE(glob_match("*", "anything"));
    EXPECT_TRUE(glob_match("h?llo", "hello"));
    EXPECT_TRUE(glob_match("h[ae]llo", "hallo"));
    EXPECT_FALSE(glob_match("h[ae]llo", "hillo"));
    EXPECT_TRUE(glob_match("h[^e]llo", "hallo"));
    EXPECT_FALSE(glob_match("h[^e]llo", "hello"));
    EXPECT_TRUE(glob_match("h[a-c]llo", "hbllo"));
    EXPECT_TRUE(glob_match("a\\*b", "a*b"));
    EXPECT_FALSE(glob_match("a\\*b", "axb"));
    EXPECT_TRUE(glob_match("user:*:name", "user:42:name"));
    EXPECT_FALSE(glob_match("user:*:name", "user:42:age"));
    EXPECT_TRUE(glob_match("SAVE", "save", GlobCase::insensitive));
    // A pathological pattern finishes quickly (no exponential backtracking).
    const std::string text(10000, 'a');
    EXPECT_FALSE(glob_match("*a*a*a*a*a*a*a*a*a*a*b", text));
}

// A plain backtracking matcher (exponential at worst): the reference the
// compiled matcher must agree with on small inputs.
bool reference_glob(std::string_view p, std::string_view s, bool nocase) {
    const auto fold = [&](char c) {
        return nocase ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : c;
    };
    if (p.empty()) return s.empty();
    if (p[0] == '*') {
        for (std::size_t k = 0; k <= s.size(); ++k) {
            if (reference_glob(p.substr(1), s.substr(k), nocase)) return true;
        }
        return false;
    }
    if (s.empty()) return false;
    std::size_t used = 1;
    bool ok;
    if (p[0] == '?') {
        ok = true;
    } else if (p[0] == '[') {
        std::size_t i = 1;
        const bool negate = i < p.size() && p[i] == '^';
        if (negate) ++i;
        bool matched = false;
        while (i < p.size() && p[i] != ']') {
            if (p[i] == '\\' && i + 1 < p.size()) {
                matched |= fold(p[i + 1]) == fold(s[0]);
                i += 2;
            } else if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
                auto lo = static_cast<unsigned char>(fold(p[i]));
                auto hi = static_cast<unsigned char>(fold(p[i + 2]));
                if (lo > hi) std::swap(lo, hi);
                const auto x = static_cast<unsigned char>(fold(s[0]));
                matched |= x >= lo && x <= hi;
                i += 3;
            } else {
                matched |= fold(p[i]) == fold(s[0]);
                ++i;
            }
        }
        if (i < p.size()) ++i;
        used = i;
        ok = negate ? !matched : matched;
    } else if (p[0] == '\\' && p.size() > 1) {
        used = 2;
        ok = fold(p[1]) == fold(s[0]);
    } else {
        ok = fold(p[0]) == fold(s[0]);
    }
    return ok && reference_glob(p.substr(used), s.substr(1), nocase);
}

TEST(Glob, AgreesWithABacktrackingMatcher) {
    std::mt19937 rng(7);
    const std::string pattern_chars = "ab*?[]^-\\Ac";
    const std::string text_chars = "abcA-]";
    for (int round = 0; round < 20000; ++round) {
        std::string pattern, text;
        for (int i = rng() % 9; i > 0; --i)
            pattern.push_back(pattern_chars[rng() % pattern_chars.size()]);
        for (int i = rng() % 9; i > 0; --i) text.push_back(text_chars[rng() % text_chars.size()]);
        const bool nocase = rng() % 4 == 0;
        const GlobCase letters = nocase ? GlobCase::insensitive : GlobCase::sensitive;
        ASSERT_EQ(glob_match(pattern, text, letters), reference_glob(pattern, text, nocase))
            << "pattern '" << pattern << "' text '" << text << "' nocase " << nocase;
    }
}

// A star, thousands of characters and a mismatch at the end, against a
// megabyte key: one pass over the key, not pattern x key (that took
// seconds with a matcher that backtracks to the star).
TEST(Glob, LongPatternsAgainstLongKeysStayLinear) {
    const std::string key(1 << 20, 'a');
    const std::string run(8000, 'a');
    EXPECT_FALSE(glob_match("*" + run + "b", key));
    EXPECT_FALSE(glob_match("*" + run + "b*", key));
    EXPECT_TRUE(glob_match("*" + run + "*", key));
    EXPECT_FALSE(glob_match("*" + run + "?b*", key));
    EXPECT_FALSE(glob_match("*[a]" + run + "[b]*", key));
    EXPECT_TRUE(glob_match("*[a]" + run + "?*", key));
    std::string keyed = key;
    keyed.back() = 'b';
    EXPECT_TRUE(glob_match("*" + run + "b", keyed));
    EXPECT_TRUE(glob_match("*a?" + run + "[b]", keyed));
}

}  // namespace
}  // namespace bloomery::command
