// The command line: flags, the config file and the environment gathered by
// CLI11 and read through the option spec (option_set.hpp), then what the
// spec cannot read alone: the tools' own options, password files, the
// cluster map, and the checks between options.

#include "bloomery/app/command_line.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "bloomery/cluster/etcd.hpp"
#include "bloomery/cluster/topology.hpp"
#include "bloomery/core/options.hpp"
#include "config_file.hpp"
#include "option_set.hpp"
#include "options_markdown.hpp"

namespace bloomery::app {

using core::Config;

namespace {

using Problems = std::vector<std::string>;

constexpr const char* kDescription =
    "bloomery: a Bloom filter server speaking the Redis protocol (RedisBloom BF.* commands)";

// --requirepass-file: the whole file is the password, less one trailing
// newline ("\n" or "\r\n"), so `echo pw > file` and a Kubernetes Secret made
// from such a file both work. An empty password is refused: an unfilled
// secret must not silently leave the server without one.
core::Result<std::string> read_password_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return core::Error{"cannot read " + path + ": " + std::strerror(errno)};
    std::string password((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) return core::Error{"cannot read " + path + ": " + std::strerror(errno)};
    if (!password.empty() && password.back() == '\n') {
        password.pop_back();
        if (!password.empty() && password.back() == '\r') password.pop_back();
    }
    if (password.empty()) return core::Error{path + " is empty"};
    return password;
}

// A password given once: by its option (or environment variable), or by
// the file its "-file" option names. `who` says whose password in the
// problem of both given.
void read_password(const OptionSet& options, std::string_view name, std::string_view who,
                   std::string& password, Problems& problems) {
    const std::string option(name);
    const std::string file_option = option + "-file";
    const std::string flag = "--" + file_option;
    if (options.given(option) && options.given(file_option)) {
        problems.push_back(flag + ": give " + std::string(who) + " once: --" + option + " (or " +
                           core::environment_variable(*core::find_option(option)) + ") or " + flag +
                           ", not both");
        return;
    }
    const std::string path = options.text(file_option);
    if (path.empty()) return;
    core::Result<std::string> read = read_password_file(path);
    if (!read) {
        problems.push_back(flag + ": " + read.error());
        return;
    }
    password = std::move(*read);
}

// The options of the modes that answer and exit instead of serving.
void read_tools(const OptionSet& options, CommandLine& result, Problems& problems) {
    result.check_snapshot = options.text("check-snapshot");
    result.check_journal = options.text("check-journal");
    result.import_rdb = options.text("import-rdb");
    result.fix_journal = options.flag("fix");
    result.test_config = options.flag("test-config");
    result.health_check = options.text("health-check");
    result.health_check_tls = options.flag("health-check-tls");
    const core::OptionSpec& timeout = *core::find_option("health-check-timeout");
    const std::string text = options.given(timeout.name) ? options.text(timeout.name)
                                                         : std::string(timeout.default_text);
    if (const core::Result<double> seconds = core::read_real_number(timeout, text); seconds) {
        result.health_check_timeout_seconds = *seconds;
    } else {
        problems.push_back("--health-check-timeout: " + seconds.error());
    }
}

bool wildcard_address(std::string_view address) {
    return address == "0.0.0.0" || address == "::" || address == "*" ||
           address.find(' ') != std::string_view::npos;
}

// --cluster-etcd: its endpoints and files checked, the name's characters,
// and the address this node announces (derived when not given).
void resolve_etcd_cluster(const OptionSet& options, Config& c, Problems& problems) {
    read_password(options, "cluster-etcd-password", "etcd's password", c.cluster_etcd_password,
                  problems);
    if (options.given("cluster-slots") || options.given("cluster-self")) {
        problems.push_back(
            "--cluster-etcd: the map is kept in etcd; --cluster-slots and --cluster-self are "
            "for the static map");
    }
    if (auto endpoints = cluster::parse_etcd_endpoints(cluster::etcd_settings_of(c)); !endpoints) {
        problems.push_back("--cluster-etcd: " + endpoints.error());
    }
    const bool name_ok = !c.cluster_name.empty() && c.cluster_name.size() <= 64 &&
                         std::all_of(c.cluster_name.begin(), c.cluster_name.end(), [](char ch) {
                             return std::isalnum(static_cast<unsigned char>(ch)) != 0 ||
                                    ch == '.' || ch == '_' || ch == '-';
                         });
    if (!name_ok) {
        problems.push_back("--cluster-name: '" + c.cluster_name +
                           "' is not 1 to 64 letters, digits, '.', '_' or '-'");
    }
    if (!c.replicaof_host.empty()) {
        problems.push_back(
            "--replicaof: in a cluster kept in etcd, CLUSTER REPLICATE says who follows whom");
    }
    if (c.cluster_announce.empty()) {
        const std::string host = wildcard_address(c.bind) ? core::host_name() : c.bind;
        const std::uint16_t port = c.port != 0 ? c.port : c.tls_port;
        c.cluster_announce = host + ":" + std::to_string(port);
    }
    if (auto address = cluster::parse_node_address(c.cluster_announce); !address) {
        problems.push_back("--cluster-announce: " + address.error());
    }
}

// --cluster-slots parsed with this node resolved; a replica in the map
// follows its primary unless --replicaof says otherwise (checked later).
void resolve_cluster(const OptionSet& options, Config& c, Problems& problems) {
    if (!c.cluster_enabled) {
        // A map without cluster mode would be silently ignored: every key
        // served here, nothing redirected. Say so instead.
        if (options.given("cluster-slots") || options.given("cluster-self") ||
            options.given("cluster-etcd")) {
            problems.push_back(
                "--cluster-slots: --cluster-slots, --cluster-self and --cluster-etcd need "
                "--cluster-enabled yes");
        }
        return;
    }
    if (!c.cluster_etcd.empty()) return resolve_etcd_cluster(options, c, problems);
    if (c.cluster_slots.empty()) {
        problems.push_back(
            "--cluster-slots: --cluster-enabled yes needs the slot map (--cluster-slots) or "
            "etcd's endpoints (--cluster-etcd)");
        return;
    }
    auto topology = cluster::parse_topology(c.cluster_slots, c.cluster_self, core::host_name());
    if (!topology) {
        problems.push_back("--cluster-slots: " + topology.error());
        return;
    }
    c.cluster = std::make_shared<const cluster::Topology>(std::move(topology).value());
    // CONFIG GET shows the map as it describes itself, and this node's address.
    c.cluster_slots = c.cluster->describe();
    c.cluster_self = c.cluster->self().address;
    const cluster::Node& self = c.cluster->self();
    if (!self.primary && c.replicaof_host.empty()) {
        const cluster::Node& primary = c.cluster->nodes()[self.primary_index];
        c.replicaof_host = primary.host;
        c.replicaof_port = primary.port;
    }
}

// In a cluster the map says who replicates whom (a replica's --replicaof
// defaults to its primary there).
void check_cluster_replicaof(const Config& c, Problems& problems) {
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

// Every problem of the values gathered: the config file's first (a wrong
// key may explain a problem found later, a value left at its default), then
// each option's, then those between options.
Problems read_values(const OptionSet& options, CommandLine& result) {
    Config& c = result.config;
    Problems problems = options.file_problems();
    options.read(c, problems);
    read_tools(options, result, problems);
    read_password(options, "requirepass", "the password", c.requirepass, problems);
    read_password(options, "masterauth", "the primary's password", c.masterauth, problems);
    resolve_cluster(options, c, problems);
    for (std::string& problem : core::check_config_values(c))
        problems.push_back(std::move(problem));
    check_cluster_replicaof(c, problems);
    return problems;
}

// What the command line is for: a start, or --test-config, under which
// every problem is reported and the exit code is 1. The flag is looked for
// in argv itself, as a parse error may come before CLI11 has set it.
enum class Purpose { start, test_config };

Purpose purpose_of(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (std::string_view(argv[i]) == "--test-config") return Purpose::test_config;
    }
    return Purpose::start;
}

// What CLI11 itself refused (an unknown flag, a missing value or file):
// said with the config file's problems, or as CLI11 says it.
int report_parse_error(const CLI::App& app, const OptionSet& options, const CLI::ParseError& e,
                       Purpose purpose) {
    const Problems& file_problems = options.file_problems();
    if (e.get_exit_code() != 0 && (purpose == Purpose::test_config || !file_problems.empty())) {
        std::cerr << "bloomery: configuration invalid:\n";
        for (const std::string& problem : file_problems) std::cerr << "  " << problem << '\n';
        std::cerr << "  " << e.what() << '\n';
        return 1;
    }
    return app.exit(e);
}

}  // namespace

CommandLine parse_command_line(int argc, char** argv) {
    CommandLine result;
    CLI::App app{kDescription};
    const OptionSet options(app);
    // docs/options.md is the option spec printed (a test compares them); the
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
    const Purpose purpose = purpose_of(argc, argv);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        result.exit_code = report_parse_error(app, options, e, purpose);
        return result;
    }
    Problems problems = read_values(options, result);
    result.warnings = misspelled_environment(app);
    if (!problems.empty()) {
        if (purpose == Purpose::test_config) {
            result.problems = std::move(problems);  // main adds the start-up checks' and prints
        } else {
            for (const std::string& problem : problems) std::cerr << problem << '\n';
            std::cerr << "Run with --help for more information.\n";
            result.exit_code = 1;
            return result;
        }
    }
    if (auto* config_option = app.get_config_ptr(); config_option && config_option->count() > 0) {
        result.config.config_file = config_option->as<std::string>();
    }
    Config& c = result.config;
    if (c.threads == 0) c.threads = std::max(1u, std::thread::hardware_concurrency());
    return result;
}

std::vector<std::string> option_names() {
    CLI::App app{kDescription};
    const OptionSet options(app);
    std::vector<std::string> names;
    for (const CLI::Option* option : app.get_options()) {
        for (const std::string& name : option->get_lnames()) names.push_back(name);
    }
    return names;
}

}  // namespace bloomery::app
