#pragma once
// How the option spec's entries reach their values: readers that put an
// option's text into a Config member, showers that give CONFIG GET's text of
// one, and setters that change a RuntimeSettings value, each a template over
// the member it serves, so an entry names its field once
// (option_table.cpp). Shared by option_table.cpp and options.cpp only.

#include <string>
#include <string_view>
#include <type_traits>

#include "bloomery/core/options.hpp"

namespace bloomery::core::option_access {

// The words of the options kept as enums, in the order of the enumerators
// (config.hpp).
inline constexpr std::string_view kYesNoWords[] = {"yes", "no"};
inline constexpr std::string_view kTlsAuthClientsWords[] = {"yes", "no", "optional"};
inline constexpr std::string_view kLayoutWords[] = {"auto", "blocked", "classic"};
inline constexpr std::string_view kSchemeWords[] = {"bloomery", "redisbloom"};
inline constexpr std::string_view kDebugCommandWords[] = {"yes", "no", "local"};
inline constexpr std::string_view kAppendFsyncWords[] = {"always", "everysec", "no"};
inline constexpr std::string_view kLogLevelWords[] = {"trace", "debug",    "info", "warn",
                                                      "error", "critical", "off"};

// Which of the option's choices `text` is, or CLI11's "X not in {a,b}".
Result<std::size_t> choice_index(const OptionSpec& spec, std::string_view text);
// A CONFIG SET integer, with Redis's reasons for a refusal.
Result<std::int64_t> integer_to_set(const OptionSpec& spec, std::string_view text);

template <auto Member>
using MemberType = std::remove_cvref_t<decltype(std::declval<Config&>().*Member)>;

// ---- Readers: the option's text into Config::*Member ----

template <auto Member>
Status read_whole(const OptionSpec& spec, Config& config, std::string_view text) {
    const Result<std::int64_t> value = read_whole_number(spec, text);
    if (!value) return value.failure();
    config.*Member = static_cast<MemberType<Member>>(*value);
    return {};
}

template <auto Member>
Status read_real(const OptionSpec& spec, Config& config, std::string_view text) {
    const Result<double> value = read_real_number(spec, text);
    if (!value) return value.failure();
    config.*Member = *value;
    return {};
}

template <auto Member>
Status read_text(const OptionSpec&, Config& config, std::string_view text) {
    config.*Member = std::string(text);
    return {};
}

// A yes/no option into a bool, or a choice into its enum (the choices in
// the order of the enumerators).
template <auto Member>
Status read_choice(const OptionSpec& spec, Config& config, std::string_view text) {
    const Result<std::size_t> index = choice_index(spec, text);
    if (!index) return index.failure();
    if constexpr (std::is_same_v<MemberType<Member>, bool>) {
        config.*Member = *index == 0;
    } else {
        config.*Member = static_cast<MemberType<Member>>(*index);
    }
    return {};
}

// ---- Showers: CONFIG GET's text of Config::*Member ----

template <auto Member>
std::string show_whole(const OptionValues& values) {
    return std::to_string(values.config.*Member);
}

// A real value exactly, in its shortest form ("1e-09", "0.01"), not rounded
// to six digits.
template <auto Member>
std::string show_real(const OptionValues& values) {
    return format_real(values.config.*Member);
}

template <auto Member>
std::string show_text(const OptionValues& values) {
    return values.config.*Member;
}

template <auto Member, const auto& Words>
std::string show_choice(const OptionValues& values) {
    const auto value = values.config.*Member;
    if constexpr (std::is_same_v<decltype(value), const bool>) {
        return std::string(Words[value ? 0 : 1]);
    } else {
        return std::string(Words[static_cast<std::size_t>(value)]);
    }
}

// A password: never shown, only whether one is set.
template <auto Member>
std::string show_redacted(const OptionValues& values) {
    return (values.config.*Member).empty() ? "" : "<redacted>";
}

// ---- Run-time settings: CONFIG GET from, and CONFIG SET of, a RuntimeSettings value ----

template <auto Get>
std::string show_runtime(const OptionValues& values) {
    return std::to_string(Get(values.runtime));
}

template <auto Set>
Status set_whole(const OptionSpec& spec, RuntimeSettings& settings, std::string_view text,
                 SetMode mode) {
    const Result<std::int64_t> value = integer_to_set(spec, text);
    if (!value) return value.failure();
    if (mode == SetMode::apply) Set(settings, *value);
    return {};
}

// ---- Entries ----

template <auto Member>
constexpr OptionSpec whole(std::string_view name, std::string_view group, OptionKind kind,
                           std::int64_t min, std::int64_t max, std::string_view help) {
    return {.name = name,
            .group = group,
            .help = help,
            .kind = kind,
            .min = min,
            .max = max,
            .read = &read_whole<Member>,
            .show = &show_whole<Member>};
}

template <auto Member>
constexpr OptionSpec integer(std::string_view name, std::string_view group, std::int64_t min,
                             std::int64_t max, std::string_view help) {
    return whole<Member>(name, group, OptionKind::integer, min, max, help);
}

template <auto Member>
constexpr OptionSpec bytes(std::string_view name, std::string_view group, std::int64_t min,
                           std::int64_t max, std::string_view help) {
    return whole<Member>(name, group, OptionKind::bytes, min, max, help);
}

template <auto Member>
constexpr OptionSpec real(std::string_view name, std::string_view group, double min, double max,
                          std::string_view help) {
    return {.name = name,
            .group = group,
            .help = help,
            .kind = OptionKind::real,
            .min_real = min,
            .max_real = max,
            .read = &read_real<Member>,
            .show = &show_real<Member>};
}

template <auto Member>
constexpr OptionSpec text(std::string_view name, std::string_view group, std::string_view help) {
    return {.name = name,
            .group = group,
            .help = help,
            .read = &read_text<Member>,
            .show = &show_text<Member>};
}

template <auto Member, const auto& Words>
constexpr OptionSpec choice(std::string_view name, std::string_view group, std::string_view help) {
    return {.name = name,
            .group = group,
            .help = help,
            .kind = OptionKind::choice,
            .choices = Words,
            .read = &read_choice<Member>,
            .show = &show_choice<Member, Words>};
}

// An option the command line reads itself (a tool, or a file that holds
// another option's value): no CONFIG GET, no reader.
constexpr OptionSpec command_line_only(std::string_view name, std::string_view group,
                                       OptionKind kind, std::string_view help) {
    return {
        .name = name, .group = group, .help = help, .kind = kind, .use = OptionUse::command_line};
}

// `spec` as a setting CONFIG SET changes (and CONFIG REWRITE keeps): shown
// from, and set into, the RuntimeSettings.
constexpr OptionSpec run_time(OptionSpec spec, OptionShower show, OptionSetter set) {
    spec.use = spec.use | OptionUse::rewrite;
    spec.show = show;
    spec.set = set;
    return spec;
}

// `spec` under Redis's other name too (CONFIG GET answers it, CONFIG SET
// takes it).
constexpr OptionSpec also_named(OptionSpec spec, std::string_view redis_alias) {
    spec.redis_alias = redis_alias;
    return spec;
}

constexpr OptionSpec with_use(OptionSpec spec, OptionUse use) {
    spec.use = spec.use | use;
    return spec;
}

}  // namespace bloomery::core::option_access
