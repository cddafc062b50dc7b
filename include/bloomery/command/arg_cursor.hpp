#pragma once
// Reads a command's arguments left to right: the one parser cursor of every
// command family. Numbers follow Redis's rules (core/parse_int64.hpp: no
// spaces, no '+', no trailing bytes; doubles as getDoubleFromObject: no NaN,
// no leading space), words match without regard to ASCII case.
//
// The cursor never writes a reply: what a command answers for a missing or
// malformed argument is the command's (RedisBloom's and Redis's texts differ
// from command to command), so the taking calls either report "nothing
// taken" (std::nullopt / false) or return a core::Result carrying the error
// text the caller gave.
//
//   ArgCursor args(argv, 2);                  // after the command and its key
//   while (args.has_next()) {
//       if (args.eat("NONSCALING")) { nonscaling = true; continue; }
//       if (args.eat("EXPANSION")) {
//           auto n = args.take_int(errors::kExpansionNotNumber);
//           if (!n) return ctx.out.error(n.error());
//           ...
//       }
//   }
//
// Not thread-safe (one per command, on the stack); the arguments must
// outlive it.

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "bloomery/core/ascii.hpp"
#include "bloomery/core/parse_int64.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::command {

// Like Redis's getDoubleFromObject: the whole text is a finite or infinite
// number; NaN, leading spaces and trailing bytes are refused.
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

class ArgCursor {
public:
    using Args = std::span<const std::string_view>;

    // Starts at argv[first] (1: after the command's name).
    explicit ArgCursor(Args argv, std::size_t first = 1) : argv_(argv), at_(first) {}

    bool has_next() const { return at_ < argv_.size(); }
    std::size_t remaining() const { return has_next() ? argv_.size() - at_ : 0; }
    // The index in argv of the next argument (argv.size() once done).
    std::size_t position() const { return at_; }

    // The next argument without taking it; "" when there is none.
    std::string_view peek() const { return has_next() ? argv_[at_] : std::string_view(); }
    // Takes the next argument; "" (nothing taken) when there is none.
    std::string_view next() { return has_next() ? argv_[at_++] : std::string_view(); }
    // Goes back one argument (after a word that turned out not to be the
    // caller's).
    void unread() {
        if (at_ > 0) --at_;
    }

    // Takes the next argument if it is `word` (ASCII case ignored).
    bool eat(std::string_view word) {
        if (!has_next() || !core::iequals(argv_[at_], word)) return false;
        ++at_;
        return true;
    }
    // Takes the next argument if it is one of `words` (case ignored) and
    // returns its index among them; nullopt (nothing taken) otherwise.
    std::optional<std::size_t> eat_one_of(std::initializer_list<std::string_view> words) {
        std::size_t index = 0;
        for (const std::string_view word : words) {
            if (eat(word)) return index;
            ++index;
        }
        return std::nullopt;
    }

    // A cursor just past the first argument from here on that is `word`
    // (case ignored), wherever it stands; nullopt if there is none. This
    // cursor does not move. For options found by search rather than read in
    // order, as RedisBloom's RMUtil_ArgIndex finds BF.RESERVE's.
    std::optional<ArgCursor> find(std::string_view word) const {
        for (std::size_t i = at_; i < argv_.size(); ++i) {
            if (core::iequals(argv_[i], word)) return ArgCursor(argv_, i + 1);
        }
        return std::nullopt;
    }

    // Takes the next argument if it is an integer (string2ll's rules);
    // nullopt, nothing taken, if it is missing or is not one.
    std::optional<std::int64_t> next_int() {
        std::int64_t value = 0;
        if (!has_next() || !core::parse_int64(argv_[at_], value)) return std::nullopt;
        ++at_;
        return value;
    }
    std::optional<double> next_double() {
        double value = 0;
        if (!has_next() || !parse_double(argv_[at_], value)) return std::nullopt;
        ++at_;
        return value;
    }
    // The same, failing with `error` (a reply text) when the argument is
    // missing or malformed.
    core::Result<std::int64_t> take_int(std::string_view error) {
        if (auto value = next_int()) return *value;
        return core::Error{std::string(error)};
    }
    core::Result<double> take_double(std::string_view error) {
        if (auto value = next_double()) return *value;
        return core::Error{std::string(error)};
    }

    // Takes every argument left (an ITEMS list, a key list).
    Args rest() {
        const Args left = has_next() ? argv_.subspan(at_) : Args();
        at_ = argv_.size();
        return left;
    }

private:
    Args argv_;
    std::size_t at_;
};

}  // namespace bloomery::command
