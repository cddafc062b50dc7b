#include "bloomery/core/config.hpp"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <thread>

namespace bloomery::core {

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
        try {
            std::size_t used_a = 0, used_b = 0;
            const long long seconds = std::stoll(tokens[i], &used_a);
            const long long changes = std::stoll(tokens[i + 1], &used_b);
            if (used_a != tokens[i].size() || used_b != tokens[i + 1].size() || seconds < 1 ||
                changes < 0) {
                throw std::invalid_argument("range");
            }
            out.push_back({seconds, changes});
        } catch (const std::exception&) {
            error = "invalid save point '" + tokens[i] + " " + tokens[i + 1] + "'";
            return false;
        }
    }
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

namespace {

// --requirepass-file: the whole file is the password, less one trailing
// newline ("\n" or "\r\n"), so `echo pw > file` and a Kubernetes Secret made
// from such a file both work. An empty password is refused: an unfilled
// secret must not silently leave the server without one.
std::string read_password_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw CLI::ValidationError("--requirepass-file",
                                   "cannot read " + path + ": " + std::strerror(errno));
    }
    std::string password((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) {
        throw CLI::ValidationError("--requirepass-file",
                                   "cannot read " + path + ": " + std::strerror(errno));
    }
    if (!password.empty() && password.back() == '\n') {
        password.pop_back();
        if (!password.empty() && password.back() == '\r') password.pop_back();
    }
    if (password.empty()) throw CLI::ValidationError("--requirepass-file", path + " is empty");
    return password;
}

}  // namespace

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
    app.add_option("--port", c.port, "TCP port to listen on")
        ->envname("BLOOMERY_PORT")
        ->check(CLI::Range(1, 65535))
        ->group(network);
    app.add_option("--threads", c.threads, "Worker threads, one io_context each (0 = one per core)")
        ->envname("BLOOMERY_THREADS")
        ->check(CLI::Range(0u, 256u))
        ->group(network);
    app.add_option("--maxclients", c.max_clients, "Maximum simultaneous client connections")
        ->envname("BLOOMERY_MAXCLIENTS")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}))
        ->group(network);
    app.add_option("--timeout", c.timeout_seconds,
                   "Close idle clients after this many seconds (0 = never)")
        ->envname("BLOOMERY_TIMEOUT")
        ->check(CLI::NonNegativeNumber)
        ->group(network);

    auto* limits = "Protocol limits";
    app.add_option("--proto-max-bulk-len", c.proto_max_bulk_len,
                   "Largest bulk string a client may send, bytes (suffixes kb, mb, gb)")
        ->envname("BLOOMERY_PROTO_MAX_BULK_LEN")
        ->transform(CLI::AsSizeValue(false))
        ->group(limits);
    app.add_option("--proto-max-inline-len", c.proto_max_inline_len,
                   "Longest inline command line, bytes")
        ->envname("BLOOMERY_PROTO_MAX_INLINE_LEN")
        ->transform(CLI::AsSizeValue(false))
        ->group(limits);
    app.add_option("--proto-max-multibulk-len", c.proto_max_multibulk_len,
                   "Most arguments in one command")
        ->envname("BLOOMERY_PROTO_MAX_MULTIBULK_LEN")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 31))
        ->group(limits);
    app.add_option("--client-query-buffer-limit", c.client_query_buffer_limit,
                   "Most unprocessed bytes buffered for one client before it is closed")
        ->envname("BLOOMERY_CLIENT_QUERY_BUFFER_LIMIT")
        ->transform(CLI::AsSizeValue(false))
        ->group(limits);
    app.add_option("--client-output-buffer-limit", c.client_output_buffer_limit,
                   "Most reply bytes buffered for one client before it is closed")
        ->envname("BLOOMERY_CLIENT_OUTPUT_BUFFER_LIMIT")
        ->transform(CLI::AsSizeValue(false))
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
        ->check(CLI::Range(std::size_t{3}, std::size_t{1} << 20))
        ->group(security);
    app.add_option("--unauthenticated-max-bulk-len", c.unauthenticated_max_bulk_len,
                   "Largest bulk argument before the client has authenticated, bytes")
        ->envname("BLOOMERY_UNAUTHENTICATED_MAX_BULK_LEN")
        ->transform(CLI::AsSizeValue(false))
        ->group(security);
    app.add_option("--unauthenticated-query-buffer-limit", c.unauthenticated_query_buffer_limit,
                   "Most unprocessed bytes buffered for a client that has not authenticated "
                   "before it is closed")
        ->envname("BLOOMERY_UNAUTHENTICATED_QUERY_BUFFER_LIMIT")
        ->transform(CLI::AsSizeValue(false))
        ->group(security);

    auto* filters = "Filters";
    app.add_option("--bf-error-rate", c.default_error_rate,
                   "Error rate of filters created implicitly (BF.ADD, BF.MADD, BF.INSERT)")
        ->envname("BLOOMERY_BF_ERROR_RATE")
        ->check(CLI::Range(1e-15, 0.999999))
        ->group(filters);
    app.add_option("--bf-initial-size", c.default_capacity,
                   "Capacity of filters created implicitly")
        ->envname("BLOOMERY_BF_INITIAL_SIZE")
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40))
        ->group(filters);
    app.add_option("--bf-expansion-factor", c.default_expansion,
                   "Growth factor of sub-filters of filters created implicitly")
        ->envname("BLOOMERY_BF_EXPANSION_FACTOR")
        ->check(CLI::Range(1u, 32768u))
        ->group(filters);
    app.add_option("--max-filter-bytes", c.max_filter_bytes,
                   "Largest bit array of one sub-filter, bytes (suffixes kb, mb, gb)")
        ->envname("BLOOMERY_MAX_FILTER_BYTES")
        ->transform(CLI::AsSizeValue(false))
        ->group(filters);
    app.add_option("--keyspace-shards", c.keyspace_shards, "Lock shards of the keyspace")
        ->envname("BLOOMERY_KEYSPACE_SHARDS")
        ->check(CLI::Range(std::size_t{1}, std::size_t{65536}))
        ->group(filters);

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
    app.add_option("--check-snapshot", result.check_snapshot,
                   "Verify a snapshot file, print what it holds, and exit")
        ->group(persistence);

    auto* logging = "Logging";
    app.add_option("--loglevel", c.log_level, "Log level")
        ->envname("BLOOMERY_LOGLEVEL")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
        ->group(logging);
    app.add_option("--logfile", c.log_file, "Log to this file instead of stderr")
        ->envname("BLOOMERY_LOGFILE")
        ->group(logging);

    try {
        app.parse(argc, argv);
        std::string error;
        if (!parse_save_spec(save_spec, c.save_points, error)) {
            throw CLI::ValidationError("--save", error);
        }
        if (c.dbfilename.empty() || c.dbfilename.find('/') != std::string::npos) {
            throw CLI::ValidationError("--dbfilename", "must be a plain file name");
        }
        if (requirepass_option->count() > 0 && requirepass_file_option->count() > 0) {
            throw CLI::ValidationError("--requirepass-file",
                                       "give the password once: --requirepass (or "
                                       "BLOOMERY_REQUIREPASS) or --requirepass-file, not both");
        }
        if (!requirepass_file.empty()) c.requirepass = read_password_file(requirepass_file);
        c.protected_mode = protected_mode == "yes";
    } catch (const CLI::ParseError& e) {
        result.exit_code = app.exit(e);
        return result;
    }
    if (auto* config_option = app.get_config_ptr(); config_option && config_option->count() > 0) {
        c.config_file = config_option->as<std::string>();
    }
    if (c.threads == 0) c.threads = std::max(1u, std::thread::hardware_concurrency());
    return result;
}

}  // namespace bloomery::core
