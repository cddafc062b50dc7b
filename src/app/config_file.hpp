#pragma once
// The --config file and the BLOOMERY_* environment as sources of settings:
// the file's two syntaxes (`key = value` and redis.conf's `key value`),
// `include`, and the refusal of names no option has.

#include <CLI/CLI.hpp>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/core/options.hpp"

namespace bloomery::app {

// CLI11's reader of the --config file (App::config_formatter), in place of its
// TOML reader, which dropped every line it did not understand: a misspelled
// key, a redis.conf line (`port 6379` read as a flag named "port 6379"), an
// include. This one reads each line as either form, follows includes and
// gives CLI11 only settings that exist; everything else is a problem
// ("FILE:LINE: what is wrong"), and any problem refuses the start.
class ConfigFileReader : public CLI::Config {
public:
    // The keys a file may set are the command line's options of the option
    // spec (core/options.hpp); `app`'s --config option names the file CLI11
    // hands over as a stream. The app must outlive the reader (it owns it).
    explicit ConfigFileReader(const CLI::App& app);

    std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;
    // Writing a config file from the app (App::config_to_str): CLI11's TOML,
    // which this reader reads back.
    std::string to_config(const CLI::App* app, bool default_also, bool write_description,
                          std::string prefix) const override;

    // What was wrong with the file last read, in file order; empty if it
    // was fine or none was read.
    const std::vector<std::string>& problems() const { return problems_; }

    // A key a file may set: an option's long name, and its entry.
    struct Key {
        std::string name;
        const core::OptionSpec* spec;
    };

private:
    std::vector<Key> keys_;
    const CLI::Option* file_option_;
    mutable std::vector<std::string> problems_;
};

// The name among `known` nearest to `name` (edit distance), if near enough to
// be a slip of the keyboard; "" otherwise.
std::string closest_name(std::string_view name, const std::vector<std::string>& known);

// BLOOMERY_* variables of this process's environment that no option reads,
// each as a warning naming the variable it was probably meant to be. Only
// near misses are reported: the environment is shared with other programs
// (Kubernetes sets BLOOMERY_SERVICE_HOST and BLOOMERY_PORT_6379_TCP for a
// Service named bloomery), so an unknown name alone is no mistake.
std::vector<std::string> misspelled_environment(const CLI::App& app);

}  // namespace bloomery::app
