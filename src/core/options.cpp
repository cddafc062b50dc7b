// What every walker of the option spec shares: finding an entry, its
// environment variable and default, and reading numbers against its range.

#include "bloomery/core/options.hpp"

#include <CLI/CLI.hpp>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "bloomery/core/ascii.hpp"
#include "bloomery/core/parse_int64.hpp"
#include "bloomery/core/printable.hpp"
#include "option_access.hpp"

namespace bloomery::core {

const OptionSpec* find_option(std::string_view name) {
    for (const OptionSpec& spec : option_specs()) {
        if (spec.name == name) return &spec;
    }
    return nullptr;
}

std::string environment_variable(const OptionSpec& spec) {
    if (!has(spec.use, OptionUse::environment)) return {};
    std::string variable = "BLOOMERY_";
    for (const char c : spec.name) {
        variable += c == '-' ? '_' : c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    }
    return variable;
}

OptionValues values_at_start(const Config& config, const RuntimeSettings& runtime) {
    return OptionValues{config, runtime, config.threads,
                        config.replicaof_host.empty()
                            ? std::string()
                            : config.replicaof_host + " " + std::to_string(config.replicaof_port)};
}

std::string default_text(const OptionSpec& spec) {
    if (has(spec.use, OptionUse::derived_default)) return {};
    if (spec.show == nullptr) return std::string(spec.default_text);
    static const Config defaults;
    static const RuntimeSettings runtime(defaults);
    return spec.show(values_at_start(defaults, runtime));
}

std::string format_real(double value) {
    char text[32];  // the longest shortest form, "-2.2250738585072014e-308", takes 24
    const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
    return ec == std::errc() ? std::string(text, end) : std::to_string(value);
}

std::string describe_range(const OptionSpec& spec) {
    if (spec.kind == OptionKind::real) {
        return "between " + format_real(spec.min_real) + " and " + format_real(spec.max_real) +
               " inclusive";
    }
    return "between " + std::to_string(spec.min) + " and " + std::to_string(spec.max) +
           " inclusive";
}

std::string range_problem(const OptionSpec& spec, std::string_view shown,
                          std::string_view alternative) {
    std::string problem = spec.kind == OptionKind::integer ? "must be an integer "
                          : spec.kind == OptionKind::bytes
                              ? "must be a size in bytes (suffixes kb, mb, gb) "
                              : "must be a number ";
    problem += describe_range(spec);
    problem += alternative;
    problem += ", got '";
    append_printable(problem, shown);
    problem += "'";
    return problem;
}

std::optional<std::string> size_without_suffix(std::string_view text) {
    std::string decimal(text);
    try {
        if (CLI::AsSizeValue(false)(decimal).empty()) return decimal;
    } catch (const CLI::Error&) {
    }
    return std::nullopt;
}

Result<std::int64_t> read_whole_number(const OptionSpec& spec, std::string_view text) {
    std::string decimal(text);
    if (spec.kind == OptionKind::bytes) {
        std::optional<std::string> bytes = size_without_suffix(text);
        if (!bytes) return Error{range_problem(spec, text)};
        decimal = std::move(*bytes);
    }
    std::int64_t value = 0;
    if (!parse_int64(decimal, value) || value < spec.min || value > spec.max) {
        return Error{range_problem(spec, text)};
    }
    return value;
}

Result<double> read_real_number(const OptionSpec& spec, std::string_view text) {
    // strtod needs a terminator; whitespace, NaN and trailing bytes are refused.
    const std::string copy(text);
    char* end = nullptr;
    const double value = copy.empty() || std::isspace(static_cast<unsigned char>(copy[0]))
                             ? std::nan("")
                             : std::strtod(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size() || !(value >= spec.min_real) ||
        !(value <= spec.max_real)) {
        return Error{range_problem(spec, text)};
    }
    return value;
}

namespace option_access {

Result<std::size_t> choice_index(const OptionSpec& spec, std::string_view text) {
    const bool any_case = has(spec.use, OptionUse::any_case);
    for (std::size_t i = 0; i < spec.choices.size(); ++i) {
        if (any_case ? iequals(text, spec.choices[i]) : text == spec.choices[i]) return i;
    }
    // CLI11's words, which the command line has always answered with.
    std::string problem;
    append_printable(problem, text);
    problem += " not in {";
    for (std::size_t i = 0; i < spec.choices.size(); ++i) {
        if (i != 0) problem += ',';
        problem += spec.choices[i];
    }
    problem += '}';
    return Error{std::move(problem)};
}

Result<std::int64_t> integer_to_set(const OptionSpec& spec, std::string_view text) {
    // Redis's reasons (config.c), after "argument 'NAME') - ".
    std::int64_t value = 0;
    if (!parse_int64(text, value)) return Error{"argument couldn't be parsed into an integer"};
    if (value < spec.min || value > spec.max) {
        return Error{"argument must be " + describe_range(spec)};
    }
    return value;
}

}  // namespace option_access

std::string_view name_of(AppendFsync policy) {
    return option_access::kAppendFsyncWords[static_cast<std::size_t>(policy)];
}
std::string_view name_of(DefaultLayout layout) {
    return option_access::kLayoutWords[static_cast<std::size_t>(layout)];
}
std::string_view name_of(DefaultScheme scheme) {
    return option_access::kSchemeWords[static_cast<std::size_t>(scheme)];
}
std::string_view name_of(LogLevel level) {
    return option_access::kLogLevelWords[static_cast<std::size_t>(level)];
}
std::string_view name_of(TlsAuthClients mode) {
    return option_access::kTlsAuthClientsWords[static_cast<std::size_t>(mode)];
}

}  // namespace bloomery::core
