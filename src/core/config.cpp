#include "bloomery/core/config.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "bloomery/core/ascii.hpp"
#include "bloomery/core/parse_int64.hpp"
#include "bloomery/core/printable.hpp"

namespace bloomery::core {

// ---- Ranges of the numeric options ----

namespace {

// Redis's bounds (config.c) where Redis has the option, so a value Redis
// takes is taken here and one it refuses is refused; bloomery's own options
// say why theirs.
constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();  // Redis's int options
constexpr std::int64_t kLongMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kKb = 1024;
constexpr std::int64_t kMb = 1024 * kKb;

constexpr OptionRange integer(std::string_view name, std::int64_t min, std::int64_t max) {
    return {name, OptionKind::integer, min, max};
}
constexpr OptionRange bytes(std::string_view name, std::int64_t min, std::int64_t max) {
    return {name, OptionKind::bytes, min, max};
}
constexpr OptionRange real(std::string_view name, double min, double max) {
    return {name, OptionKind::real, 0, 0, min, max};
}

constexpr OptionRange kOptionRanges[] = {
    integer("port", 0, 65535),
    integer("threads", 0, 256),  // 0: one per core
    integer("maxclients", 1, std::numeric_limits<unsigned>::max()),
    integer("timeout", 0, kIntMax),
    integer("tls-port", 0, 65535),
    real("tls-handshake-timeout", 0.001, 3600),
    // Redis's lower bound. The upper one is bloomery's: a journal record
    // holds up to two keys (RENAME's) and must stay under 2^31 bytes.
    bytes("proto-max-bulk-len", kMb, 512 * kMb),
    // An inline command is at most one line of arguments: the bulk bound.
    bytes("proto-max-inline-len", kKb, 512 * kMb),
    integer("proto-max-multibulk-len", 1, kIntMax),  // Redis refuses more than INT_MAX
    bytes("client-query-buffer-limit", kMb, kLongMax),
    // AUTH needs its three arguments (AUTH user password).
    integer("unauthenticated-max-multibulk-len", 3, 1 << 20),
    // Room for a user name or a password; at most what an authenticated
    // client may send.
    bytes("unauthenticated-max-bulk-len", kKb, 512 * kMb),
    // At least one argument of the default unauthenticated-max-bulk-len.
    bytes("unauthenticated-query-buffer-limit", 16 * kKb, kLongMax),
    real("bf-error-rate", 1e-15, 0.999999),  // bloom/bounds.hpp's, as BF.RESERVE's
    integer("bf-initial-size", 1, std::int64_t{1} << 40),
    integer("bf-expansion-factor", 1, 32768),  // RedisBloom's bound
    bytes("max-filter-bytes", 0, kLongMax),    // 0: no limit
    integer("keyspace-shards", 1, 65536),
    integer("lfu-log-factor", 0, kIntMax),  // Redis's bounds
    integer("lfu-decay-time", 0, kIntMax),
    // Redis takes up to 2^64 - 1; 2^63 - 1 (8 EiB) keeps every size a signed
    // 64-bit number.
    bytes("maxmemory", 0, kLongMax),
    // Redis's bounds for the size form (its percentage form: 0% to 100%).
    bytes("maxmemory-clients", 0, kLongMax),
    integer("auto-aof-rewrite-percentage", 0, kIntMax),
    bytes("auto-aof-rewrite-min-size", 0, kLongMax),
    // A disk slower than the clients holds at most this much in memory.
    bytes("journal-buffer-limit", kMb, std::int64_t{1} << 40),
    bytes("repl-backlog-size", 1, kLongMax),
    // Redis takes up to LONG_MAX; the TTL is compared in milliseconds here.
    integer("repl-backlog-ttl", 0, kLongMax / 1000),
    integer("repl-timeout", 1, kIntMax),
    integer("repl-ping-replica-period", 1, kIntMax),
    integer("shutdown-timeout", 0, kIntMax),  // Redis's bounds
    integer("metrics-port", 0, 65535),
    // A hostile HTTP client holds at most one slot and this many bytes.
    integer("metrics-max-connections", 1, 1024),
    integer("metrics-max-connections-per-client", 1, 1024),
    bytes("metrics-max-request-bytes", 512, kMb),
    real("metrics-request-timeout", 0.01, 3600),
    integer("latency-monitor-threshold", 0, kLongMax),  // Redis's bounds
    integer("slowlog-log-slower-than", -1, kLongMax),   // -1: off, as Redis 7
    // Bounded for memory (see kSlowlogMaxLenLimit); Redis takes up to LONG_MAX.
    integer("slowlog-max-len", 0, static_cast<std::int64_t>(kSlowlogMaxLenLimit)),
    real("health-check-timeout", 0.01, 3600),
};

}  // namespace

std::string range_problem(const OptionRange& range, std::string_view shown,
                          std::string_view alternative) {
    std::string problem = range.kind == OptionKind::integer ? "must be an integer "
                          : range.kind == OptionKind::bytes
                              ? "must be a size in bytes (suffixes kb, mb, gb) "
                              : "must be a number ";
    problem += describe_range(range);
    problem += alternative;
    problem += ", got '";
    append_printable(problem, shown);
    problem += "'";
    return problem;
}

bool size_without_suffix(std::string_view text, std::string& decimal) {
    decimal = text;
    try {
        return CLI::AsSizeValue(false)(decimal).empty();
    } catch (const CLI::Error&) {
        return false;
    }
}

std::string format_real(double value) {
    char text[32];  // the longest shortest form, "-2.2250738585072014e-308", takes 24
    const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
    return ec == std::errc() ? std::string(text, end) : std::to_string(value);
}

std::span<const OptionRange> option_ranges() {
    return kOptionRanges;
}

const OptionRange* find_option_range(std::string_view name) {
    for (const OptionRange& range : kOptionRanges) {
        if (range.name == name) return &range;
    }
    return nullptr;
}

std::string describe_range(const OptionRange& range) {
    if (range.kind == OptionKind::real) {
        return "between " + format_real(range.min_real) + " and " + format_real(range.max_real) +
               " inclusive";
    }
    return "between " + std::to_string(range.min) + " and " + std::to_string(range.max) +
           " inclusive";
}

std::string check_option_value(const OptionRange& range, std::string_view text) {
    if (range.kind == OptionKind::real) {
        // strtod needs a terminator; whitespace, NaN and trailing bytes are refused.
        const std::string copy(text);
        char* end = nullptr;
        const double value = copy.empty() || std::isspace(static_cast<unsigned char>(copy[0]))
                                 ? std::nan("")
                                 : std::strtod(copy.c_str(), &end);
        if (end != copy.c_str() + copy.size() || !(value >= range.min_real) ||
            !(value <= range.max_real)) {
            return range_problem(range, text);
        }
        return {};
    }
    std::int64_t value = 0;
    if (!parse_int64(text, value) || value < range.min || value > range.max) {
        return range_problem(range, text);
    }
    return {};
}

bool parse_save_spec(const std::string& spec, std::vector<SavePoint>& out, std::string& error) {
    out.clear();
    std::istringstream words(spec);
    std::vector<std::string> tokens;
    for (std::string word; words >> word;) tokens.push_back(word);
    if (tokens.size() == 1 && tokens[0] == "\"\"") tokens.clear();
    if (tokens.size() % 2 != 0) {
        error = "save needs pairs of 'SECONDS CHANGES', got '" + spec + "'";
        return false;
    }
    for (std::size_t i = 0; i < tokens.size(); i += 2) {
        // Redis's rule: at least one second, any number of changes.
        std::int64_t seconds = 0, changes = 0;
        if (!parse_int64(tokens[i], seconds) || !parse_int64(tokens[i + 1], changes) ||
            seconds < 1 || changes < 0) {
            error = "invalid save point '" + tokens[i] + " " + tokens[i + 1] +
                    "': SECONDS must be an integer between 1 and 9223372036854775807 inclusive, "
                    "CHANGES one between 0 and 9223372036854775807 inclusive";
            return false;
        }
        out.push_back({seconds, changes});
    }
    return true;
}

// The cgroup limit: v2 memory.max, else v1 memory.limit_in_bytes.
std::uint64_t memory_available() {
    for (const char* path :
         {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
        std::ifstream file(path);
        std::string text;
        if (!(file >> text) || text == "max") continue;
        try {
            const unsigned long long limit = std::stoull(text);
            // cgroup v1 reports "no limit" as a huge page-aligned number.
            if (limit > 0 && limit < (1ull << 60)) return limit;
        } catch (const std::exception&) {
        }
    }
    return static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) *
           static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

bool parse_memory_limit(const std::string& spec, std::uint64_t& bytes, std::string& error) {
    if (!spec.empty() && spec.back() == '%') {
        const std::string number = spec.substr(0, spec.size() - 1);
        double percent = 0;
        std::size_t used = 0;
        try {
            percent = std::stod(number, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (number.empty() || used != number.size() || !(percent > 0 && percent <= 100)) {
            error = "a percentage must be in (0, 100], got '" + spec + "'";
            return false;
        }
        bytes = static_cast<std::uint64_t>(static_cast<double>(memory_available()) * percent / 100);
        return true;
    }
    // A size, within the range kOptionRanges gives maxmemory.
    const OptionRange& range = *find_option_range("maxmemory");
    std::string decimal;
    std::int64_t value = 0;
    if (!size_without_suffix(spec, decimal) || !check_option_value(range, decimal).empty() ||
        !parse_int64(decimal, value)) {
        error = range_problem(range, spec, ", or a percentage such as 75%");
        return false;
    }
    bytes = static_cast<std::uint64_t>(value);
    return true;
}

// ---- client-output-buffer-limit ----

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;
// Redis's defaults (config.c), but for normal's hard limit (config.hpp).
constexpr OutputBufferLimit kDefaultOutputLimits[kClientClasses] = {
    {1024 * kMiB, 0, 0},          // normal
    {256 * kMiB, 64 * kMiB, 60},  // replica
    {32 * kMiB, 8 * kMiB, 60},    // pubsub
};
constexpr std::string_view kClassNames[kClientClasses] = {"normal", "slave", "pubsub"};

}  // namespace

bool memory_to_bytes(std::string_view text, std::uint64_t& out) {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0) return false;
    std::uint64_t number = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, number);
    if (ec != std::errc() || end != text.data() + digits) return false;
    const std::string unit = ascii_lower(text.substr(digits));
    std::uint64_t multiplier = 0;
    if (unit.empty() || unit == "b") {
        multiplier = 1;
    } else if (unit == "k") {
        multiplier = 1000;
    } else if (unit == "kb") {
        multiplier = 1024;
    } else if (unit == "m") {
        multiplier = 1000 * 1000;
    } else if (unit == "mb") {
        multiplier = kMiB;
    } else if (unit == "g") {
        multiplier = 1000ull * 1000 * 1000;
    } else if (unit == "gb") {
        multiplier = 1024 * kMiB;
    } else {
        return false;
    }
    if (number > std::numeric_limits<std::uint64_t>::max() / multiplier) return false;
    out = number * multiplier;
    return true;
}

namespace {

bool client_class_named(std::string_view name, ClientClass& out) {
    if (iequals(name, "normal")) {
        out = ClientClass::normal;
    } else if (iequals(name, "replica") || iequals(name, "slave")) {
        out = ClientClass::replica;
    } else if (iequals(name, "pubsub")) {
        out = ClientClass::pubsub;
    } else {
        return false;
    }
    return true;
}

}  // namespace

OutputBufferLimits::OutputBufferLimits() {
    for (unsigned i = 0; i < kClientClasses; ++i) {
        hard_[i].store(kDefaultOutputLimits[i].hard_bytes, std::memory_order_relaxed);
        soft_[i].store(kDefaultOutputLimits[i].soft_bytes, std::memory_order_relaxed);
        seconds_[i].store(kDefaultOutputLimits[i].soft_seconds, std::memory_order_relaxed);
    }
}

void OutputBufferLimits::copy_from(const OutputBufferLimits& other) {
    for (unsigned i = 0; i < kClientClasses; ++i) {
        set(static_cast<ClientClass>(i), other.get(static_cast<ClientClass>(i)));
    }
}

OutputBufferLimit OutputBufferLimits::get(ClientClass client_class) const {
    const auto i = static_cast<unsigned>(client_class);
    return {hard_[i].load(std::memory_order_relaxed), soft_[i].load(std::memory_order_relaxed),
            seconds_[i].load(std::memory_order_relaxed)};
}

void OutputBufferLimits::set(ClientClass client_class, const OutputBufferLimit& limit) {
    const auto i = static_cast<unsigned>(client_class);
    hard_[i].store(limit.hard_bytes, std::memory_order_relaxed);
    soft_[i].store(limit.soft_bytes, std::memory_order_relaxed);
    seconds_[i].store(limit.soft_seconds, std::memory_order_relaxed);
}

bool parse_output_buffer_limits(std::string_view spec, OutputBufferLimits& limits,
                                std::string& error) {
    std::vector<std::string_view> words;
    for (std::size_t i = 0; i < spec.size();) {
        while (i < spec.size() && (spec[i] == ' ' || spec[i] == '\t')) ++i;
        const std::size_t start = i;
        while (i < spec.size() && spec[i] != ' ' && spec[i] != '\t') ++i;
        if (i > start) words.push_back(spec.substr(start, i - start));
    }
    if (words.size() == 1) {
        // bloomery's earlier form: the normal class's hard limit alone.
        std::uint64_t hard = 0;
        if (!memory_to_bytes(words[0], hard)) {
            error = "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
            return false;
        }
        OutputBufferLimit normal = limits.get(ClientClass::normal);
        normal.hard_bytes = hard;
        limits.set(ClientClass::normal, normal);
        return true;
    }
    // Redis's checks and texts (config.c: updateClientOutputBufferLimit).
    if (words.size() % 4 != 0) {
        error = "Wrong number of arguments in buffer limit configuration.";
        return false;
    }
    std::vector<std::pair<ClientClass, OutputBufferLimit>> parsed;
    for (std::size_t i = 0; i < words.size(); i += 4) {
        ClientClass client_class{};
        if (!client_class_named(words[i], client_class)) {
            error = "Invalid client class specified in buffer limit configuration.";
            return false;
        }
        OutputBufferLimit limit;
        std::int64_t seconds = 0;
        if (!memory_to_bytes(words[i + 1], limit.hard_bytes) ||
            !memory_to_bytes(words[i + 2], limit.soft_bytes) ||
            !parse_int64(words[i + 3], seconds) || seconds < 0) {
            error = "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
            return false;
        }
        limit.soft_seconds = seconds;
        parsed.emplace_back(client_class, limit);
    }
    for (const auto& [client_class, limit] : parsed) limits.set(client_class, limit);
    return true;
}

std::string format_output_buffer_limits(const OutputBufferLimits& limits) {
    std::string out;
    for (unsigned i = 0; i < kClientClasses; ++i) {
        const OutputBufferLimit limit = limits.get(static_cast<ClientClass>(i));
        if (!out.empty()) out += ' ';
        out += kClassNames[i];
        out += ' ' + std::to_string(limit.hard_bytes) + ' ' + std::to_string(limit.soft_bytes) +
               ' ' + std::to_string(limit.soft_seconds);
    }
    return out;
}

std::string format_save_points(const std::vector<SavePoint>& points) {
    std::string spec;
    for (const SavePoint& point : points) {
        if (!spec.empty()) spec += ' ';
        spec += std::to_string(point.seconds) + " " + std::to_string(point.changes);
    }
    return spec;
}

bool parse_replicaof(const std::string& spec, std::string& host, std::uint16_t& port,
                     std::string& error) {
    // "HOST PORT" as Redis's replicaof directive; "HOST:PORT" is accepted too.
    std::string text = spec;
    const auto space = text.find_last_of(' ');
    const auto colon = text.find_last_of(':');
    std::size_t split = space != std::string::npos ? space : colon;
    if (split == std::string::npos || split == 0 || split + 1 >= text.size()) {
        error = "expected \"HOST PORT\", got '" + spec + "'";
        return false;
    }
    std::string name = text.substr(0, split);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    const std::string digits = text.substr(split + 1);
    std::uint64_t value = 0;
    if (!parse_digits(digits, 5, value) || value == 0 || value > 65535) {
        error = "port must be 1 to 65535, got '" + digits + "'";
        return false;
    }
    if (name.empty()) {
        error = "expected \"HOST PORT\", got '" + spec + "'";
        return false;
    }
    host = name;
    port = static_cast<std::uint16_t>(value);
    return true;
}

std::string host_name() {
    if (const char* name = std::getenv("HOSTNAME"); name != nullptr && *name != '\0') return name;
    char buffer[HOST_NAME_MAX + 1] = {};
    if (gethostname(buffer, sizeof buffer - 1) != 0) return "";
    return buffer;
}

namespace {
std::string first_label(std::string_view name) {
    std::string label(name.substr(0, name.find('.')));
    for (char& c : label) c = ascii_lower(c);
    return label;
}
}  // namespace

bool replicaof_names_self(const Config& config) {
    if (config.replicaof_host.empty() || config.replicaof_port != config.port) return false;
    const std::string self = host_name();
    return config.replicaof_host == config.bind ||
           (!self.empty() && first_label(config.replicaof_host) == first_label(self));
}

namespace {

// ---- Consistency checks over parsed values ----
// Each adds every problem it finds as "--option: what is wrong". They run on
// every start and for --test-config; a new option's check goes in
// kValueChecks below.

using Problems = std::vector<std::string>;

void check_listeners(const Config& c, Problems& problems) {
    if (c.port == 0 && c.tls_port == 0) {
        problems.push_back("--port: --port 0 needs a --tls-port: nothing to listen on");
    }
    if (c.tls_port != 0 && c.tls_port == c.port) {
        problems.push_back("--tls-port: must differ from --port");
    }
}

void check_tls(const Config& c, Problems& problems) {
    if (c.tls_port == 0) return;
    // Whether the files can be read and match is checked by the start-up
    // checks (net/startup_checks.hpp), which build the TLS context.
    if (c.tls_cert_file.empty() || c.tls_key_file.empty()) {
        problems.push_back("--tls-port: needs --tls-cert-file and --tls-key-file");
    }
    if (c.tls_auth_clients != TlsAuthClients::no && c.tls_ca_cert_file.empty()) {
        problems.push_back(
            "--tls-auth-clients: verifying client certificates needs --tls-ca-cert-file (or "
            "--tls-auth-clients no)");
    }
}

void check_file_names(const Config& c, Problems& problems) {
    if (c.appendfilename.empty() || c.appendfilename.find('/') != std::string::npos) {
        problems.push_back("--appendfilename: must be a plain file name");
    }
    if (c.dbfilename.empty() || c.dbfilename.find('/') != std::string::npos) {
        problems.push_back("--dbfilename: must be a plain file name");
    }
    if (c.dir.empty()) problems.push_back("--dir: must not be empty");
}

void check_metrics(const Config& c, Problems& problems) {
    if (c.metrics_port == 0) return;
    // Only when both listen on the same address could they collide; a
    // different --metrics-bind may well reuse the number.
    if (c.metrics_bind_address() == c.bind &&
        (c.metrics_port == c.port || c.metrics_port == c.tls_port)) {
        problems.push_back("--metrics-port: " + std::to_string(c.metrics_port) +
                           " is already the RESP port (--port / --tls-port)");
    }
}

void check_replication(const Config& c, Problems& problems) {
    if (c.repl_timeout_seconds <= c.repl_ping_replica_period_seconds) {
        problems.push_back(
            "--repl-timeout: must be longer than --repl-ping-replica-period, or an idle link "
            "would time out between keepalives");
    }
}

constexpr void (*kValueChecks[])(const Config&, Problems&) = {
    check_listeners, check_tls, check_file_names, check_metrics, check_replication,
};

}  // namespace

std::vector<std::string> check_config_values(const Config& config) {
    Problems problems;
    for (auto* check : kValueChecks) check(config, problems);
    return problems;
}

}  // namespace bloomery::core
