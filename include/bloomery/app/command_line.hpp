#pragma once
// The process's command line: flags, an optional config file and BLOOMERY_*
// environment variables, read by CLI11 into a core::Config.

#include <string>
#include <vector>

#include "bloomery/core/config.hpp"

namespace bloomery::app {

// What main() should do after parsing the command line.
struct CommandLine {
    core::Config config;
    std::string check_snapshot;  // --check-snapshot FILE: verify and exit
    std::string check_journal;   // --check-journal FILE: verify (and --fix) and exit
    std::string import_rdb;      // --import-rdb FILE: write its Bloom filters as the snapshot, exit
    bool fix_journal = false;
    // --test-config: check everything that can be checked without binding or
    // loading, print what is wrong (or "configuration OK") and exit.
    bool test_config = false;
    // --health-check HOST:PORT: PING that server (AUTH first with
    // --requirepass when set; over TLS with --health-check-tls) and exit 0 on
    // PONG, 1 otherwise.
    std::string health_check;
    bool health_check_tls = false;
    double health_check_timeout_seconds = 0;  // its default is the option spec's
    // With --test-config: the problems found in the values (parse errors
    // aside, which exit at once). Otherwise always empty: they are printed
    // and exit_code is 1.
    std::vector<std::string> problems;
    // Said at start (logged) and by --test-config, but no reason to refuse
    // either: BLOOMERY_* variables no option reads whose names are close to
    // one that does.
    std::vector<std::string> warnings;
    int exit_code = -1;  // >= 0: exit now with this code (--help, --version, error)
};

// Parses flags, the optional --config file and BLOOMERY_* environment
// variables (CLI11's order: flags win over the file, which wins over the
// environment), then runs core::check_config_values() and checks the cluster
// map against --replicaof.
CommandLine parse_command_line(int argc, char** argv);

// The long name of every option of the command line, in --help's order
// (what docs/options.md lists).
std::vector<std::string> option_names();

}  // namespace bloomery::app
