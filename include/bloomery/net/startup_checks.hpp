#pragma once
// What must hold for the server to start, beyond the values themselves
// (core::check_config_values): the data directory exists or can be created
// and is writable, the snapshot and log files can be opened, the ACL file
// parses, the TLS certificate, key and CA load and match, the addresses
// parse. Each check looks without binding a port, loading data or creating
// anything that stays (the directory check writes and removes one empty
// probe file, or, for a --dir still to be created, makes and removes one
// probe directory where it would be created).
//
// Every start runs them before anything else is touched, and `bloomery
// --test-config` runs them and reports, so both refuse the same settings
// with the same words. A new option's check goes in the list in
// startup_checks.cpp.

#include <string>
#include <vector>

#include "bloomery/core/config.hpp"

namespace bloomery::net {

// Every problem found, each a line naming the option and the file or value.
std::vector<std::string> run_startup_checks(const core::Config& config);

// What --test-config prints under "configuration OK": listeners, data,
// durability, memory, access control, monitoring; one "  name: value" line
// each.
std::string describe_config(const core::Config& config);

}  // namespace bloomery::net
