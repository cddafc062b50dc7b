#pragma once
// Reply encoder. Appends RESP2 or RESP3 replies to a caller-owned, reusable
// byte buffer (the connection's output buffer): no allocation per reply once
// the buffer has grown. Not thread-safe; one writer per connection.

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace bloomery::core {
class ErrorStatsTable;
}

namespace bloomery::resp {

class Writer {
public:
    explicit Writer(std::string& out) : out_(&out) {}

    // 2 (default) or 3, set by HELLO. RESP3-only types degrade to RESP2 forms.
    void set_protocol(int version) { protocol_ = version; }
    int protocol() const { return protocol_; }

    void simple(std::string_view text);  // +text  (CR/LF replaced by spaces)
    void error(std::string_view text);  // -text  (prefix included, e.g. "ERR ..."; CR/LF -> spaces)
    void integer(std::int64_t value);   // :value
    void bulk(std::string_view bytes);  // $len bytes
    void null();                        // RESP2 $-1, RESP3 _
    void null_array();                  // RESP2 *-1, RESP3 _
    void array(std::size_t count);      // *count, elements follow
    void push(std::size_t count);       // RESP3 >count (out of band), RESP2 *count
    void map(std::size_t pairs);        // RESP3 %pairs, RESP2 *2·pairs
    void set(std::size_t count);        // RESP3 ~count, RESP2 *count
    void boolean(bool value);           // RESP3 #t/#f, RESP2 :1/:0
    // One boolean() per byte of `values` (non-zero: true), written at once.
    void booleans(std::span<const std::uint8_t> values);
    void real(double value);               // RESP3 ,value, RESP2 bulk string; value in
                                           // shortest round-trip form, or inf, -inf, nan
    void verbatim(std::string_view text);  // RESP3 =len txt:..., RESP2 bulk
    void ok() { simple("OK"); }

    // Where every error reply is also counted by its prefix (INFO
    // errorstats, core/error_stats.hpp); null: nowhere. The table belongs to
    // the thread that writes with this writer.
    void set_error_stats(core::ErrorStatsTable* table) { error_stats_ = table; }

    std::string& buffer() { return *out_; }
    // Error replies written so far (top-level or inside arrays), so that the
    // dispatcher can count every error a command answers in one place.
    std::uint64_t errors_written() const { return errors_written_; }

private:
    std::string* out_;
    int protocol_ = 2;
    std::uint64_t errors_written_ = 0;
    core::ErrorStatsTable* error_stats_ = nullptr;
};

// A command as a client sends it: an array of bulk strings (what a replica
// sends its primary, what --health-check sends).
std::string encode_command(std::initializer_list<std::string_view> words);

}  // namespace bloomery::resp
