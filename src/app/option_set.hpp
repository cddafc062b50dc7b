#pragma once
// The command line's option table (option_set.cpp declares the options,
// command_line.cpp converts what CLI11 cannot and parses).

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "bloomery/app/command_line.hpp"
#include "bloomery/core/config.hpp"
#include "config_file.hpp"

namespace bloomery::app {

// Every option of the command line, declared on a CLI::App and bound to a
// CommandLine: most straight into its Config, the rest (words, sizes with a
// percentage form, password files, the cluster map) into text fields here
// that convert() turns into Config values once CLI11 has parsed. The one
// table of options: --help, parsing and docs/options.md all read it.
struct OptionSet {
    OptionSet(CLI::App& app_, CommandLine& result_)
        : app(app_), result(result_), c(result_.config) {}

    // Declares the options, group by group, in --help's order.
    void declare();
    // Conversions CLI11 cannot do, after it parsed: each failure is one more
    // problem ("--option: what is wrong").
    void convert(std::vector<std::string>& problems);

    void add_network();
    void add_tls();
    void add_limits();
    void add_security();
    void add_filters();
    void add_memory();
    void add_persistence();
    void add_replication();
    void add_cluster();
    void add_monitoring();
    void add_logging();
    void convert_words(std::vector<std::string>& problems);
    void read_passwords(std::vector<std::string>& problems);
    void convert_replication(std::vector<std::string>& problems);
    void resolve_cluster(std::vector<std::string>& problems);

    CLI::App& app;
    CommandLine& result;
    core::Config& c;
    std::shared_ptr<ConfigFileReader> config_reader;  // the --config file's problems
    std::string tls_auth_clients;
    CLI::Option* requirepass_option = nullptr;
    std::string requirepass_file;
    CLI::Option* requirepass_file_option = nullptr;
    std::string protected_mode;
    std::string maxmemory_spec;
    std::string maxmemory_clients_spec;
    std::string output_limits_spec;
    std::string save_spec;
    std::string stop_writes;
    std::string appendonly;
    std::vector<std::string> replicaof;  // "HOST PORT" as one word or two
    std::string masterauth_file;
    CLI::Option* masterauth_option = nullptr;
    CLI::Option* masterauth_file_option = nullptr;
    std::string serve_stale;
    std::string cluster_enabled;
    std::string cluster_slots;
    CLI::Option* cluster_slots_option = nullptr;
    std::string cluster_self;
    CLI::Option* cluster_self_option = nullptr;
};

}  // namespace bloomery::app
