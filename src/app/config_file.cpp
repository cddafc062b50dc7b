// The --config file: each line `key = value` (TOML-like, what bloomery has
// always read) or `key value` (redis.conf, so a Redis user's lines work as
// written), `include FILE`, and every key checked against the option table.

#include "config_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <string_view>

#include "bloomery/core/ascii.hpp"

namespace bloomery::app {

namespace {

namespace fs = std::filesystem;

// Deep enough for a base file, a per-environment file and a per-host file;
// deeper is a mistake more likely than a design.
constexpr std::size_t kMaxIncludeDepth = 8;

// redis.conf directives bloomery does not have (Redis 7.0's config.c, with
// the older names Redis still reads): refused as settings with no meaning
// here, not as typos of bloomery's own keys. Options are looked up first, so
// a name here that bloomery gains as an option is read as that option.
constexpr std::string_view kRedisOnlySettings =
    "acl-pubsub-default acllog-max-len active-defrag-cycle-max active-defrag-cycle-min "
    "active-defrag-ignore-bytes active-defrag-max-scan-fields active-defrag-threshold-lower "
    "active-defrag-threshold-upper active-expire-effort activedefrag activerehashing "
    "always-show-logo aof-disable-auto-gc aof-load-truncated aof-rewrite-incremental-fsync "
    "aof-timestamp-enabled aof-use-rdb-preamble aof_rewrite_cpulist appenddirname "
    "bgsave_cpulist bind-source-addr bio_cpulist busy-reply-threshold "
    "cluster-allow-pubsubshard-when-down cluster-allow-reads-when-down "
    "cluster-allow-replica-migration cluster-announce-bus-port cluster-announce-hostname "
    "cluster-announce-ip cluster-announce-port cluster-announce-tls-port cluster-config-file "
    "cluster-link-sendbuf-limit cluster-migration-barrier cluster-node-timeout cluster-port "
    "cluster-preferred-endpoint-type cluster-replica-no-failover "
    "cluster-replica-validity-factor cluster-require-full-coverage cluster-slave-no-failover "
    "cluster-slave-validity-factor crash-log-enabled crash-memcheck-enabled daemonize "
    "databases disable-thp dynamic-hz enable-module-command "
    "enable-protected-configs hash-max-listpack-entries hash-max-listpack-value "
    "hash-max-ziplist-entries hash-max-ziplist-value hll-sparse-max-bytes hz ignore-warnings "
    "io-threads io-threads-do-reads jemalloc-bg-thread key-load-delay latency-tracking "
    "latency-tracking-info-percentiles lazyfree-lazy-eviction lazyfree-lazy-expire "
    "lazyfree-lazy-server-del lazyfree-lazy-user-del lazyfree-lazy-user-flush "
    "list-compress-depth list-max-listpack-size list-max-ziplist-size "
    "loading-process-events-interval-bytes loadmodule lua-time-limit maxmemory-clients "
    "maxmemory-eviction-tenacity maxmemory-policy maxmemory-samples min-replicas-max-lag "
    "min-replicas-to-write min-slaves-max-lag min-slaves-to-write no-appendfsync-on-rewrite "
    "notify-keyspace-events oom-score-adj oom-score-adj-values pidfile proc-title-template "
    "rdb-del-sync-files rdb-key-save-delay rdb-save-incremental-fsync rdbchecksum "
    "rdbcompression rename-command repl-disable-tcp-nodelay repl-diskless-load "
    "repl-diskless-sync repl-diskless-sync-delay repl-diskless-sync-max-replicas "
    "replica-announce-ip replica-announce-port replica-announced replica-ignore-maxmemory "
    "replica-lazy-flush replica-priority replica-read-only sanitize-dump-payload sentinel "
    "server_cpulist set-max-intset-entries set-proc-title slave-announce-ip "
    "slave-announce-port slave-ignore-maxmemory slave-lazy-flush slave-priority "
    "slave-read-only stream-node-max-bytes stream-node-max-entries supervised syslog-enabled "
    "syslog-facility syslog-ident tcp-backlog tcp-keepalive tls-ca-cert-dir tls-ciphers "
    "tls-ciphersuites tls-client-key-file-pass "
    "tls-dh-params-file tls-key-file-pass tls-prefer-server-ciphers tls-protocols "
    "tls-session-cache-size tls-session-cache-timeout tls-session-caching "
    "tracking-table-max-keys unixsocket unixsocketperm use-exit-on-panic user watchdog-period "
    "zset-max-listpack-entries zset-max-listpack-value zset-max-ziplist-entries "
    "zset-max-ziplist-value";

// What to say of a name that is not a key: Redis's old names of keys bloomery
// has, and Redis-only directives with a bloomery counterpart worth naming.
struct Hint {
    std::string_view name;
    std::string_view hint;
};
constexpr Hint kHints[] = {
    {"slaveof", "Redis's old name of 'replicaof'"},
    {"slave-serve-stale-data", "Redis's old name of 'replica-serve-stale-data'"},
    {"repl-ping-slave-period", "Redis's old name of 'repl-ping-replica-period'"},
    {"config", "a config file names others with 'include'"},
    {"loadmodule", "bloomery has the BF.* commands built in and loads no modules"},
    {"user", "bloomery reads users from the file named by 'aclfile'"},
    {"io-threads", "bloomery's worker threads are 'threads'"},
    {"maxmemory-policy",
     "bloomery evicts nothing: past 'maxmemory' commands that allocate answer -OOM"},
};

// Whether `name` is one of the space-separated `words`.
bool listed(std::string_view words, std::string_view name) {
    for (std::size_t start = 0; start < words.size();) {
        std::size_t end = words.find(' ', start);
        if (end == std::string_view::npos) end = words.size();
        if (words.substr(start, end - start) == name) return true;
        start = end + 1;
    }
    return false;
}

bool is_blank(char c) {
    return c == ' ' || c == '\t';
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
    return text;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = core::ascii_lower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// The escape after a backslash in double quotes (text[i] is the character
// after the backslash; i ends on the escape's last character). Redis's and
// TOML's common ones; anything else is refused rather than guessed at.
core::Status read_escape(std::string_view text, std::size_t& i, std::string& word) {
    switch (text[i]) {
        case 'n':
            word += '\n';
            return {};
        case 'r':
            word += '\r';
            return {};
        case 't':
            word += '\t';
            return {};
        case 'b':
            word += '\b';
            return {};
        case 'a':
            word += '\a';
            return {};
        case 'f':
            word += '\f';
            return {};
        case '\\':
        case '"':
        case '\'':
            word += text[i];
            return {};
        case 'x':
            if (i + 2 < text.size() && hex_digit(text[i + 1]) >= 0 && hex_digit(text[i + 2]) >= 0) {
                word += static_cast<char>(hex_digit(text[i + 1]) * 16 + hex_digit(text[i + 2]));
                i += 2;
                return {};
            }
            break;
        default:
            break;
    }
    // Not naming the character: the value may be a password.
    return core::Error{"unknown escape (a backslash takes n, r, t, b, a, f, \\, \", ' or xHH)"};
}

// A quoted word starting at text[i] (its opening quote); i ends past the
// closing quote. Double quotes take escapes; single quotes only \' (both as
// Redis's sdssplitargs).
core::Status read_quoted(std::string_view text, std::size_t& i, std::string& word) {
    const char quote = text[i++];
    for (; i < text.size(); ++i) {
        if (text[i] == quote) {
            ++i;
            return {};
        }
        if (text[i] != '\\' || i + 1 == text.size()) {
            word += text[i];
        } else if (quote == '\'') {
            if (text[i + 1] == '\'') ++i;
            word += text[i];
        } else if (core::Status escape = read_escape(text, ++i, word); !escape) {
            return escape;
        }
    }
    return core::Error{"unbalanced quotes"};
}

// The two forms of a line.
enum class LineForm {
    toml,   // `key = value`, what bloomery has always read
    redis,  // `key value`, as redis.conf
};

using Words = std::vector<std::string>;

// The words of a value. In the `key = value` form a word starting with '#'
// begins a comment, as after a TOML value; in the `key value` form it is a
// word, as Redis reads it (`requirepass #secret` is that password).
core::Result<Words> split_words(std::string_view text, LineForm form) {
    const bool toml = form == LineForm::toml;
    Words words;
    for (std::size_t i = 0;;) {
        while (i < text.size() && is_blank(text[i])) ++i;
        if (i == text.size() || (toml && text[i] == '#')) return words;
        std::string word;
        if (text[i] == '"' || text[i] == '\'') {
            if (core::Status quoted = read_quoted(text, i, word); !quoted) return quoted.failure();
            if (i < text.size() && !is_blank(text[i]) && !(toml && text[i] == '#')) {
                return core::Error{"closing quote must be followed by a space"};
            }
        } else {
            while (i < text.size() && !is_blank(text[i])) word += text[i++];
        }
        words.push_back(std::move(word));
    }
}

// A TOML array on one line, `["900 1", "300 10"]` or `[900, 1]`: its
// elements are the words.
core::Result<Words> read_array(std::string_view text) {
    Words words;
    std::size_t i = 1;  // past '['
    for (bool first = true;; first = false) {
        while (i < text.size() && is_blank(text[i])) ++i;
        if (i < text.size() && text[i] == ']' && first) break;
        std::string word;
        if (i < text.size() && (text[i] == '"' || text[i] == '\'')) {
            if (core::Status quoted = read_quoted(text, i, word); !quoted) return quoted.failure();
        } else {
            while (i < text.size() && !is_blank(text[i]) && text[i] != ',' && text[i] != ']') {
                word += text[i++];
            }
        }
        words.push_back(std::move(word));
        while (i < text.size() && is_blank(text[i])) ++i;
        if (i < text.size() && text[i] == ']') break;
        if (i == text.size() || text[i] != ',') {
            return core::Error{"an array must be '[a, b, ...]' on one line"};
        }
        ++i;
    }
    const std::string_view after = trim(text.substr(i + 1));
    if (!after.empty() && after.front() != '#') {
        return core::Error{"unexpected text after the array"};
    }
    return words;
}

// Levenshtein distance with adjacent transpositions counted as one edit
// ("requirepsas" is one slip, not two).
std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
            }
        }
    }
    return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(std::string_view name, const std::vector<std::string>& known) {
    // A third of the name may be wrong, at least one character: close enough
    // for a slip, far enough that unrelated names are not suggested.
    const std::size_t allowed = std::max<std::size_t>(1, name.size() / 3);
    std::string best;
    std::size_t best_distance = allowed + 1;
    for (const std::string& candidate : known) {
        const std::size_t distance = edit_distance(name, candidate);
        if (distance < best_distance) {
            best = candidate;
            best_distance = distance;
        }
    }
    return best;
}

