#pragma once
// The command line's options: the option spec (core/options.hpp) declared on
// a CLI::App, one CLI11 option per entry. CLI11 only gathers each option's
// text, from a flag, the --config file or the environment (in that order of
// precedence); the spec then reads the texts into a Config, so that every
// bad value is reported, not only the first.

#include <CLI/CLI.hpp>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/core/config.hpp"
#include "bloomery/core/options.hpp"
#include "config_file.hpp"

namespace bloomery::app {

class OptionSet {
public:
    // Declares --version, --config and every option of the spec on `app`,
    // group by group in --help's order. `app` must outlive this.
    explicit OptionSet(CLI::App& app);
    OptionSet(const OptionSet&) = delete;
    OptionSet& operator=(const OptionSet&) = delete;

    // Reads every option that was given and has a reader into `config`;
    // each value refused is one more problem ("--option: what is wrong").
    void read(core::Config& config, std::vector<std::string>& problems) const;

    // Whether the option `name` was given (flag, file or environment). The
    // name must be an option of the spec.
    bool given(std::string_view name) const;
    // The text given for `name` (its words joined by a space), "" if none.
    std::string text(std::string_view name) const;
    // Whether the flag `name` is on (given, and not `name = false` in the
    // config file).
    bool flag(std::string_view name) const;

    // The --config file's problems, in file order.
    const std::vector<std::string>& file_problems() const { return config_reader_->problems(); }

private:
    struct Declared {
        const core::OptionSpec* spec = nullptr;
        CLI::Option* option = nullptr;
        std::string text;                // one value
        std::vector<std::string> words;  // OptionUse::two_words
        bool flag = false;               // OptionKind::flag
    };
    void declare(CLI::App& app, const core::OptionSpec& spec);
    const Declared& declared(std::string_view name) const;
    static std::string text_of(const Declared& declared);

    std::deque<Declared> declared_;  // a deque: CLI11 holds their addresses
    std::shared_ptr<ConfigFileReader> config_reader_;
};

}  // namespace bloomery::app
