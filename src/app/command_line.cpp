// The command line: flags, the config file and the environment parsed
// through the option table (option_set.hpp), what CLI11 cannot convert
// converted, and the table printed as docs/options.md.

#include "bloomery/app/command_line.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#include "bloomery/cluster/topology.hpp"
#include "config_file.hpp"
#include "option_set.hpp"

namespace bloomery::app {

using core::check_config_values;
using core::check_option_value;
using core::Config;
using core::find_option_range;
using core::format_real;
using core::host_name;
using core::OptionKind;
using core::OptionRange;
using core::parse_memory_limit;
using core::parse_output_buffer_limits;
using core::parse_replicaof;
using core::parse_save_spec;
using core::range_problem;
using core::size_without_suffix;
using core::TlsAuthClients;

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

// In a cluster the map says who replicates whom (a replica's --replicaof
// defaults to its primary there).
void check_cluster_replicaof(const Config& c, std::vector<std::string>& problems) {
    if (!c.cluster_enabled || !c.cluster) return;
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

}  // namespace

void OptionSet::convert(std::vector<std::string>& problems) {
    convert_words(problems);
    read_passwords(problems);
    convert_replication(problems);
    resolve_cluster(problems);
}

void OptionSet::convert_words(std::vector<std::string>& problems) {
    std::string error;
    if (!parse_save_spec(save_spec, c.save_points, error)) problems.push_back("--save: " + error);
    std::string maxmemory_error;
    if (!parse_memory_limit(maxmemory_spec, c.maxmemory, maxmemory_error)) {
        problems.push_back("--maxmemory: " + maxmemory_error);
    }
    std::string clients_error;
    if (!c.maxmemory_clients.parse(maxmemory_clients_spec, clients_error)) {
        problems.push_back("--maxmemory-clients: " +
                           range_problem(*find_option_range("maxmemory-clients"),
                                         maxmemory_clients_spec,
                                         ", or a percentage of --maxmemory from 0% to 100%"));
    }
    std::string limits_error;
    if (!parse_output_buffer_limits(output_limits_spec, c.client_output_buffer_limits,
                                    limits_error)) {
        problems.push_back("--client-output-buffer-limit: " + limits_error);
    }
    c.stop_writes_on_bgsave_error = stop_writes == "yes";
    c.appendonly = appendonly == "yes";
    c.tls_auth_clients = tls_auth_clients == "no"         ? TlsAuthClients::no
                         : tls_auth_clients == "optional" ? TlsAuthClients::optional
                                                          : TlsAuthClients::yes;
}

void OptionSet::read_passwords(std::vector<std::string>& problems) {
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
}

void OptionSet::convert_replication(std::vector<std::string>& problems) {
    c.replica_serve_stale_data = serve_stale == "yes";
    std::string error;
    std::string spec;
    for (const std::string& word : replicaof) spec += (spec.empty() ? "" : " ") + word;
    if (!spec.empty() && !parse_replicaof(spec, c.replicaof_host, c.replicaof_port, error)) {
        problems.push_back("--replicaof: " + error);
    }
    c.protected_mode = protected_mode == "yes";
}

void OptionSet::resolve_cluster(std::vector<std::string>& problems) {
    c.cluster_enabled = cluster_enabled == "yes";
    if (c.cluster_enabled) {
        if (cluster_slots.empty()) {
            problems.push_back("--cluster-slots: --cluster-enabled yes needs the slot map");
        } else if (auto topology =
                       cluster::parse_topology(cluster_slots, cluster_self, host_name());
                   !topology) {
            problems.push_back("--cluster-slots: " + topology.error());
        } else {
            c.cluster = std::make_shared<const cluster::Topology>(std::move(topology).value());
            // A replica in the map copies its primary: --replicaof comes
            // from the map unless given (check_cluster_replicaof compares
            // them).
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
}

namespace {

constexpr const char* kDescription =
    "bloomery: a Bloom filter server speaking the Redis protocol (RedisBloom BF.* commands)";

// With --test-config every problem is reported and the exit code is 1; the
// flag is looked for in argv itself, as a parse error may come before CLI11
// has set it.
bool wants_test_config(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (std::string_view(argv[i]) == "--test-config") return true;
    }
    return false;
}

// A table cell: pipes escaped, so a description may contain them.
std::string cell(std::string_view text) {
    std::string out;
    for (const char ch : text) {
        if (ch == '|') out += '\\';
        out += ch;
    }
    return out;
}

// docs/options.md: every option of `app` but the hidden ones, group by group
// in --help's order, with its environment variable, default and range.
std::string options_markdown(const CLI::App& app) {
    std::string out =
        "# Options\n\n"
        "Generated by `bloomery --print-options-markdown` from the server's option table; a "
        "test fails when this page and the table differ. Every option can be given as a flag, "
        "as a key of the `--config` file (the long name without `--`) or through its "
        "environment variable: flags win over the file, which wins over the environment. "
        "Sizes take the suffixes kb, mb and gb.\n\n"
        "The file takes `key = value` lines (`port = 6380`) and redis.conf's `key value` lines "
        "(`port 6380`, `save 900 1`), mixed, and `include FILE` (relative to the including "
        "file). A key that is not an option below refuses the start, naming file, line and the "
        "nearest key; README \"Configuration\" has the rules.\n";
    std::vector<std::string> groups;
    const auto options = app.get_options();
    for (const CLI::Option* option : options) {
        const std::string& group = option->get_group();
        if (!group.empty() && std::find(groups.begin(), groups.end(), group) == groups.end()) {
            groups.push_back(group);
        }
    }
    for (const std::string& group : groups) {
        out += "\n## " + group + "\n\n| option | environment | default | description |\n";
        out += "|---|---|---|---|\n";
        for (const CLI::Option* option : options) {
            if (option->get_group() != group) continue;
            std::string names;
            for (const std::string& name : option->get_snames()) {
                names += (names.empty() ? "`-" : ", `-") + name + "`";
            }
            for (const std::string& name : option->get_lnames()) {
                names += (names.empty() ? "`--" : ", `--") + name + "`";
            }
            const std::string env = option->get_envname();
            const std::string fallback = option->get_default_str();
            std::string description = option->get_description();
            if (const OptionRange* range = option->get_lnames().empty()
                                               ? nullptr
                                               : find_option_range(option->get_lnames().front())) {
                description += " (" + core::describe_range(*range) + ")";
            }
            out += "| " + cell(names) + " | " + (env.empty() ? "" : "`" + cell(env) + "`") + " | " +
                   (fallback.empty() ? "" : "`" + cell(fallback) + "`") + " | " +
                   cell(description) + " |\n";
        }
    }
    return out;
}

}  // namespace

CommandLine parse_command_line(int argc, char** argv) {
    CommandLine result;
    Config& c = result.config;
    CLI::App app{kDescription};
    OptionSet options(app, result);
    options.declare();
    // docs/options.md is this table printed (a test compares them); the
    // flag is not an option, so --help does not list it.
    if (argc == 2 && std::string_view(argv[1]) == "--print-options-markdown") {
        std::cout << options_markdown(app);
        result.exit_code = 0;
        return result;
    }
    // CLI11 2.1 reads the config file before the environment, so
    // BLOOMERY_CONFIG alone named a file nothing read. As the default of
    // --config it is read; required, a missing file is an error as with
    // --config.
    if (const char* file = std::getenv("BLOOMERY_CONFIG"); file != nullptr && *file != '\0') {
        app.get_config_ptr()->default_str(file)->required();
    }
    const bool testing = wants_test_config(argc, argv);
    // The config file's problems come first: a wrong key may explain a
    // problem found later (a value left at its default).
    std::vector<std::string> problems;
    try {
        app.parse(argc, argv);
        problems = options.config_reader->problems();
        options.convert(problems);
    } catch (const CLI::ParseError& e) {
        const std::vector<std::string>& file_problems = options.config_reader->problems();
        if (e.get_exit_code() != 0 && (testing || !file_problems.empty())) {
            std::cerr << "bloomery: configuration invalid:\n";
            for (const std::string& problem : file_problems) std::cerr << "  " << problem << '\n';
            std::cerr << "  " << e.what() << '\n';
            result.exit_code = 1;
            return result;
        }
        result.exit_code = app.exit(e);
        return result;
    }
    result.warnings = misspelled_environment(app);
    for (std::string& problem : check_config_values(c)) problems.push_back(std::move(problem));
    check_cluster_replicaof(c, problems);
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

std::vector<std::string> option_names() {
    CommandLine result;
    CLI::App app{kDescription};
    OptionSet options(app, result);
    options.declare();
    std::vector<std::string> names;
    for (const CLI::Option* option : app.get_options()) {
        for (const std::string& name : option->get_lnames()) names.push_back(name);
    }
    return names;
}

}  // namespace bloomery::app