namespace {

// One reading of a config file and the files it includes: the settings in
// the order first set (a later line for the same key replaces the value, or
// adds to it, in redis.conf's form, for lists that add up) and the problems found.
class FileReading {
public:
    FileReading(const std::vector<ConfigFileReader::Key>& keys, std::vector<std::string>& problems)
        : keys_(keys), problems_(problems) {
        for (const ConfigFileReader::Key& key : keys_) names_.push_back(key.name);
    }

    // Reads `input`, the file at `path`; `chain` holds the canonical paths
    // of the files being read (this one last), to refuse include cycles.
    void read(std::istream& input, const std::string& path, std::vector<std::string>& chain);

    std::vector<CLI::ConfigItem> items() const {
        std::vector<CLI::ConfigItem> items;
        for (const auto& [name, value] : settings_) {
            items.emplace_back();
            items.back().name = name;
            items.back().inputs = {value};
        }
        return items;
    }

private:
    void read_line(std::string_view line, const std::string& path, const std::string& where,
                   std::vector<std::string>& chain);
    void include(const std::vector<std::string>& words, const std::string& path,
                 const std::string& where, std::vector<std::string>& chain);
    const ConfigFileReader::Key* find_key(const std::string& key, const std::string& where);
    // What a later line of a key does to the value set before.
    enum class Lines { replace, add_up };
    void set(const std::string& name, const std::string& value, Lines lines);

