// CONFIG and its subcommands, all read from the option spec
// (core/options.hpp): GET shows every option (and the names Redis's clients
// ask for), SET changes the settings the spec lets change at run time (in
// core::RuntimeSettings: the slow log's, the latency monitor's threshold,
// the key use counters', the output buffer limits and maxmemory-clients),
// and REWRITE writes those and whom REPLICAOF made this server follow into
// the --config file. The rest of the configuration is fixed at start: every
// worker reads it without locks.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/glob.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/core/file_io.hpp"
#include "bloomery/core/options.hpp"
#include "bloomery/core/printable.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

// CONFIG GET shows the replication and thread settings the server holds;
// CONFIG SET and RESETSTAT reach the clients and the statistics.
using ConfigContext = With<uses::Clients, uses::Replication, uses::Stats>;

using core::OptionSpec;
using core::OptionUse;

// What CONFIG GET shows now: the configuration, the run-time settings, and
// what the server says of itself (its threads, whom REPLICAOF made it follow).
core::OptionValues values_now(const ConfigContext& ctx) {
    const ReplicationInfo replication = ctx.server.replication.replication();
    return {ctx.config, ctx.settings, ctx.server.stats.worker_threads(),
            replication.replica
                ? replication.primary_host + " " + std::to_string(replication.primary_port)
                : std::string()};
}

void cmd_config_get(ConfigContext& ctx, Args argv) {
    const core::OptionValues values = values_now(ctx);
    const auto wanted = [&](std::string_view name) {
        if (name.empty()) return false;
        for (std::size_t i = 2; i < argv.size(); ++i) {
            if (glob_match(argv[i], name, GlobCase::insensitive)) return true;
        }
        return false;
    };
    std::vector<std::pair<std::string_view, std::string>> matched;
    for (const OptionSpec& option : core::option_specs()) {
        if (!has(option.use, OptionUse::config_get)) continue;
        for (const std::string_view name : {option.redis_alias, option.name}) {
            if (wanted(name)) matched.emplace_back(name, option.show(values));
        }
    }
    ctx.out.map(matched.size());
    for (const auto& [name, value] : matched) {
        ctx.out.bulk(name);
        ctx.out.bulk(value);
    }
}

// ---- CONFIG SET ----

const OptionSpec* find_settable(std::string_view name) {
    for (const OptionSpec& option : core::option_specs()) {
        if (option.set == nullptr) continue;
        if (iequals(name, option.name) ||
            (!option.redis_alias.empty() && iequals(name, option.redis_alias))) {
            return &option;
        }
    }
    return nullptr;
}

// `reason` follows the parameter's name: "') - ..." (Redis 7's texts).
void config_set_failed(ConfigContext& ctx, std::string_view name, std::string_view reason) {
    std::string message(errors::kConfigSetFailed);
    message += name;  // a settable option's name
    message += reason;
    ctx.out.error(message);
}

// What changes at once when a setting does, beyond the value the settings
// hold (which every reader follows).
void after_change(ConfigContext& ctx, const OptionSpec& option) {
    if (option.name == "slowlog-max-len" && ctx.slowlog != nullptr) ctx.slowlog->trim();
    // Enforced at once, as Redis evicts before its next command.
    if (option.name == "maxmemory-clients") ctx.server.clients.evict_clients_over_limit();
}

