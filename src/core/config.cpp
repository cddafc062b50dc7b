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

#include "bloomery/cluster/topology.hpp"
#include "bloomery/core/parse_int64.hpp"

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
    // Replies such as COMMAND DOCS or CLIENT LIST run to tens of kilobytes.
    bytes("client-output-buffer-limit", 64 * kKb, kLongMax),
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
    // Redis takes up to 2^64 - 1; 2^63 - 1 (8 EiB) keeps every size a signed
    // 64-bit number.
    bytes("maxmemory", 0, kLongMax),
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
    integer("slowlog-log-slower-than", -1, kLongMax),  // -1: off, as Redis 7
    // Bounded for memory (see kSlowlogMaxLenLimit); Redis takes up to LONG_MAX.
    integer("slowlog-max-len", 0, static_cast<std::int64_t>(kSlowlogMaxLenLimit)),
    real("health-check-timeout", 0.01, 3600),
};

// What is wrong with `shown` (the value as written) for `range`;
// `alternative` names another form the option takes.
std::string range_problem(const OptionRange& range, std::string_view shown,
                          std::string_view alternative = {}) {
    std::string problem = range.kind == OptionKind::integer ? "must be an integer "
                          : range.kind == OptionKind::bytes
                              ? "must be a size in bytes (suffixes kb, mb, gb) "
                              : "must be a number ";
    problem += describe_range(range);
    problem += alternative;
    problem += ", got '";
    for (char c : shown.substr(0, 64)) problem.push_back(c < ' ' || c == 0x7f ? ' ' : c);
    problem += "'";
    return problem;
}

// A size with CLI11's suffixes (kb = 1024 bytes, as before) as a decimal
// number of bytes; false if it is not one.
bool size_without_suffix(std::string_view text, std::string& decimal) {
    decimal = text;
    try {
        return CLI::AsSizeValue(false)(decimal).empty();
    } catch (const CLI::Error&) {
        return false;
    }
}

// The range as the option's first validator: a size loses its suffix here,
// then the number is checked, so what CLI11 converts afterwards is always a
// decimal inside the range (CLI11 alone would read "010" as octal and "-1"
// into an unsigned option as 2^64 - 1).
CLI::Validator range_validator(const OptionRange& range) {
    const std::string bounds =
        range.kind == OptionKind::real
            ? format_real(range.min_real) + " - " + format_real(range.max_real)
            : std::to_string(range.min) + " - " + std::to_string(range.max);
    const std::string description = range.kind == OptionKind::bytes
                                        ? "SIZE in [" + bounds + "] (b, kb, mb, gb)"
                                        : "in [" + bounds + "]";
    return CLI::Validator(
        [range](std::string& value) -> std::string {
            std::string number = value;
            if (range.kind == OptionKind::bytes && !size_without_suffix(value, number)) {
                return range_problem(range, value);
            }
            if (!check_option_value(range, number).empty()) return range_problem(range, value);
            value = number;
            return {};
        },
        description);
}

// Gives every numeric option its range from kOptionRanges. A numeric option
// missing from the table is a mistake in this file, found by the first test
// that parses a command line. (--maxmemory, a text option that also takes a
// percentage, checks its table entry in parse_memory_limit.)
void attach_option_ranges(CLI::App& app) {
    for (CLI::Option* option : app.get_options()) {
        const std::string type = option->get_type_name();
        if (option->get_lnames().empty() ||
            (type.rfind("INT", 0) != 0 && type.rfind("UINT", 0) != 0 &&
             type.rfind("FLOAT", 0) != 0)) {
            continue;
        }
        const OptionRange* range = find_option_range(option->get_lnames().front());
        if (range == nullptr) {
            throw std::logic_error("--" + option->get_lnames().front() +
                                   " is numeric but has no entry in kOptionRanges");
        }
        option->transform(range_validator(*range));
    }
}

}  // namespace

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

