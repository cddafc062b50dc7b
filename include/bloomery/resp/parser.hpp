#pragma once
// Incremental RESP request parser. It does no I/O and knows nothing of sockets:
// the caller hands it the unconsumed bytes of a connection's query buffer and
// it either yields one command (argv as views into those bytes), asks for more
// bytes, or reports a protocol error.
//
// Accepted input: RESP2 multibulk (`*<n>\r\n$<len>\r\n<bytes>\r\n...`) and inline
// commands (`PING\r\n`, words split on spaces/tabs, "double" and 'single' quotes
// with Redis's escapes). A command split at any byte boundary parses the same.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bloomery::resp {

// What one argument costs the caller while its command runs: one view in argv.
// The server counts it against the client's query buffer limit, so a request
// may not have more arguments than that limit holds views (proto/resp.md).
inline constexpr std::size_t kArgumentViewBytes = sizeof(std::string_view);

// Limits, with Redis's defaults. Every one is a named config value of the server.
// A value equal to a limit is accepted; one past it is an error (see proto/resp.md).
// The words of an inline request are arguments too: the count and length
// limits bound them exactly as they bound multibulk arguments.
struct ParserLimits {
    std::size_t max_bulk_length = 512ull * 1024 * 1024;  // proto-max-bulk-len, bytes per argument
    // PROTO_INLINE_MAX_SIZE: bytes an inline line may hold before its '\n', and
    // bytes a `*<n>` / `$<len>` header line may hold before its '\r'.
    std::size_t max_inline_length = 64 * 1024;
    std::size_t max_multibulk_length =
        1024 * 1024;  // proto-max-multibulk-len, arguments per command
    // Tighter bounds while the client has not authenticated yet (Redis 7: 10
    // arguments, 16 KB per bulk), checked after the ones above; past them the
    // error is "unauthenticated multibulk length" / "unauthenticated bulk length".
    bool unauthenticated = false;
    std::size_t unauthenticated_max_multibulk_length = 10;
    std::size_t unauthenticated_max_bulk_length = 16 * 1024;
};

enum class ParseStatus {
    complete,    // one command parsed; argv and consumed are set
    incomplete,  // need more bytes; call again with the same bytes plus more
    error,       // protocol error; error_message() says why; the connection must close
};

// What one parse() did with the front of its input.
struct ParseResult {
    ParseStatus status = ParseStatus::incomplete;
    std::size_t consumed = 0;  // bytes of the input the command took; 0 unless complete
};

class Parser {
public:
    explicit Parser(ParserLimits limits = {});

    // Parses at most one command from the front of `input`, which must start at
    // the first byte not yet consumed. On `complete`: `argv` holds views into
    // `input` (valid while those bytes live), except inline words that had quotes
    // or escapes, which view the parser's own storage (valid until the next
    // parse() or shrink()); the result's `consumed` is how many bytes of `input`
    // the command took. An empty inline line or a `*0`/`*-1` multibulk is
    // consumed and yields an empty argv (the caller skips it).
    // On `incomplete` the parser remembers how far it got (as offsets, so the
    // caller may move or grow its buffer) and resumes at the next call, which must
    // pass the same unconsumed bytes with more appended. Bytes already checked
    // are not scanned again, so a pipeline costs O(total bytes).
    // On `incomplete` and `error`, argv is empty and consumed is 0. After
    // `complete` or `error` the parser is ready for the next command.
    // Steady state does not allocate: argv's capacity is reused.
    // Memory: a partly received command costs nothing but its bytes (its
    // arguments are located again when it completes); a complete one costs
    // argv exactly one view per argument, and an inline one with quotes at
    // most its line's length in storage (memory_bytes()).
    ParseResult parse(std::string_view input, std::vector<std::string_view>& argv);

    // Text after "ERR Protocol error: " for the last `error`, e.g.
    // "invalid multibulk length", "invalid bulk length", "expected '$', got 'x'",
    // "too big inline request", "unbalanced quotes in request" (every text and
    // when it occurs: proto/resp.md). Never contains CR/LF.
    const std::string& error_message() const { return error_; }

    // A hint for buffer management: while waiting for the body of a bulk
    // argument, the input size (counted from the start of the command) at which
    // that argument and its CRLF will be complete, so a caller can reserve room
    // for a large bulk; 0 otherwise.
    std::size_t bytes_expected() const { return bytes_expected_; }

    // Forgets any partly parsed command and the last error.
    void reset();

    // Bytes of heap storage the parser holds (unescaped inline words), for
    // memory accounting; argv is the caller's to count.
    std::size_t memory_bytes() const;
    // Gives back storage a large inline command left (beyond 1 KiB), so an
    // idle connection holds little. Call between commands: views into the
    // storage from the last parse() become invalid if it is freed.
    void shrink();

    // New limits from the next command on (call between commands, e.g. once
    // a client has authenticated).
    void set_limits(const ParserLimits& limits) { limits_ = limits; }
    const ParserLimits& limits() const { return limits_; }

private:
    ParseResult parse_inline(std::string_view input, std::vector<std::string_view>& argv);
    ParseResult parse_multibulk(std::string_view input, std::vector<std::string_view>& argv);
    // parse_multibulk's steps, each resumable where the input ends. A step
    // answers `complete` once its part is read.
    ParseStatus read_argument_count(std::string_view input);
    ParseStatus read_bulk_length(std::string_view input);
    ParseStatus read_bulk_data(std::string_view input);
    void collect_arguments(std::string_view input, std::vector<std::string_view>& argv) const;
    ParseStatus fail(std::string message);
    // The error for one argument too many (the count that would be
    // `arguments`), or for an argument of `length` bytes; null if within.
    const char* count_error(std::size_t arguments) const;
    const char* length_error(std::size_t length) const;
    // Null once the words are in argv, else why the line is refused.
    const char* split_inline_words(std::string_view line, std::vector<std::string_view>& argv);
    void reset_command_state();

    ParserLimits limits_;
    std::string error_;
    // Resumable multibulk state (offsets relative to the start of the command).
    // Only counts and offsets: argv is built when the command is complete, by
    // walking its (already checked) bulk headers again.
    std::int64_t args_expected_ = -1;  // -1: header not parsed yet
    std::int64_t bulk_length_ = -1;    // -1: next bulk header not parsed yet
    std::size_t args_received_ = 0;    // complete arguments of this command
    std::size_t first_arg_ = 0;        // offset of the first bulk header
    std::size_t pos_ = 0;              // next byte to parse
    std::size_t scan_pos_ = 0;         // where the search for a line end resumes
    std::size_t bytes_expected_ = 0;
    // Inline words with quotes are unescaped into this storage, reserved for
    // the rest of the line before the first one (unescaping never lengthens
    // a word), so it never moves while argv views into it are taken.
    std::string inline_words_;
};

}  // namespace bloomery::resp