void cmd_config_set(ConfigContext& ctx, Args argv) {
    if (argv.size() % 2 != 0) {
        reply_wrong_arity(ctx, "config|set");
        return;
    }
    // Every pair is checked before any is applied, so a bad one changes
    // nothing (as Redis).
    std::vector<std::pair<const OptionSpec*, std::string_view>> changes;
    for (std::size_t i = 2; i + 1 < argv.size(); i += 2) {
        const OptionSpec* option = find_settable(argv[i]);
        if (option == nullptr) {
            // Everything else is read without locks by every worker thread,
            // so it is fixed at start; changing it needs a restart with new
            // flags or file.
            std::string message = "ERR CONFIG SET is not supported by bloomery for '";
            core::append_printable(message, argv[i]);
            message += "': restart with the new value";
            ctx.out.error(message);
            return;
        }
        for (const auto& change : changes) {
            if (change.first == option) {
                config_set_failed(ctx, option->name, errors::kConfigSetDuplicate);
                return;
            }
        }
        const core::Status checked =
            option->set(*option, ctx.settings, argv[i + 1], core::SetMode::check);
        if (!checked) {
            config_set_failed(ctx, option->name,
                              std::string(errors::kConfigSetReason) + checked.error());
            return;
        }
        changes.emplace_back(option, argv[i + 1]);
    }
    for (const auto& [option, value] : changes) {
        // Checked above: applying the same text cannot fail.
        static_cast<void>(option->set(*option, ctx.settings, value, core::SetMode::apply));
        after_change(ctx, *option);
    }
    ctx.out.ok();
}

// ---- CONFIG REWRITE ----
//
// Rewrites the --config file so that a restart keeps what was changed at run
// time: the settings CONFIG SET changes and REPLICAOF (a replica promoted by
// Sentinel restarts as the primary it became), the options the spec marks
// `rewrite`. As Redis does, each such setting replaces its line in place
// (the first, if there are several; the others go), is appended under a
// "# Generated by CONFIG REWRITE" line when the file lacks it and its value
// is not the default, and a replicaof line goes when this server follows
// nobody. Every other line, comment and blank line is kept as written
// (settings fixed at start are not written: their flags and environment stay
// where they were given). The new file replaces the old one atomically
// (written beside it, fsynced, renamed, the directory fsynced).

// A setting's line in the file's syntax (`key = "value"`, quoted for CLI11).
std::string config_line(std::string_view name, std::string_view value) {
    std::string line(name);
    line += " = \"";
    for (char c : value) {
        if (c == '"' || c == '\\') line += '\\';
        line += c;
    }
    line += '"';
    return line;
}

// The setting a line of the file sets ("key = value" or "key value"), or "".
std::string_view line_key(std::string_view line) {
    std::size_t start = 0;
    while (start < line.size() && (line[start] == ' ' || line[start] == '\t')) ++start;
    std::size_t end = start;
    while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) ||
                                 line[end] == '-' || line[end] == '_')) {
        ++end;
    }
    if (end == start || end == line.size()) return {};
    std::size_t next = end;
    while (next < line.size() && (line[next] == ' ' || line[next] == '\t')) ++next;
    if (next == end && line[next] != '=') return {};
    return line.substr(start, end - start);
}

core::Status rewrite_failed(int error) {
    return core::Error{"Rewriting config file: " + std::string(std::strerror(error))};
}

