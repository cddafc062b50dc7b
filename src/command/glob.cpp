#include "bloomery/command/glob.hpp"

#include <cctype>

namespace bloomery::command {
namespace {

char fold(char c, bool nocase) {
    return nocase ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : c;
}

// Matches one character class starting after '['; sets `next` past the ']'.
bool match_class(std::string_view p, std::size_t& i, char c, bool nocase) {
    bool negate = false;
    if (i < p.size() && p[i] == '^') {
        negate = true;
        ++i;
    }
    bool matched = false;
    while (i < p.size() && p[i] != ']') {
        if (p[i] == '\\' && i + 1 < p.size()) {
            ++i;
            if (fold(p[i], nocase) == fold(c, nocase)) matched = true;
            ++i;
        } else if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
            char lo = fold(p[i], nocase), hi = fold(p[i + 2], nocase);
            if (lo > hi) std::swap(lo, hi);
            const char x = fold(c, nocase);
            if (x >= lo && x <= hi) matched = true;
            i += 3;
        } else {
            if (fold(p[i], nocase) == fold(c, nocase)) matched = true;
            ++i;
        }
    }
    if (i < p.size()) ++i;  // skip ']'; an unterminated class ends the pattern
    return negate ? !matched : matched;
}

}  // namespace

bool glob_match(std::string_view p, std::string_view s, bool nocase) {
    std::size_t pi = 0, si = 0;
    std::size_t star_p = std::string_view::npos, star_s = 0;
    while (si < s.size()) {
        if (pi < p.size()) {
            const char pc = p[pi];
            if (pc == '*') {
                while (pi < p.size() && p[pi] == '*') ++pi;
                if (pi == p.size()) return true;
                star_p = pi;
                star_s = si;
                continue;
            }
            if (pc == '?') {
                ++pi;
                ++si;
                continue;
            }
            if (pc == '[') {
                std::size_t next = pi + 1;
                if (match_class(p, next, s[si], nocase)) {
                    pi = next;
                    ++si;
                    continue;
                }
            } else {
                std::size_t next = pi;
                char literal = pc;
                if (pc == '\\' && pi + 1 < p.size()) literal = p[++next];
                if (fold(literal, nocase) == fold(s[si], nocase)) {
                    pi = next + 1;
                    ++si;
                    continue;
                }
            }
        }
        // Mismatch: let the last '*' swallow one more character, if any.
        if (star_p == std::string_view::npos) return false;
        pi = star_p;
        si = ++star_s;
    }
    while (pi < p.size() && p[pi] == '*') ++pi;
    return pi == p.size();
}

}  // namespace bloomery::command
