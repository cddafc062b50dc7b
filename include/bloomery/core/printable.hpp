#pragma once
// Text a client (or an operator) wrote, shown inside an error reply: at most
// `limit` bytes of it, with control bytes (CR and LF among them) and DEL shown
// as spaces, so a hostile argument can neither break the reply's framing nor
// make it long. The one rule for every error that quotes what it was given.

#include <cstddef>
#include <string>
#include <string_view>

namespace bloomery::core {

inline constexpr std::size_t kShownTextLimit = 64;

inline void append_printable(std::string& out, std::string_view text,
                             std::size_t limit = kShownTextLimit) {
    for (const char c : text.substr(0, limit)) {
        const auto byte = static_cast<unsigned char>(c);
        out.push_back(byte < 0x20 || byte == 0x7f ? ' ' : c);
    }
}

// The same, as a string of its own: for a message built by concatenation.
inline std::string printable(std::string_view text, std::size_t limit = kShownTextLimit) {
    std::string out;
    append_printable(out, text, limit);
    return out;
}

}  // namespace bloomery::core
