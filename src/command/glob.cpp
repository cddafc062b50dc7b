#include "bloomery/command/glob.hpp"

#include <cctype>
#include <cstring>

namespace bloomery::command {
namespace {

unsigned char fold(unsigned char c, GlobCase letters) {
    return letters == GlobCase::insensitive ? static_cast<unsigned char>(std::tolower(c)) : c;
}

using CharSet = std::array<std::uint64_t, 4>;

void set_bit(CharSet& set, unsigned char c) {
    set[c >> 6] |= std::uint64_t{1} << (c & 63);
}
bool has_bit(const CharSet& set, unsigned char c) {
    return (set[c >> 6] >> (c & 63)) & 1;
}

// Every byte equal to `c` (both cases when case is ignored).
CharSet literal_set(unsigned char c, GlobCase letters) {
    CharSet set{};
    set_bit(set, c);
    if (letters == GlobCase::insensitive) {
        set_bit(set, static_cast<unsigned char>(std::tolower(c)));
        set_bit(set, static_cast<unsigned char>(std::toupper(c)));
    }
    return set;
}

// The class starting after '[' at p[i]; leaves i past its ']' (an
// unterminated class ends the pattern). Ranges may be written high to low;
// '\' escapes the next character.
CharSet class_set(std::string_view p, std::size_t& i, GlobCase letters) {
    bool negate = false;
    if (i < p.size() && p[i] == '^') {
        negate = true;
        ++i;
    }
    CharSet set{};
    const auto add_range = [&](unsigned char lo, unsigned char hi) {
        lo = fold(lo, letters);
        hi = fold(hi, letters);
        if (lo > hi) std::swap(lo, hi);
        for (unsigned c = 0; c < 256; ++c) {
            const unsigned char x = fold(static_cast<unsigned char>(c), letters);
            if (x >= lo && x <= hi) set_bit(set, static_cast<unsigned char>(c));
        }
    };
    while (i < p.size() && p[i] != ']') {
        if (p[i] == '\\' && i + 1 < p.size()) {
            add_range(static_cast<unsigned char>(p[i + 1]), static_cast<unsigned char>(p[i + 1]));
            i += 2;
        } else if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
            add_range(static_cast<unsigned char>(p[i]), static_cast<unsigned char>(p[i + 2]));
            i += 3;
        } else {
            add_range(static_cast<unsigned char>(p[i]), static_cast<unsigned char>(p[i]));
            ++i;
        }
    }
    if (i < p.size()) ++i;  // the ']'
    if (negate) {
        for (auto& word : set) word = ~word;
    }
    return set;
}

}  // namespace

GlobPattern::GlobPattern(std::string_view p, GlobCase letters) {
    Run current;
    bool any_set = false;
    const auto close_run = [&] {
        runs_.push_back(std::move(current));
        current = Run{};
    };
    for (std::size_t i = 0; i < p.size();) {
        const char c = p[i];
        if (c == '*') {
            if (i == 0) starts_with_star_ = true;
            while (i < p.size() && p[i] == '*') ++i;
            if (i == p.size()) ends_with_star_ = true;
            close_run();
            continue;
        }
        any_set = true;
        if (c == '?') {
            CharSet all;
            all.fill(~std::uint64_t{0});
            current.sets.push_back(all);
            current.is_literal = false;
            ++i;
        } else if (c == '[') {
            ++i;
            current.sets.push_back(class_set(p, i, letters));
            current.is_literal = false;
        } else {
            auto literal = static_cast<unsigned char>(c);
            if (c == '\\' && i + 1 < p.size()) literal = static_cast<unsigned char>(p[++i]);
            ++i;
            current.sets.push_back(literal_set(literal, letters));
            if (letters == GlobCase::insensitive && std::tolower(literal) != std::toupper(literal))
                current.is_literal = false;
            current.literal.push_back(static_cast<char>(literal));
        }
    }
    close_run();
    anything_ = !any_set && starts_with_star_;
    for (Run& run : runs_) run.prepare();
}

void GlobPattern::Run::prepare() {
    if (is_literal || sets.empty()) return;
    words = (sets.size() + 63) / 64;
    masks.assign(256 * words, 0);
    for (std::size_t pos = 0; pos < sets.size(); ++pos) {
        for (unsigned c = 0; c < 256; ++c) {
            if (has_bit(sets[pos], static_cast<unsigned char>(c))) {
                masks[c * words + pos / 64] |= std::uint64_t{1} << (pos % 64);
            }
        }
    }
}

bool GlobPattern::Run::matches_at(std::string_view text, std::size_t at) const {
    if (at > text.size() || text.size() - at < sets.size()) return false;
    if (is_literal) return std::memcmp(text.data() + at, literal.data(), literal.size()) == 0;
    for (std::size_t k = 0; k < sets.size(); ++k) {
        if (!has_bit(sets[k], static_cast<unsigned char>(text[at + k]))) return false;
    }
    return true;
}

std::size_t GlobPattern::Run::find(std::string_view text, std::size_t from) const {
    constexpr std::size_t npos = std::string_view::npos;
    const std::size_t m = sets.size();
    if (m == 0) return from <= text.size() ? from : npos;
    if (from > text.size() || text.size() - from < m) return npos;
    if (is_literal) {
        const void* hit =
            ::memmem(text.data() + from, text.size() - from, literal.data(), literal.size());
        return hit == nullptr ? npos : static_cast<const char*>(hit) - text.data();
    }
    // Shift-And: bit k of the state is set when the run's first k + 1
    // positions match the text ending at the current byte.
    std::vector<std::uint64_t> state(words, 0);
    const std::size_t last_word = (m - 1) / 64;
    const std::uint64_t last_bit = std::uint64_t{1} << ((m - 1) % 64);
    for (std::size_t i = from; i < text.size(); ++i) {
        const std::uint64_t* mask = &masks[static_cast<unsigned char>(text[i]) * words];
        std::uint64_t carry = 1;  // a match may start at every byte
        for (std::size_t w = 0; w < words; ++w) {
            const std::uint64_t next_carry = state[w] >> 63;
            state[w] = ((state[w] << 1) | carry) & mask[w];
            carry = next_carry;
        }
        if (state[last_word] & last_bit) return i + 1 - m;
    }
    return npos;
}

bool GlobPattern::match(std::string_view text) const {
    if (anything_) return true;
    const std::size_t count = runs_.size();
    if (count == 1) {  // no star at all
        return runs_[0].size() == text.size() && runs_[0].matches_at(text, 0);
    }
    // runs_[0] is before the first star (empty if the pattern starts with
    // one), runs_.back() after the last (empty if it ends with one).
    const Run& first = runs_.front();
    const Run& last = runs_.back();
    if (first.size() + last.size() > text.size()) return false;
    if (!first.matches_at(text, 0)) return false;
    const std::size_t tail = text.size() - last.size();
    if (!last.matches_at(text, tail)) return false;
    std::size_t pos = first.size();
    const std::string_view middle = text.substr(0, tail);
    for (std::size_t r = 1; r + 1 < count; ++r) {
        const std::size_t at = runs_[r].find(middle, pos);
        if (at == std::string_view::npos) return false;
        pos = at + runs_[r].size();
    }
    return true;
}

bool glob_match(std::string_view pattern, std::string_view text, GlobCase letters) {
    return GlobPattern(pattern, letters).match(text);
}

}  // namespace bloomery::command