core::Result<std::vector<std::string>> read_lines(const std::string& path) {
    std::ifstream in(path);
    if (!in) return rewrite_failed(errno).failure();
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// The file's text with every `rewrite` option's current value in place.
std::string rewritten(const ConfigContext& ctx, std::vector<std::string> lines) {
    const core::Config defaults;
    const core::RuntimeSettings default_settings(defaults);
    const core::OptionValues now = values_now(ctx);
    const core::OptionValues at_default = core::values_at_start(defaults, default_settings);
    std::vector<std::string> appended;
    for (const OptionSpec& option : core::option_specs()) {
        if (!has(option.use, OptionUse::rewrite)) continue;
        const std::string value = option.show(now);
        bool placed = false;
        for (std::size_t i = 0; i < lines.size(); ++i) {
            if (!iequals(line_key(lines[i]), option.name)) continue;
            if (placed || (option.name == "replicaof" && value.empty())) {
                lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
                --i;
                continue;
            }
            lines[i] = config_line(option.name, value);
            placed = true;
        }
        if (!placed && value != option.show(at_default)) {
            appended.push_back(config_line(option.name, value));
        }
    }
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    if (!appended.empty()) {
        const std::string_view signature = "# Generated by CONFIG REWRITE";
        if (std::find(lines.begin(), lines.end(), signature) == lines.end()) {
            text += std::string(signature) + "\n";
        }
        for (const std::string& line : appended) text += line + "\n";
    }
    return text;
}

// `text` as the file at `path`: written beside it, fsynced, renamed over it,
// the directory fsynced.
core::Status replace_file(const std::string& path, const std::string& text) {
    const std::string temporary = path + ".rewrite-" + std::to_string(::getpid());
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return rewrite_failed(errno);
    const int written = core::write_all(fd, text.data(), text.size());
    const bool synced = written == 0 && ::fsync(fd) == 0;
    const int saved_errno = written != 0 ? written : errno;
    ::close(fd);
    if (!synced || ::rename(temporary.c_str(), path.c_str()) != 0) {
        const int failure = synced ? errno : saved_errno;
        ::unlink(temporary.c_str());
        return rewrite_failed(failure);
    }
    const auto slash = path.find_last_of('/');
    // The file is written, synced and in place: the rewrite succeeded. A
    // directory that cannot be synced leaves only the rename less durable.
    (void)core::fsync_directory(slash == std::string::npos ? "." : path.substr(0, slash + 1));
    return {};
}

void cmd_config_rewrite(ConfigContext& ctx, Args) {
    const std::string& path = ctx.config.config_file;
    if (path.empty()) {
        ctx.out.error(errors::kNoConfigFile);
        return;
    }
    core::Result<std::vector<std::string>> lines = read_lines(path);
    core::Status done =
        lines ? replace_file(path, rewritten(ctx, std::move(*lines))) : lines.failure();
    if (!done) {
        ctx.out.error("ERR " + done.error());
        return;
    }
    ctx.out.ok();
}

void cmd_config_resetstat(ConfigContext& ctx, Args) {
    ctx.server.stats.reset_stats();
    ctx.server.clients.reset_evicted_clients();
    ctx.out.ok();
}

// "    Set the configuration <directive> to <value> (NAME, NAME, ...; the
// rest is fixed at start).", the settable names from the option spec,
// wrapped as Redis wraps its help.
std::vector<std::string> config_set_help() {
    std::string text = "Set the configuration <directive> to <value> (";
    const char* separator = "";
    for (const OptionSpec& option : core::option_specs()) {
        if (option.set == nullptr) continue;
        text += separator;
        text += option.name;
        separator = ", ";
    }
    text += "; the rest is fixed at start).";
    std::vector<std::string> lines;
    constexpr std::size_t kWidth = 74;  // and 4 spaces of indent
    while (!text.empty()) {
        std::size_t cut = text.size();
        if (cut > kWidth) {
            cut = text.rfind(' ', kWidth);
            if (cut == std::string::npos) cut = kWidth;
        }
        lines.push_back("    " + text.substr(0, cut));
        text.erase(0, cut == text.size() ? cut : cut + 1);
    }
    return lines;
}

void cmd_config_help(Context& ctx, Args) {
    std::vector<std::string> help = {
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "GET <pattern>",
        "    Return parameters matching the glob-like <pattern>.", "SET <directive> <value>"};
    for (std::string& line : config_set_help()) help.push_back(std::move(line));
    for (const char* line :
         {"RESETSTAT", "    Reset statistics reported by the INFO command.", "REWRITE",
          "    Rewrite the configuration file with what changed at run time.", "HELP",
          "    Print this help."}) {
        help.emplace_back(line);
    }
    ctx.out.array(help.size());
    for (const std::string& line : help) ctx.out.simple(line);
}
}  // namespace

void register_config_commands(Registry& registry) {
    registry.register_handler<cmd_config_get>("config|get");
    registry.register_handler<cmd_config_set>("config|set");
    registry.register_handler<cmd_config_resetstat>("config|resetstat");
    registry.register_handler<cmd_config_rewrite>("config|rewrite");
    registry.register_handler<cmd_config_help>("config|help");
}

}  // namespace bloomery::command