    const std::vector<ConfigFileReader::Key>& keys_;
    std::vector<std::string> names_;
    std::vector<std::string>& problems_;
    std::vector<std::pair<std::string, std::string>> settings_;
};

void FileReading::read(std::istream& input, const std::string& path,
                       std::vector<std::string>& chain) {
    std::size_t number = 0;
    for (std::string line; std::getline(input, line);) {
        ++number;
        if (number == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a BOM
        if (!line.empty() && line.back() == '\r') line.pop_back();
        read_line(line, path, path + ":" + std::to_string(number) + ": ", chain);
    }
    if (input.bad()) problems_.push_back(path + ": cannot read: " + std::strerror(errno));
}

void FileReading::read_line(std::string_view line, const std::string& path,
                            const std::string& where, std::vector<std::string>& chain) {
    line = trim(line);
    if (line.empty() || line.front() == '#' || line.front() == ';') return;
    if (line.front() == '[') {
        // CLI11's reader took [default] as the top level; other sections
        // would prefix their keys, which no option has.
        if (!core::iequals(line, "[default]")) {
            problems_.push_back(where + "sections are not supported: settings go at the top level");
        }
        return;
    }
    std::size_t end = 0;
    while (end < line.size() && !is_blank(line[end]) && line[end] != '=') ++end;
    const std::string written(line.substr(0, end));
    const bool printable = std::all_of(written.begin(), written.end(), [](char c) {
        return c > ' ' && c < 0x7f && c != '"' && c != '\'';
    });
    if (written.empty() || !printable) {
        problems_.push_back(where + "expected 'key = value' or 'key value'");
        return;
    }
    std::string_view rest = trim(line.substr(end));
    const bool toml = !rest.empty() && rest.front() == '=';
    if (toml) rest = trim(rest.substr(1));
    core::Result<Words> read = toml && !rest.empty() && rest.front() == '['
                                   ? read_array(rest)
                                   : split_words(rest, toml ? LineForm::toml : LineForm::redis);
    if (!read) {
        problems_.push_back(where + read.error() + " in the value of '" + written + "'");
        return;
    }
    Words& words = *read;
    const std::string key = core::ascii_lower(written);
    if (key == "include") {
        include(words, path, where, chain);
        return;
    }
    const ConfigFileReader::Key* known = find_key(written, where);
    if (known == nullptr) return;
    if (words.empty()) {
        // A bare `key` line sets a flag.
        if (known->spec->kind != core::OptionKind::flag) {
            problems_.push_back(where + "'" + written + "' needs a value");
            return;
        }
        words.emplace_back("true");
    }
    // Redis reads `save 900 1 # hourly` as three more words, not a comment;
    // so does this form, but says why rather than failing on the value.
    if (!toml && std::any_of(words.begin() + 1, words.end(), [](const std::string& word) {
            return !word.empty() && word[0] == '#';
        })) {
        problems_.push_back(where +
                            "'#' after a value is no comment in the 'key value' form, as "
                            "in Redis: put the comment on a line of its own");
        return;
    }
    // A list of words, which redis.conf writes unquoted (`save 900 1 300
    // 10`), is one value; every other key takes one word.
    if (words.size() > 1 && known->spec->kind != core::OptionKind::words) {
        problems_.push_back(where + "'" + written + "' takes one value, got " +
                            std::to_string(words.size()) +
                            " words (quote a value that holds spaces)");
        return;
    }
    std::string value;
    for (const std::string& word : words) value += (value.empty() ? "" : " ") + word;
    // redis.conf spreads some lists over lines that add up (`save 900 1`
    // then `save 300 10`; a client-output-buffer-limit line per class).
    set(known->name, value,
        !toml && has(known->spec->use, core::OptionUse::adds_up) ? Lines::add_up : Lines::replace);
}

// Redis's `include FILE`, relative to the including file's directory (so a
// file and the ones it includes can move together), read where it stands.
void FileReading::include(const std::vector<std::string>& words, const std::string& path,
                          const std::string& where, std::vector<std::string>& chain) {
    if (words.size() != 1 || words[0].empty()) {
        problems_.push_back(where + "include takes one file name");
        return;
    }
    if (chain.size() > kMaxIncludeDepth) {
        problems_.push_back(where + "includes nested more than " +
                            std::to_string(kMaxIncludeDepth) + " deep");
        return;
    }
    fs::path target = words[0];
    if (target.is_relative()) target = fs::path(path).parent_path() / target;
    const std::string name = target.lexically_normal().string();
    std::error_code ignored;
    if (fs::is_directory(target, ignored)) {
        problems_.push_back(where + "cannot include " + name + ": it is a directory");
        return;
    }
    std::ifstream input(target);
    if (!input) {
        problems_.push_back(where + "cannot include " + name + ": " + std::strerror(errno));
        return;
    }
    const std::string canonical = fs::weakly_canonical(target, ignored).string();
    if (std::find(chain.begin(), chain.end(), canonical) != chain.end()) {
        problems_.push_back(where + "include cycle: " + name + " is already being read");
        return;
    }
    chain.push_back(canonical);
    read(input, name, chain);
    chain.pop_back();
}

const ConfigFileReader::Key* FileReading::find_key(const std::string& key,
                                                   const std::string& where) {
    const std::string lower = core::ascii_lower(key);
    for (const ConfigFileReader::Key& known : keys_) {
        if (known.name == lower) return &known;
    }
    std::string problem = where + "unknown setting '" + key + "'";
    const auto hint = std::find_if(std::begin(kHints), std::end(kHints),
                                   [&](const Hint& h) { return h.name == lower; });
    if (hint != std::end(kHints)) {
        problem += " (" + std::string(hint->hint) + ")";
    } else if (listed(kRedisOnlySettings, lower)) {
        problem += " (a Redis setting with no meaning in bloomery)";
    } else if (const std::string nearest = closest_name(lower, names_); !nearest.empty()) {
        problem += " (did you mean '" + nearest + "'?)";
    } else {
        problem += " (bloomery --help lists the settings)";
    }
    problems_.push_back(std::move(problem));
    return nullptr;
}

void FileReading::set(const std::string& name, const std::string& value, Lines lines) {
    for (auto& [set_name, set_value] : settings_) {
        if (set_name != name) continue;
        // `save ""` clears the points before it, as in redis.conf.
        const bool add = lines == Lines::add_up && !value.empty() && !set_value.empty();
        if (add) {
            set_value += ' ';
            set_value += value;
        } else {
            set_value = value;
        }
        return;
    }
    settings_.emplace_back(name, value);
}

}  // namespace

ConfigFileReader::ConfigFileReader(const CLI::App& app) : file_option_(app.get_config_ptr()) {
    for (const core::OptionSpec& spec : core::option_specs()) {
        if (has(spec.use, core::OptionUse::command_line))
            keys_.push_back({std::string(spec.name), &spec});
    }
}

std::vector<CLI::ConfigItem> ConfigFileReader::from_config(std::istream& input) const {
    problems_.clear();
    // CLI11 opened the file named by --config (or BLOOMERY_CONFIG, its
    // default then); its name is that option's value.
    std::string path = file_option_ != nullptr ? file_option_->as<std::string>() : "";
    if (path.empty()) path = "config file";
    std::error_code ignored;
    std::vector<std::string> chain{fs::weakly_canonical(path, ignored).string()};
    FileReading reading(keys_, problems_);
    reading.read(input, path, chain);
    return reading.items();
}

std::string ConfigFileReader::to_config(const CLI::App* app, bool default_also,
                                        bool write_description, std::string prefix) const {
    return CLI::ConfigTOML().to_config(app, default_also, write_description, std::move(prefix));
}

std::vector<std::string> misspelled_environment(const CLI::App& app) {
    constexpr std::string_view kPrefix = "BLOOMERY_";
    std::vector<std::string> read;  // the names options read, less the prefix
    for (const CLI::Option* option : app.get_options()) {
        const std::string& name = option->get_envname();
        if (name.rfind(kPrefix, 0) == 0) read.push_back(name.substr(kPrefix.size()));
    }
    std::vector<std::string> warnings;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        const std::string_view variable(*entry);
        const std::string_view name = variable.substr(0, variable.find('='));
        if (name.rfind(kPrefix, 0) != 0) continue;
        const std::string rest(name.substr(kPrefix.size()));
        if (std::find(read.begin(), read.end(), rest) != read.end()) continue;
        if (const std::string nearest = closest_name(rest, read); !nearest.empty()) {
            warnings.push_back("environment: " + std::string(name) +
                               " is not a setting and is ignored (did you mean " +
                               std::string(kPrefix) + nearest + "?)");
        }
    }
    return warnings;
}

}  // namespace bloomery::app
