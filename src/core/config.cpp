#include "bloomery/core/config.hpp"

#include <unistd.h>

#include <charconv>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "bloomery/core/ascii.hpp"
#include "bloomery/core/options.hpp"
#include "bloomery/core/parse_int64.hpp"

namespace bloomery::core {

Result<std::vector<SavePoint>> parse_save_spec(std::string_view spec) {
    std::istringstream words{std::string(spec)};
    std::vector<std::string> tokens;
    for (std::string word; words >> word;) tokens.push_back(word);
    if (tokens.size() == 1 && tokens[0] == "\"\"") tokens.clear();
    if (tokens.size() % 2 != 0) {
        return Error{"save needs pairs of 'SECONDS CHANGES', got '" + std::string(spec) + "'"};
    }
    std::vector<SavePoint> points;
    for (std::size_t i = 0; i < tokens.size(); i += 2) {
        // Redis's rule: at least one second, any number of changes.
        std::int64_t seconds = 0, changes = 0;
        if (!parse_int64(tokens[i], seconds) || !parse_int64(tokens[i + 1], changes) ||
            seconds < 1 || changes < 0) {
            return Error{"invalid save point '" + tokens[i] + " " + tokens[i + 1] +
                         "': SECONDS must be an integer between 1 and 9223372036854775807 "
                         "inclusive, CHANGES one between 0 and 9223372036854775807 inclusive"};
        }
        points.push_back({seconds, changes});
    }
    return points;
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

Result<std::uint64_t> parse_memory_limit(std::string_view spec) {
    if (!spec.empty() && spec.back() == '%') {
        const std::string number(spec.substr(0, spec.size() - 1));
        double percent = 0;
        std::size_t used = 0;
        try {
            percent = std::stod(number, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (number.empty() || used != number.size() || !(percent > 0 && percent <= 100)) {
            return Error{"a percentage must be in (0, 100], got '" + std::string(spec) + "'"};
        }
        return static_cast<std::uint64_t>(static_cast<double>(memory_available()) * percent / 100);
    }
    // A size, within the range the option spec gives maxmemory.
    const OptionSpec& option = *find_option("maxmemory");
    const Result<std::int64_t> bytes = read_whole_number(option, spec);
    if (!bytes) return Error{range_problem(option, spec, ", or a percentage such as 75%")};
    return static_cast<std::uint64_t>(*bytes);
}

// ---- client-output-buffer-limit ----

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1024} * 1024;
// Redis's defaults (config.c), but for normal's hard limit (config.hpp).
constexpr OutputBufferLimit kDefaultOutputLimits[kClientClasses] = {
    {1024 * kMiB, 0, 0},          // normal
    {256 * kMiB, 64 * kMiB, 60},  // replica
    {32 * kMiB, 8 * kMiB, 60},    // pubsub
};
constexpr std::string_view kClassNames[kClientClasses] = {"normal", "slave", "pubsub"};

}  // namespace

std::optional<std::uint64_t> memory_to_bytes(std::string_view text) {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0) return std::nullopt;
    std::uint64_t number = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, number);
    if (ec != std::errc() || end != text.data() + digits) return std::nullopt;
    const std::string unit = ascii_lower(text.substr(digits));
    std::uint64_t multiplier = 0;
    if (unit.empty() || unit == "b") {
        multiplier = 1;
    } else if (unit == "k") {
        multiplier = 1000;
    } else if (unit == "kb") {
        multiplier = 1024;
    } else if (unit == "m") {
        multiplier = std::uint64_t{1000} * 1000;
    } else if (unit == "mb") {
        multiplier = kMiB;
    } else if (unit == "g") {
        multiplier = 1000ull * 1000 * 1000;
    } else if (unit == "gb") {
        multiplier = 1024 * kMiB;
    } else {
        return std::nullopt;
    }
    if (number > std::numeric_limits<std::uint64_t>::max() / multiplier) return std::nullopt;
    return number * multiplier;
}

