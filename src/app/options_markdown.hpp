#pragma once
// docs/options.md: the command line's options printed from the option spec
// (`bloomery --print-options-markdown`; a test compares the page with it).

#include <CLI/CLI.hpp>
#include <string>

namespace bloomery::app {

// Every option of `app` (declared from the spec by OptionSet), group by
// group in --help's order, with its environment variable, default and
// range.
std::string options_markdown(const CLI::App& app);

}  // namespace bloomery::app
