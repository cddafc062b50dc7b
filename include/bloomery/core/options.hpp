#pragma once
// The option spec: every option of the server in one table, one entry each,
// with everything any place needs to know of it: its name (the long flag
// without "--", the --config file's key, CONFIG GET's name), kind, range,
// help text, --help group, environment variable, how its text becomes a
// Config value, how CONFIG GET shows it and, for the settings that change
// at run time, how CONFIG SET changes the RuntimeSettings. The command line
// and the config file (app/), docs/options.md, --test-config and CONFIG
// GET / SET / REWRITE (command/) walk this table; none keeps a list of its
// own. The table lives in core, under every layer that walks it, so the
// entries' accessors know only core's types (Config, RuntimeSettings).
//
// A few options are the command line's own (tools that run and exit, such
// as --check-snapshot, and --requirepass-file, which reads another option's
// value from a file): their entries name, document and range them, and the
// command line reads their text itself (they have no `read`).
//
// Thread safety: the table is constant and every function here may be
// called from any thread; a setter changes RuntimeSettings values, which
// are atomics.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "bloomery/core/config.hpp"
#include "bloomery/core/result.hpp"
#include "bloomery/core/runtime_settings.hpp"

namespace bloomery::core {

enum class OptionKind {
    integer,  // a count or a duration in whole units, in [min, max]
    bytes,    // a size: a number with an optional kb/mb/gb suffix, in [min, max]
    real,     // a floating-point number (error rates, timeouts in seconds), in [min_real, max_real]
    text,     // one word of any text (addresses, file names, passwords)
    choice,   // one of `choices`
    words,    // a list of words (save points, buffer limits, HOST PORT)
    flag,     // no value: given or not
};

// Where an option appears, and how it is read; a set of bits.
enum class OptionUse : unsigned {
    none = 0,
    command_line = 1u << 0,     // a flag of the command line and a key of the --config file
    environment = 1u << 1,      // read from BLOOMERY_<NAME> too
    config_get = 1u << 2,       // CONFIG GET shows it
    rewrite = 1u << 3,          // CONFIG REWRITE writes it into the --config file
    any_case = 1u << 4,         // its choices are taken in any letter case
    adds_up = 1u << 5,          // redis.conf lines of it add up (`save 900 1` then `save 300 10`)
    two_words = 1u << 6,        // the command line takes it as one word or two (HOST PORT)
    derived_default = 1u << 7,  // its default follows another option: --help shows none
};
constexpr OptionUse operator|(OptionUse a, OptionUse b) {
    return static_cast<OptionUse>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr bool has(OptionUse set, OptionUse use) {
    return (static_cast<unsigned>(set) & static_cast<unsigned>(use)) != 0;
}
// What most options are: a flag, a file key, an environment variable and a
// CONFIG GET name.
inline constexpr OptionUse kSetting =
    OptionUse::command_line | OptionUse::environment | OptionUse::config_get;

// What CONFIG GET shows an option's value from.
struct OptionValues {
    const Config& config;  // as configured at start
    const RuntimeSettings& runtime;
    unsigned worker_threads = 0;  // the threads serving clients now
    std::string replicaof;        // the primary followed now, "HOST PORT"; "" for none
};

// Whether a setter only checks its value (CONFIG SET checks every pair
// before it changes anything) or also applies it.
enum class SetMode { check, apply };

struct OptionSpec;
// The option's text (flag, file or environment) into `config`, or what is
// wrong with it (the text after "--name: ").
using OptionReader = Status (*)(const OptionSpec& spec, Config& config, std::string_view text);
// CONFIG GET's text of the option.
using OptionShower = std::string (*)(const OptionValues& values);
// CONFIG SET: checks `text`, and with SetMode::apply puts it into
// `settings`; a refusal is Redis's reason (the text after "argument 'NAME')
// - ").
using OptionSetter = Status (*)(const OptionSpec& spec, RuntimeSettings& settings,
                                std::string_view text, SetMode mode);

struct OptionSpec {
    std::string_view name = {};   // the long flag without "--"
    std::string_view group = {};  // its heading in --help and docs/options.md
    std::string_view help = {};
    OptionKind kind = OptionKind::text;
    OptionUse use = kSetting;
    std::int64_t min = 0;  // inclusive bounds of integer and bytes
    std::int64_t max = 0;
    double min_real = 0;  // inclusive bounds of real
    double max_real = 0;
    std::span<const std::string_view> choices = {};  // of choice, in the order of their enum
    // CONFIG GET answers this name too (io-threads), CONFIG SET takes it.
    std::string_view redis_alias = {};
    std::string_view default_text = {};  // the default of an option without `show`
    OptionReader read = nullptr;         // null: the command line reads it itself
    OptionShower show = nullptr;         // null: not a setting CONFIG GET shows
    OptionSetter set = nullptr;          // null: fixed at start

    bool numeric() const {
        return kind == OptionKind::integer || kind == OptionKind::bytes || kind == OptionKind::real;
    }
};

// Every entry, in --help's order (group by group), then the names CONFIG
// GET answers for Redis's clients that no option sets (databases, ...).
std::span<const OptionSpec> option_specs();
// The entry named `name` (exactly, not an alias), or null.
const OptionSpec* find_option(std::string_view name);

// BLOOMERY_ and the name in capitals with '_' for '-' ("" if the option is
// not read from the environment).
std::string environment_variable(const OptionSpec& spec);
// What --help and docs/options.md show as the default ("" for none).
std::string default_text(const OptionSpec& spec);
// The values CONFIG GET would show on a server started with `config`
// (threads and replicaof as configured).
OptionValues values_at_start(const Config& config, const RuntimeSettings& runtime);

// "between MIN and MAX inclusive", the words CONFIG SET and the command line
// use for a value out of range.
std::string describe_range(const OptionSpec& spec);
// What is wrong with `shown` (the value as written, cut to 64 bytes) for a
// numeric option; `alternative` names another form the option takes.
std::string range_problem(const OptionSpec& spec, std::string_view shown,
                          std::string_view alternative = {});
// A numeric option's text as its number, checked against its range:
// integers by Redis's string2ll rules (core/parse_int64.hpp: no octal, hex,
// '+' or wrap-around of negatives), sizes after their suffix. The problem
// is range_problem's.
Result<std::int64_t> read_whole_number(const OptionSpec& spec, std::string_view text);
Result<double> read_real_number(const OptionSpec& spec, std::string_view text);
// A size with CLI11's suffixes (b, kb = 1024 bytes, mb, gb) as a decimal
// number of bytes; nothing if it is not one.
std::optional<std::string> size_without_suffix(std::string_view text);
// The shortest text that reads back as the same double ("0.01", "1e-09",
// "0.30000000000000004"): how ranges and CONFIG GET show real values.
std::string format_real(double value);

// The words of the choices kept as enums, as the spec reads and shows them.
std::string_view name_of(AppendFsync policy);
std::string_view name_of(DefaultLayout layout);
std::string_view name_of(DefaultScheme scheme);
std::string_view name_of(LogLevel level);
std::string_view name_of(TlsAuthClients mode);

}  // namespace bloomery::core