namespace {

// The memory this process may use: the cgroup limit of its container (v2
// memory.max, else v1 memory.limit_in_bytes) when there is one, else the
// machine's physical memory.
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

}  // namespace

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
    if (digits.empty() || digits.size() > 5 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        (value = std::stoull(digits)) == 0 || value > 65535) {
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

namespace {

// --requirepass-file: the whole file is the password, less one trailing
// newline ("\n" or "\r\n"), so `echo pw > file` and a Kubernetes Secret made
// from such a file both work. An empty password is refused: an unfilled
// secret must not silently leave the server without one.
std::string read_password_file(const std::string& path, const char* flag = "--requirepass-file") {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw CLI::ValidationError(flag, "cannot read " + path + ": " + std::strerror(errno));
    }
    std::string password((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) {
        throw CLI::ValidationError(flag, "cannot read " + path + ": " + std::strerror(errno));
    }
    if (!password.empty() && password.back() == '\n') {
        password.pop_back();
        if (!password.empty() && password.back() == '\r') password.pop_back();
    }
    if (password.empty()) throw CLI::ValidationError(flag, path + " is empty");
    return password;
}

}  // namespace

std::string host_name() {
    if (const char* name = std::getenv("HOSTNAME"); name != nullptr && *name != '\0') return name;
    char buffer[HOST_NAME_MAX + 1] = {};
    if (gethostname(buffer, sizeof buffer - 1) != 0) return "";
    return buffer;
}

namespace {
std::string first_label(std::string_view name) {
    std::string label(name.substr(0, name.find('.')));
    for (char& c : label) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
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
    if (c.cluster_enabled && c.cluster) {
        // In a cluster the map says who replicates whom (a replica's
        // --replicaof defaults to its primary there).
        const cluster::Node& self = c.cluster->self();
        const std::string named = c.replicaof_host + ":" + std::to_string(c.replicaof_port);
        if (self.primary && !c.replicaof_host.empty()) {
            problems.push_back("--replicaof: " + self.address +
                               " is a primary in --cluster-slots; it cannot be a replica");
        } else if (!self.primary && named != c.cluster->nodes()[self.primary_index].address) {
            problems.push_back("--replicaof: " + named + " is not " + self.address +
                               "'s primary in --cluster-slots (" +
                               c.cluster->nodes()[self.primary_index].address + ")");
        }
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

CommandLine parse_command_line(int argc, char** argv) {
    CommandLine result;
    Config& c = result.config;
    CLI::App app{
        "bloomery: a Bloom filter server speaking the Redis protocol (RedisBloom BF.* "
        "commands)"};
    app.set_version_flag("--version", std::string("bloomery ") + BLOOMERY_VERSION);
    app.set_config("--config", "", "Read options from a TOML/INI file (keys as the long flags)");
    app.get_config_ptr()->envname("BLOOMERY_CONFIG");
    app.option_defaults()->always_capture_default();

    auto* network = "Network";
    app.add_option("--bind", c.bind, "Address to listen on")
        ->envname("BLOOMERY_BIND")
        ->group(network);
    app.add_option("--port", c.port, "TCP port to listen on (0 = no plaintext listener)")
        ->envname("BLOOMERY_PORT")
        ->group(network);
    app.add_option("--threads", c.threads, "Worker threads, one io_context each (0 = one per core)")
        ->envname("BLOOMERY_THREADS")
        ->group(network);
    app.add_option("--maxclients", c.max_clients, "Maximum simultaneous client connections")
        ->envname("BLOOMERY_MAXCLIENTS")
        ->group(network);
    app.add_option("--timeout", c.timeout_seconds,
                   "Close idle clients after this many seconds (0 = never)")
        ->envname("BLOOMERY_TIMEOUT")
        ->group(network);

    auto* tls = "TLS";
    app.add_option("--tls-port", c.tls_port, "TLS port to listen on (0 = no TLS listener)")
        ->envname("BLOOMERY_TLS_PORT")
        ->group(tls);
    app.add_option("--tls-cert-file", c.tls_cert_file, "Server certificate chain (PEM)")
        ->envname("BLOOMERY_TLS_CERT_FILE")
        ->group(tls);
    app.add_option("--tls-key-file", c.tls_key_file, "Server private key (PEM)")
        ->envname("BLOOMERY_TLS_KEY_FILE")
        ->group(tls);
    app.add_option("--tls-ca-cert-file", c.tls_ca_cert_file,
                   "CA certificates (PEM) that client certificates must chain to")
        ->envname("BLOOMERY_TLS_CA_CERT_FILE")
        ->group(tls);
    std::string tls_auth_clients = "yes";
    app.add_option("--tls-auth-clients", tls_auth_clients,
                   "Client certificates: yes (required), no (not asked for), optional "
                   "(verified if sent)")
        ->envname("BLOOMERY_TLS_AUTH_CLIENTS")
        ->check(CLI::IsMember({"yes", "no", "optional"}))
        ->group(tls);
    app.add_option("--tls-handshake-timeout", c.tls_handshake_timeout_seconds,
                   "Seconds a TLS client has to finish its handshake before it is closed")
        ->envname("BLOOMERY_TLS_HANDSHAKE_TIMEOUT")
        ->group(tls);

    auto* limits = "Protocol limits";
    app.add_option("--proto-max-bulk-len", c.proto_max_bulk_len,
                   "Largest bulk string a client may send, bytes (suffixes kb, mb, gb)")
        ->envname("BLOOMERY_PROTO_MAX_BULK_LEN")
        ->group(limits);
    app.add_option("--proto-max-inline-len", c.proto_max_inline_len,
                   "Longest inline command line, bytes")
        ->envname("BLOOMERY_PROTO_MAX_INLINE_LEN")
        ->group(limits);
    app.add_option("--proto-max-multibulk-len", c.proto_max_multibulk_len,
                   "Most arguments in one command")
        ->envname("BLOOMERY_PROTO_MAX_MULTIBULK_LEN")
        ->group(limits);
    app.add_option("--client-query-buffer-limit", c.client_query_buffer_limit,
                   "Most unprocessed bytes buffered for one client before it is closed")
        ->envname("BLOOMERY_CLIENT_QUERY_BUFFER_LIMIT")
        ->group(limits);
    app.add_option("--client-output-buffer-limit", c.client_output_buffer_limit,
                   "Most reply bytes buffered for one client before it is closed")
        ->envname("BLOOMERY_CLIENT_OUTPUT_BUFFER_LIMIT")
        ->group(limits);

    auto* security = "Security";
    auto* requirepass_option =
        app.add_option("--requirepass", c.requirepass,
                       "Password of the default user (AUTH PASSWORD); empty: none. Prefer "
                       "BLOOMERY_REQUIREPASS or --requirepass-file: flags show in `ps`")
            ->envname("BLOOMERY_REQUIREPASS")
            ->group(security);
    std::string requirepass_file;
    auto* requirepass_file_option =
        app.add_option("--requirepass-file", requirepass_file,
                       "Read the default user's password from this file, less one trailing "
                       "newline (e.g. a mounted Kubernetes Secret)")
            ->envname("BLOOMERY_REQUIREPASS_FILE")
            ->group(security);
    app.add_option("--aclfile", c.aclfile,
                   "Users, passwords and allowed commands, one 'user NAME rule...' line each")
        ->envname("BLOOMERY_ACLFILE")
        ->group(security);
    std::string protected_mode = c.protected_mode ? "yes" : "no";
    app.add_option("--protected-mode", protected_mode,
                   "yes: while the default user has no password, serve only clients on the "
                   "loopback interface (127.0.0.1, ::1)")
        ->envname("BLOOMERY_PROTECTED_MODE")
        ->check(CLI::IsMember({"yes", "no"}))
        ->group(security);
    app.add_option("--unauthenticated-max-multibulk-len", c.unauthenticated_max_multibulk_len,
                   "Most arguments in one command before the client has authenticated")
        ->envname("BLOOMERY_UNAUTHENTICATED_MAX_MULTIBULK_LEN")
        ->group(security);
    app.add_option("--unauthenticated-max-bulk-len", c.unauthenticated_max_bulk_len,
                   "Largest bulk argument before the client has authenticated, bytes")
        ->envname("BLOOMERY_UNAUTHENTICATED_MAX_BULK_LEN")
        ->group(security);
    app.add_option("--unauthenticated-query-buffer-limit", c.unauthenticated_query_buffer_limit,
                   "Most unprocessed bytes buffered for a client that has not authenticated "
                   "before it is closed")
        ->envname("BLOOMERY_UNAUTHENTICATED_QUERY_BUFFER_LIMIT")
        ->group(security);

    auto* filters = "Filters";
    app.add_option("--bf-error-rate", c.default_error_rate,
                   "Error rate of filters created implicitly (BF.ADD, BF.MADD, BF.INSERT)")
        ->envname("BLOOMERY_BF_ERROR_RATE")
        ->group(filters);
    app.add_option("--bf-initial-size", c.default_capacity,
                   "Capacity of filters created implicitly")
        ->envname("BLOOMERY_BF_INITIAL_SIZE")
        ->group(filters);
    app.add_option("--bf-expansion-factor", c.default_expansion,
                   "Growth factor of sub-filters of filters created implicitly")
        ->envname("BLOOMERY_BF_EXPANSION_FACTOR")
        ->group(filters);
    app.add_option("--bf-default-layout", c.default_layout,
                   "Layout of filters created without LAYOUT: blocked (one cache line per "
                   "lookup, a few percent more bits) or classic")
        ->envname("BLOOMERY_BF_DEFAULT_LAYOUT")
        ->transform(CLI::IsMember({"blocked", "classic"}, CLI::ignore_case))
        ->group(filters);
    app.add_option("--max-filter-bytes", c.max_filter_bytes,
                   "Largest filter a client may create or grow, all sub-filters' bit arrays "
                   "together, bytes (suffixes kb, mb, gb; 0 = no limit)")
        ->envname("BLOOMERY_MAX_FILTER_BYTES")
        ->group(filters);
    app.add_option("--keyspace-shards", c.keyspace_shards, "Lock shards of the keyspace")
        ->envname("BLOOMERY_KEYSPACE_SHARDS")
        ->group(filters);

    auto* memory = "Memory";
    std::string maxmemory_spec = "0";
    app.add_option("--maxmemory", maxmemory_spec,
                   "Most bytes held for filters, keys and client buffers before commands that "
                   "allocate answer -OOM: a size (suffixes kb, mb, gb) or a percentage of the "
                   "container's memory limit (cgroup), else of physical memory, e.g. 75%; "
                   "0 = no limit")
        ->envname("BLOOMERY_MAXMEMORY")
        ->group(memory);

    auto* persistence = "Persistence";
    app.add_option("--dir", c.dir, "Directory for snapshots (created if missing)")
        ->envname("BLOOMERY_DIR")
        ->group(persistence);
    app.add_option("--dbfilename", c.dbfilename, "Snapshot file name inside --dir")
        ->envname("BLOOMERY_DBFILENAME")
        ->group(persistence);
    std::string save_spec = format_save_points(c.save_points);
    app.add_option("--save", save_spec,
                   "Save points 'SECONDS CHANGES ...': snapshot after SECONDS if at least CHANGES "
                   "writes; \"\" disables periodic snapshots")
        ->envname("BLOOMERY_SAVE")
        ->group(persistence);
    std::string stop_writes = c.stop_writes_on_bgsave_error ? "yes" : "no";
    app.add_option("--stop-writes-on-bgsave-error", stop_writes,
                   "yes: while the last snapshot failed, refuse writes with -MISCONF until one "
                   "succeeds (reads are still served)")
        ->envname("BLOOMERY_STOP_WRITES_ON_BGSAVE_ERROR")
        ->check(CLI::IsMember({"yes", "no"}))
        ->group(persistence);
    app.add_option("--check-snapshot", result.check_snapshot,
                   "Verify a snapshot file, print what it holds, and exit")
        ->group(persistence);
    std::string appendonly = c.appendonly ? "yes" : "no";
    app.add_option("--appendonly", appendonly,
                   "yes: journal every change (README \"Durability\"), so adds since the last "
                   "snapshot survive a crash")
        ->envname("BLOOMERY_APPENDONLY")
        ->check(CLI::IsMember({"yes", "no"}))
        ->group(persistence);
    app.add_option("--appendfsync", c.appendfsync,
                   "always: reply after the journal record is on disk (group commit); everysec: "
                   "fsync once a second; no: leave it to the OS")
        ->envname("BLOOMERY_APPENDFSYNC")
        ->check(CLI::IsMember({"always", "everysec", "no"}))
        ->group(persistence);
    app.add_option("--appendfilename", c.appendfilename,
                   "Journal segment name inside --dir (files NAME.<offset>)")
        ->envname("BLOOMERY_APPENDFILENAME")
        ->group(persistence);
    app.add_option("--auto-aof-rewrite-percentage", c.auto_aof_rewrite_percentage,
                   "Snapshot (dropping the journal it covers) when the journal grew by this "
                   "percentage since the last one; 0 disables")
        ->envname("BLOOMERY_AUTO_AOF_REWRITE_PERCENTAGE")
        ->group(persistence);
    app.add_option("--auto-aof-rewrite-min-size", c.auto_aof_rewrite_min_size,
                   "...and is at least this large (suffixes kb, mb, gb)")
        ->envname("BLOOMERY_AUTO_AOF_REWRITE_MIN_SIZE")
        ->group(persistence);
    app.add_option("--journal-buffer-limit", c.journal_buffer_limit,
                   "Journal bytes not yet on disk past which writes are refused with -MISCONF "
                   "(a disk slower than the clients)")
        ->envname("BLOOMERY_JOURNAL_BUFFER_LIMIT")
        ->group(persistence);
    app.add_option("--check-journal", result.check_journal,
                   "Verify a journal segment, print what it holds, and exit (1 if bad)")
        ->group(persistence);
    app.add_flag("--fix", result.fix_journal,
                 "With --check-journal: cut a bad tail off at the last good record")
        ->group(persistence);

    auto* replication = "Replication";
    std::string replicaof;
    app.add_option("--replicaof", replicaof,
                   "\"HOST PORT\": start as a replica of that primary (a full copy, then its "
                   "journal's records as they happen; REPLICAOF at run time)")
        ->envname("BLOOMERY_REPLICAOF")
        ->group(replication);
    app.add_option("--masteruser", c.masteruser, "User to AUTH as on the primary")
        ->envname("BLOOMERY_MASTERUSER")
        ->group(replication);
    std::string masterauth_file;
    auto* masterauth_option =
        app.add_option("--masterauth", c.masterauth, "Password to AUTH with on the primary")
            ->envname("BLOOMERY_MASTERAUTH")
            ->group(replication);
    auto* masterauth_file_option =
        app.add_option("--masterauth-file", masterauth_file,
                       "Read --masterauth from this file (a Kubernetes Secret)")
            ->envname("BLOOMERY_MASTERAUTH_FILE")
            ->group(replication);
    app.add_option("--repl-backlog-size", c.repl_backlog_size,
                   "Journal kept for replicas to resume from after a cut, beyond what the last "
                   "snapshot needs (suffixes kb, mb, gb)")
        ->envname("BLOOMERY_REPL_BACKLOG_SIZE")
        ->group(replication);
    app.add_option("--repl-backlog-ttl", c.repl_backlog_ttl_seconds,
                   "Seconds the journal is kept for a replica that disconnected")
        ->envname("BLOOMERY_REPL_BACKLOG_TTL")
        ->group(replication);
    app.add_option("--repl-timeout", c.repl_timeout_seconds,
                   "Seconds without a byte from the primary (or an ack from a replica) before "
                   "the link is dropped and resumed")
        ->envname("BLOOMERY_REPL_TIMEOUT")
        ->group(replication);
    std::string serve_stale = c.replica_serve_stale_data ? "yes" : "no";
    app.add_option("--replica-serve-stale-data", serve_stale,
                   "yes: a replica whose link is down serves the data it has; no: -MASTERDOWN")
        ->envname("BLOOMERY_REPLICA_SERVE_STALE_DATA")
        ->check(CLI::IsMember({"yes", "no"}))
        ->group(replication);
    app.add_option("--repl-ping-replica-period", c.repl_ping_replica_period_seconds,
                   "Seconds between keepalive records sent to replicas")
        ->envname("BLOOMERY_REPL_PING_REPLICA_PERIOD")
        ->group(replication);
    app.add_option("--shutdown-timeout", c.shutdown_timeout_seconds,
                   "Seconds SHUTDOWN and SIGTERM give replicas, once the clients are gone, to "
                   "acknowledge every write (0 = no wait; SHUTDOWN NOW skips it)")
        ->envname("BLOOMERY_SHUTDOWN_TIMEOUT")
        ->group(replication);
    auto* cluster_group = "Cluster";
    std::string cluster_enabled = "no";
    app.add_option("--cluster-enabled", cluster_enabled,
                   "yes: Redis Cluster protocol with the static --cluster-slots map (keys of "
                   "other nodes' slots answer -MOVED)")
        ->envname("BLOOMERY_CLUSTER_ENABLED")
        ->check(CLI::IsMember({"yes", "no"}))
        ->group(cluster_group);
    std::string cluster_slots;
    auto* cluster_slots_option =
        app.add_option("--cluster-slots", cluster_slots,
                       "Slot map, the same on every node: RANGE=host:port[|replica:port...],... "
                       "covering slots 0-16383 once, e.g. "
                       "\"0-8191=a:6379,8192-16383=b:6379\"")
            ->envname("BLOOMERY_CLUSTER_SLOTS")
            ->group(cluster_group);
    std::string cluster_self;
    auto* cluster_self_option =
        app.add_option("--cluster-self", cluster_self,
                       "This node's host:port in --cluster-slots, or auto: the N of a host name "
                       "ending in -N (StatefulSet pod) picks the N-th node (primaries in slot "
                       "order, then replicas)")
            ->envname("BLOOMERY_CLUSTER_SELF")
            ->group(cluster_group);
    auto* monitoring = "Monitoring";
    app.add_option("--metrics-port", c.metrics_port,
                   "HTTP port for /metrics (Prometheus), /healthz and /readyz (0 = off)")
        ->envname("BLOOMERY_METRICS_PORT")
        ->group(monitoring);
    app.add_option("--metrics-bind", c.metrics_bind,
                   "Address of the HTTP listener (default: the same as --bind)")
        ->envname("BLOOMERY_METRICS_BIND")
        ->group(monitoring);
    app.add_option("--metrics-max-connections", c.metrics_max_connections,
                   "Most simultaneous HTTP connections; at the bound a new connection replaces "
                   "the one waiting longest for its request")
        ->envname("BLOOMERY_METRICS_MAX_CONNECTIONS")
        ->group(monitoring);
    app.add_option("--metrics-max-connections-per-client", c.metrics_max_connections_per_client,
                   "Most simultaneous HTTP connections from one client address; at either "
                   "bound a new connection replaces the one waiting longest for its request")
        ->envname("BLOOMERY_METRICS_MAX_CONNECTIONS_PER_CLIENT")
        ->group(monitoring);
    app.add_option("--metrics-max-request-bytes", c.metrics_max_request_bytes,
                   "Largest HTTP request line and headers, bytes; larger requests are refused "
                   "(431) and closed")
        ->envname("BLOOMERY_METRICS_MAX_REQUEST_BYTES")
        ->group(monitoring);
    app.add_option("--metrics-request-timeout", c.metrics_request_timeout_seconds,
                   "Seconds an HTTP client has to send a whole request (and to read the reply) "
                   "before it is closed")
        ->envname("BLOOMERY_METRICS_REQUEST_TIMEOUT")
        ->group(monitoring);
    app.add_option("--slowlog-log-slower-than", c.slowlog_log_slower_than_us,
                   "Log commands that took at least this many microseconds in SLOWLOG "
                   "(-1 = off, 0 = every command); also CONFIG SET")
        ->envname("BLOOMERY_SLOWLOG_LOG_SLOWER_THAN")
        ->group(monitoring);
    app.add_option("--slowlog-max-len", c.slowlog_max_len,
                   "Most SLOWLOG entries kept (the oldest go first); also CONFIG SET")
        ->envname("BLOOMERY_SLOWLOG_MAX_LEN")
        ->group(monitoring);
    app.add_flag("--test-config", result.test_config,
                 "Check flags, config file and environment (and the files they name) without "
                 "binding or loading; print what is wrong or 'configuration OK'; exit 1 or 0")
        ->group(monitoring);
    app.add_option("--health-check", result.health_check,
                   "HOST:PORT: PING that server over the protocol (with AUTH when a password is "
                   "configured) and exit 0 on PONG, 1 otherwise; for container health checks")
        ->group(monitoring);
    app.add_flag("--health-check-tls", result.health_check_tls,
                 "With --health-check: connect over TLS, verifying the server with "
                 "--tls-ca-cert-file and presenting --tls-cert-file/--tls-key-file if set")
        ->group(monitoring);
    app.add_option("--health-check-timeout", result.health_check_timeout_seconds,
                   "With --health-check: seconds for the whole check (connect, AUTH, PING)")
        ->group(monitoring);

    auto* logging = "Logging";
    app.add_option("--loglevel", c.log_level, "Log level")
        ->envname("BLOOMERY_LOGLEVEL")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
        ->group(logging);
    app.add_option("--logfile", c.log_file, "Log to this file instead of stderr")
        ->envname("BLOOMERY_LOGFILE")
        ->group(logging);

    attach_option_ranges(app);

    // With --test-config every problem is reported and the exit code is 1;
    // the flag is looked for in argv itself, as a parse error may come
    // before CLI11 has set it.
    bool testing = false;
    for (int i = 1; i < argc; ++i) {
        if (std::string_view(argv[i]) == "--test-config") testing = true;
    }
    Problems problems;
    try {
        app.parse(argc, argv);
        // Conversions CLI11 cannot do: each failure is one more problem.
        std::string error;
        if (!parse_save_spec(save_spec, c.save_points, error))
            problems.push_back("--save: " + error);
        std::string maxmemory_error;
        if (!parse_memory_limit(maxmemory_spec, c.maxmemory, maxmemory_error)) {
            problems.push_back("--maxmemory: " + maxmemory_error);
        }
        c.stop_writes_on_bgsave_error = stop_writes == "yes";
        c.appendonly = appendonly == "yes";
        c.tls_auth_clients = tls_auth_clients == "no"         ? TlsAuthClients::no
                             : tls_auth_clients == "optional" ? TlsAuthClients::optional
                                                              : TlsAuthClients::yes;
        if (requirepass_option->count() > 0 && requirepass_file_option->count() > 0) {
            problems.push_back(
                "--requirepass-file: give the password once: --requirepass (or "
                "BLOOMERY_REQUIREPASS) or --requirepass-file, not both");
        } else if (!requirepass_file.empty()) {
            try {
                c.requirepass = read_password_file(requirepass_file);
            } catch (const CLI::ValidationError& e) {
                problems.push_back(e.what());
            }
        }
        if (masterauth_option->count() > 0 && masterauth_file_option->count() > 0) {
            problems.push_back(
                "--masterauth-file: give the primary's password once: --masterauth (or "
                "BLOOMERY_MASTERAUTH) or --masterauth-file, not both");
        } else if (!masterauth_file.empty()) {
            try {
                c.masterauth = read_password_file(masterauth_file, "--masterauth-file");
            } catch (const CLI::ValidationError& e) {
                problems.push_back(e.what());
            }
        }
        c.replica_serve_stale_data = serve_stale == "yes";
        if (!replicaof.empty() &&
            !parse_replicaof(replicaof, c.replicaof_host, c.replicaof_port, error)) {
            problems.push_back("--replicaof: " + error);
        }
        c.protected_mode = protected_mode == "yes";
        c.cluster_enabled = cluster_enabled == "yes";
        if (c.cluster_enabled) {
            std::string cluster_error;
            auto topology = cluster_slots.empty()
                                ? std::nullopt
                                : cluster::parse_topology(cluster_slots, cluster_self, host_name(),
                                                          cluster_error);
            if (cluster_slots.empty()) {
                problems.push_back("--cluster-slots: --cluster-enabled yes needs the slot map");
            } else if (!topology) {
                problems.push_back("--cluster-slots: " + cluster_error);
            } else {
                c.cluster = std::make_shared<const cluster::Topology>(std::move(*topology));
                // A replica in the map copies its primary: --replicaof comes
                // from the map unless given (check_replication compares them).
                const cluster::Node& self = c.cluster->self();
                if (!self.primary && c.replicaof_host.empty()) {
                    const cluster::Node& primary = c.cluster->nodes()[self.primary_index];
                    c.replicaof_host = primary.host;
                    c.replicaof_port = primary.port;
                }
            }
        } else if (cluster_slots_option->count() > 0 || cluster_self_option->count() > 0) {
            // A map without cluster mode would be silently ignored: every key
            // served here, nothing redirected. Say so instead.
            problems.push_back(
                "--cluster-slots: --cluster-slots and --cluster-self need --cluster-enabled yes");
        }
    } catch (const CLI::ParseError& e) {
        if (testing && e.get_exit_code() != 0) {
            std::cerr << "bloomery: configuration invalid:\n  " << e.what() << '\n';
            result.exit_code = 1;
            return result;
        }
        result.exit_code = app.exit(e);
        return result;
    }
    for (std::string& problem : check_config_values(c)) problems.push_back(std::move(problem));
    if (!problems.empty()) {
        if (testing) {
            result.problems = std::move(problems);  // main adds the start-up checks' and prints
        } else {
            for (const std::string& problem : problems) std::cerr << problem << '\n';
            std::cerr << "Run with --help for more information.\n";
            result.exit_code = 1;
            return result;
        }
    }
    if (auto* config_option = app.get_config_ptr(); config_option && config_option->count() > 0) {
        c.config_file = config_option->as<std::string>();
    }
    if (c.threads == 0) c.threads = std::max(1u, std::thread::hardware_concurrency());
    return result;
}

}  // namespace bloomery::core
