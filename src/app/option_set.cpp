// The option spec declared on CLI11: flag, environment variable, group,
// default and type as --help shows them, and the texts read back through
// the spec.

#include "option_set.hpp"

#include <stdexcept>

namespace bloomery::app {

using core::OptionKind;
using core::OptionSpec;
using core::OptionUse;

namespace {

// What --help shows after the flag: the kind of value and its range.
std::string type_name(const OptionSpec& spec) {
    const std::string whole =
        "[" + std::to_string(spec.min) + " - " + std::to_string(spec.max) + "]";
    switch (spec.kind) {
        case OptionKind::integer:
            return "INT:in " + whole;
        case OptionKind::bytes:
            return "SIZE:in " + whole + " (b, kb, mb, gb)";
        case OptionKind::real:
            return "FLOAT:in [" + core::format_real(spec.min_real) + " - " +
                   core::format_real(spec.max_real) + "]";
        case OptionKind::choice: {
            std::string words;
            for (const std::string_view word : spec.choices) {
                words += (words.empty() ? "" : ",") + std::string(word);
            }
            return "TEXT:{" + words + "}";
        }
        case OptionKind::text:
        case OptionKind::words:
            return "TEXT";
        case OptionKind::flag:
            break;
    }
    return {};
}

}  // namespace

OptionSet::OptionSet(CLI::App& app) {
    app.set_version_flag("--version", std::string("bloomery ") + BLOOMERY_VERSION);
    app.set_config("--config", "",
                   "Read settings from this file: 'key = value' or redis.conf's 'key value' "
                   "lines, keys the long flag names, 'include FILE'; an unknown key refuses the "
                   "start");
    app.get_config_ptr()->envname("BLOOMERY_CONFIG");
    for (const OptionSpec& spec : core::option_specs()) {
        if (has(spec.use, OptionUse::command_line)) declare(app, spec);
    }
    // Last: the reader takes its keys from the spec, its file from --config.
    config_reader_ = std::make_shared<ConfigFileReader>(app);
    app.config_formatter(config_reader_);
}

void OptionSet::declare(CLI::App& app, const OptionSpec& spec) {
    Declared& entry = declared_.emplace_back();
    entry.spec = &spec;
    const std::string flag = "--" + std::string(spec.name);
    const std::string help(spec.help);
    if (spec.kind == OptionKind::flag) {
        entry.option = app.add_flag(flag, entry.flag, help);
    } else if (has(spec.use, OptionUse::two_words)) {
        entry.option = app.add_option(flag, entry.words, help)->expected(1, 2);
    } else {
        entry.option = app.add_option(flag, entry.text, help);
    }
    entry.option->group(std::string(spec.group));
    if (const std::string variable = core::environment_variable(spec); !variable.empty()) {
        entry.option->envname(variable);
    }
    if (const std::string type = type_name(spec); !type.empty()) entry.option->type_name(type);
    entry.option->default_str(core::default_text(spec));
}

void OptionSet::read(core::Config& config, std::vector<std::string>& problems) const {
    for (const Declared& entry : declared_) {
        if (entry.spec->read == nullptr || entry.option->count() == 0) continue;
        if (const core::Status read = entry.spec->read(*entry.spec, config, text_of(entry));
            !read) {
            problems.push_back("--" + std::string(entry.spec->name) + ": " + read.error());
        }
    }
}

const OptionSet::Declared& OptionSet::declared(std::string_view name) const {
    for (const Declared& entry : declared_) {
        if (entry.spec->name == name) return entry;
    }
    throw std::logic_error("--" + std::string(name) + " is not an option of the spec");
}

bool OptionSet::given(std::string_view name) const {
    return declared(name).option->count() > 0;
}

std::string OptionSet::text(std::string_view name) const {
    return text_of(declared(name));
}

bool OptionSet::flag(std::string_view name) const {
    return declared(name).flag;
}

std::string OptionSet::text_of(const Declared& entry) {
    if (entry.spec->kind == OptionKind::flag) return entry.flag ? "true" : "";
    if (!has(entry.spec->use, OptionUse::two_words)) return entry.text;
    std::string joined;
    for (const std::string& word : entry.words) joined += (joined.empty() ? "" : " ") + word;
    return joined;
}

}  // namespace bloomery::app
