#pragma once
// RESP written straight into a string, for commands that build a request
// or a message themselves (MIGRATE's RESTORE, DUMP's reply, Pub/Sub
// messages) rather than through resp::Writer.

#include <cstdint>
#include <string>
#include <string_view>

namespace bloomery::command {

// `type` (one of RESP's prefixes: '$', '*', ...) and `length`, then CRLF.
inline void append_length_line(std::string& out, char type, std::uint64_t length) {
    out += type;
    out += std::to_string(length);
    out += "\r\n";
}

// Puts the bulk length line of the bytes from `start` on in front of them.
inline void insert_length_line(std::string& out, std::size_t start) {
    std::string line;
    append_length_line(line, '$', out.size() - start);
    out.insert(start, line);
}

inline void append_bulk(std::string& out, std::string_view bytes) {
    append_length_line(out, '$', bytes.size());
    out.append(bytes);
    out += "\r\n";
}

}  // namespace bloomery::command