namespace {

std::optional<ClientClass> client_class_named(std::string_view name) {
    if (iequals(name, "normal")) return ClientClass::normal;
    if (iequals(name, "replica") || iequals(name, "slave")) return ClientClass::replica;
    if (iequals(name, "pubsub")) return ClientClass::pubsub;
    return std::nullopt;
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

Status parse_output_buffer_limits(std::string_view spec, OutputBufferLimits& limits) {
    // Redis's texts (config.c: updateClientOutputBufferLimit).
    constexpr std::string_view kBadNumbers =
        "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
    std::vector<std::string_view> words;
    for (std::size_t i = 0; i < spec.size();) {
        while (i < spec.size() && (spec[i] == ' ' || spec[i] == '\t')) ++i;
        const std::size_t start = i;
        while (i < spec.size() && spec[i] != ' ' && spec[i] != '\t') ++i;
        if (i > start) words.push_back(spec.substr(start, i - start));
    }
    if (words.size() == 1) {
        // bloomery's earlier form: the normal class's hard limit alone.
        const std::optional<std::uint64_t> hard = memory_to_bytes(words[0]);
        if (!hard) return Error{std::string(kBadNumbers)};
        OutputBufferLimit normal = limits.get(ClientClass::normal);
        normal.hard_bytes = *hard;
        limits.set(ClientClass::normal, normal);
        return {};
    }
    if (words.size() % 4 != 0) {
        return Error{"Wrong number of arguments in buffer limit configuration."};
    }
    std::vector<std::pair<ClientClass, OutputBufferLimit>> parsed;
    for (std::size_t i = 0; i < words.size(); i += 4) {
        const std::optional<ClientClass> client_class = client_class_named(words[i]);
        if (!client_class) {
            return Error{"Invalid client class specified in buffer limit configuration."};
        }
        const std::optional<std::uint64_t> hard = memory_to_bytes(words[i + 1]);
        const std::optional<std::uint64_t> soft = memory_to_bytes(words[i + 2]);
        std::int64_t seconds = 0;
        if (!hard || !soft || !parse_int64(words[i + 3], seconds) || seconds < 0) {
            return Error{std::string(kBadNumbers)};
        }
        parsed.emplace_back(*client_class, OutputBufferLimit{*hard, *soft, seconds});
    }
    for (const auto& [client_class, limit] : parsed) limits.set(client_class, limit);
    return {};
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

Result<PrimaryAddress> parse_replicaof(std::string_view spec) {
    // "HOST PORT" as Redis's replicaof directive; "HOST:PORT" is accepted too.
    const std::string text(spec);
    const Error malformed{"expected \"HOST PORT\", got '" + text + "'"};
    const auto space = text.find_last_of(' ');
    const auto colon = text.find_last_of(':');
    std::size_t split = space != std::string::npos ? space : colon;
    if (split == std::string::npos || split == 0 || split + 1 >= text.size()) return malformed;
    std::string name = text.substr(0, split);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    const std::string digits = text.substr(split + 1);
    std::uint64_t value = 0;
    if (!parse_digits(digits, 5, value) || value == 0 || value > 65535) {
        return Error{"port must be 1 to 65535, got '" + digits + "'"};
    }
    if (name.empty()) return malformed;
    return PrimaryAddress{std::move(name), static_cast<std::uint16_t>(value)};
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
    // Over TLS a replica names its primary's TLS port.
    const std::uint16_t own_port =
        config.tls_replication && config.tls_port != 0 ? config.tls_port : config.port;
    if (config.replicaof_host.empty() || config.replicaof_port != own_port) return false;
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

// The links this server opens (tls-replication, tls-cluster): as Redis,
// they verify the peer, so they need the CA.
void check_tls_links(const Config& c, Problems& problems) {
    if ((c.tls_replication || c.tls_cluster) && c.tls_ca_cert_file.empty()) {
        problems.push_back(std::string(c.tls_replication ? "--tls-replication" : "--tls-cluster") +
                           ": verifying the peer's certificate needs --tls-ca-cert-file");
    }
    if (c.tls_client_cert_file.empty() != c.tls_client_key_file.empty()) {
        problems.push_back(
            "--tls-client-cert-file: needs --tls-client-key-file, and the other way round");
    }
}

void check_tls(const Config& c, Problems& problems) {
    check_tls_links(c, problems);
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
