#include "bloomery/command/acl.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "bloomery/command/errors.hpp"
#include "bloomery/command/glob.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/ascii.hpp"
#include "bloomery/core/printable.hpp"

namespace bloomery::command {

namespace {

using core::iequals;

// Names and key patterns go into space-separated rule lines (ACL LIST, the
// ACL file) and CLIENT LIST, so they are printable ASCII without spaces.
bool printable_word(std::string_view word) {
    if (word.empty()) return false;
    for (char c : word) {
        if (c < '!' || c > '~') return false;
    }
    return true;
}

bool parse_digest_hex(std::string_view hex, PasswordDigest& digest) {
    if (hex.size() != digest.size() * 2) return false;
    auto value = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;  // upper case is refused, as Redis does
    };
    for (std::size_t i = 0; i < digest.size(); ++i) {
        const int high = value(hex[2 * i]);
        const int low = value(hex[2 * i + 1]);
        if (high < 0 || low < 0) return false;
        digest[i] = static_cast<unsigned char>(high * 16 + low);
    }
    return true;
}

// A rule as it may appear in an error message: password rules never do.
std::string quoted_rule(std::string_view rule) {
    if (!rule.empty() && (rule[0] == '>' || rule[0] == '<' || rule[0] == '#' || rule[0] == '!')) {
        return "(a password rule)";
    }
    std::string out = "'";
    core::append_printable(out, rule, 128);
    return out + "'";
}

}  // namespace

namespace {
std::atomic<std::uint64_t> password_hashes{0};
}  // namespace

std::uint64_t password_hashes_computed() {
    return password_hashes.load(std::memory_order_relaxed);
}

PasswordDigest hash_password(std::string_view password) {
    // AUTH, ACL rules and nothing per command: a shared counter is cheap here.
    password_hashes.fetch_add(1, std::memory_order_relaxed);
    PasswordDigest digest{};
    unsigned int length = 0;
    if (EVP_Digest(password.data(), password.size(), digest.data(), &length, EVP_sha256(),
                   nullptr) != 1 ||
        length != digest.size()) {
        // Only fails if OpenSSL cannot allocate or has no SHA-256: nothing
        // sensible to authenticate against.
        throw std::runtime_error("SHA-256 is not available from OpenSSL");
    }
    return digest;
}

bool digests_equal(const PasswordDigest& a, const PasswordDigest& b) {
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string digest_hex(const PasswordDigest& digest) {
    static constexpr char kHexDigits[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(digest.size() * 2);
    for (unsigned char byte : digest) {
        hex.push_back(kHexDigits[byte >> 4]);
        hex.push_back(kHexDigits[byte & 0x0f]);
    }
    return hex;
}

// ---- AclUser ---------------------------------------------------------------

AclUser::AclUser(std::string name, const Registry& registry)
    : name_(std::move(name)),
      allowed_((registry.by_id().size() + 63) / 64, 0),
      command_rules_{"-@all"} {
    allow_no_auth_commands(registry);
}

void AclUser::set_command(const CommandSpec& spec, Grant grant) {
    const std::uint64_t bit = std::uint64_t{1} << (spec.id % 64);
    if (grant == Grant::allow) {
        allowed_[spec.id / 64] |= bit;
    } else {
        allowed_[spec.id / 64] &= ~bit;
    }
    // A container's rule covers its subcommands, as in Redis (+client
    // allows every CLIENT subcommand).
    for (const auto& sub : spec.subcommands) set_command(*sub, grant);
}

void AclUser::set_all_commands(Grant grant) {
    std::fill(allowed_.begin(), allowed_.end(), grant == Grant::allow ? ~std::uint64_t{0} : 0);
}

void AclUser::allow_no_auth_commands(const Registry& registry) {
    for (const CommandSpec* spec : registry.by_id()) {
        if (spec->no_auth) allowed_[spec->id / 64] |= std::uint64_t{1} << (spec->id % 64);
    }
}

bool AclUser::keys_match(const CommandSpec& spec, Args argv) const {
    // The positions Registry::key_positions lists (MIGRATE's after KEYS
    // included), walked without building its vector: this runs before every
    // command of a key-limited user.
    const KeyRange range = key_range(spec, argv);
    for (long position = range.first; position <= range.last; position += range.step) {
        const std::string_view key = argv[static_cast<std::size_t>(position)];
        const bool matched =
            std::any_of(keys_.patterns.begin(), keys_.patterns.end(),
                        [&](const std::string& pattern) { return glob_match(pattern, key); });
        if (!matched) return false;
    }
    return true;
}

bool AclUser::authenticates(std::string_view password) const {
    // Hashed and compared whether or not the user is on, so the time taken
    // does not tell an "off" user from one that is on or does not exist.
    const PasswordDigest offered = hash_password(password);
    bool matched = false;
    // No early exit: every stored digest is compared, so the time depends
    // only on how many passwords the user has.
    for (const PasswordDigest& stored : passwords_) {
        matched = digests_equal(offered, stored) | matched;
    }
    return enabled_ && (matched || nopass_);
}

core::Status AclUser::apply_command_rule(std::string_view rule, const Registry& registry) {
    const Grant grant = rule[0] == '+' ? Grant::allow : Grant::deny;
    const std::string_view target = rule.substr(1);
    if (!target.empty() && target[0] == '@') {
        const int category = registry.category_index(target.substr(1));
        if (category < 0) return core::Error{"unknown command or category " + quoted_rule(rule)};
        const std::uint64_t mask = std::uint64_t{1} << category;
        for (const CommandSpec* spec : registry.all()) {
            // A container in the category brings all its subcommands; a
            // subcommand in it comes alone (Redis's order: parent, then each
            // subcommand by its own categories).
            if (spec->categories & mask) set_command(*spec, grant);
            for (const auto& sub : spec->subcommands) {
                if (sub->categories & mask) set_command(*sub, grant);
            }
        }
        return {};
    }
    const std::size_t bar = target.find('|');
    const CommandSpec* spec = registry.find(target.substr(0, bar));
    if (spec != nullptr && bar != std::string_view::npos) {
        if (spec->subcommands.empty()) {
            // Redis's deprecated "+select|0" (one first argument of a command).
            return core::Error{"allowing one first argument of a command (" + quoted_rule(rule) +
                               ") is not supported"};
        }
        spec = spec->find_subcommand(target.substr(bar + 1));
    }
    if (spec == nullptr) return core::Error{"unknown command or category " + quoted_rule(rule)};
    set_command(*spec, grant);
    return {};
}

core::Status AclUser::apply_password_rule(std::string_view rule) {
    const char first = rule[0];
    PasswordDigest digest{};
    if (first == '>' || first == '<') {
        digest = hash_password(rule.substr(1));
    } else if (!parse_digest_hex(rule.substr(1), digest)) {
        return core::Error{std::string("a password hash (") + first +
                           ") must be 64 lower-case hex digits"};
    }
    if (first == '>' || first == '#') {
        if (std::none_of(passwords_.begin(), passwords_.end(),
                         [&](const PasswordDigest& p) { return p == digest; })) {
            passwords_.push_back(digest);
        }
        nopass_ = false;
        return {};
    }
    const auto it = std::find(passwords_.begin(), passwords_.end(), digest);
    if (it == passwords_.end()) {
        return core::Error{"the password to remove is not one of this user's"};
    }
    passwords_.erase(it);
    return {};
}

struct AclUser::PatternRuleWords {
    std::string_view all;    // the rule that allows every name ("allkeys")
    std::string_view star;   // its short form ("~*")
    std::string_view reset;  // the rule that allows none ("resetkeys")
    std::string_view noun;   // what the patterns match, in messages ("key")
};

// Key patterns and channel patterns follow one grammar: all, none, or a
// list that only grows; a pattern after "all" would say nothing and is
// refused rather than silently ignored.
core::Status AclUser::apply_pattern_rule(PatternRules& rules, std::string_view rule,
                                         const PatternRuleWords& words) {
    if (iequals(rule, words.all) || rule == words.star) {
        rules.all = true;
        rules.patterns.clear();
        return {};
    }
    if (iequals(rule, words.reset)) {
        rules.all = false;
        rules.patterns.clear();
        return {};
    }
    const std::string what = "the " + std::string(words.noun) + " pattern " + quoted_rule(rule);
    if (rules.all) {
        return core::Error{what + " after " + std::string(words.all) + " (" +
                           std::string(words.star) + ") would have no effect; put " +
                           std::string(words.reset) + " before it"};
    }
    const std::string_view pattern = rule.substr(1);
    if (!printable_word(pattern)) return core::Error{what + " is empty or not printable ASCII"};
    if (std::find(rules.patterns.begin(), rules.patterns.end(), pattern) == rules.patterns.end()) {
        rules.patterns.emplace_back(pattern);
    }
    return {};
}

core::Status AclUser::apply_key_rule(std::string_view rule) {
    static constexpr PatternRuleWords kKeyWords{"allkeys", "~*", "resetkeys", "key"};
    if (rule[0] == '%') {
        return core::Error{"read-only and write-only key patterns (" + quoted_rule(rule) +
                           ") are not supported; use ~pattern"};
    }
    return apply_pattern_rule(keys_, rule, kKeyWords);
}

core::Status AclUser::apply_channel_rule(std::string_view rule) {
    static constexpr PatternRuleWords kChannelWords{"allchannels", "&*", "resetchannels",
                                                    "channel"};
    return apply_pattern_rule(channels_, rule, kChannelWords);
}

bool AclUser::may_access_channel(std::string_view name, ChannelKind kind) const {
    if (channels_.all) return true;
    for (const std::string& pattern : channels_.patterns) {
        if (kind == ChannelKind::pattern ? pattern == name : glob_match(pattern, name)) return true;
    }
    return false;
}

core::Status AclUser::apply_rule(std::string_view rule, const Registry& registry) {
    if (rule.empty()) return {};  // Redis: an empty rule does nothing
    const char first = rule[0];
    core::Status applied;
    if (iequals(rule, "on")) {
        enabled_ = true;
    } else if (iequals(rule, "off")) {
        enabled_ = false;
    } else if (iequals(rule, "nopass")) {
        nopass_ = true;
        passwords_.clear();
    } else if (iequals(rule, "resetpass")) {
        nopass_ = false;
        passwords_.clear();
    } else if (first == '>' || first == '#' || first == '<' || first == '!') {
        applied = apply_password_rule(rule);
    } else if (iequals(rule, "allkeys") || iequals(rule, "resetkeys") || first == '~' ||
               first == '%') {
        applied = apply_key_rule(rule);
    } else if (first == '&' || iequals(rule, "allchannels") || iequals(rule, "resetchannels")) {
        applied = apply_channel_rule(rule);
    } else if (iequals(rule, "sanitize-payload") || iequals(rule, "skip-sanitize-payload")) {
        // RESTORE payloads are always checked whole (a checksum over every
        // byte); the rules are accepted so ACL files written for Redis load.
    } else if (iequals(rule, "allcommands") || iequals(rule, "+@all")) {
        set_all_commands(Grant::allow);
        command_rules_.assign({"+@all"});
    } else if (iequals(rule, "nocommands") || iequals(rule, "-@all")) {
        set_all_commands(Grant::deny);
        command_rules_.assign({"-@all"});
    } else if (iequals(rule, "reset")) {
        enabled_ = false;
        nopass_ = false;
        passwords_.clear();
        keys_ = PatternRules{};
        channels_ = PatternRules{};
        set_all_commands(Grant::deny);
        command_rules_.assign({"-@all"});
    } else if ((first == '+' || first == '-') && rule.size() > 1) {
        applied = apply_command_rule(rule, registry);
        if (applied) command_rules_.push_back(core::ascii_lower(rule));
    } else if (first == '(' || iequals(rule, "clearselectors")) {
        return core::Error{"selectors " + quoted_rule(rule) + " are not supported"};
    } else {
        return core::Error{"unknown rule " + quoted_rule(rule)};
    }
    if (!applied) return applied;
    allow_no_auth_commands(registry);
    return {};
}

std::string AclUser::describe() const {
    std::string line = "user " + name_ + (enabled_ ? " on" : " off");
    if (nopass_) line += " nopass";
    for (const PasswordDigest& digest : passwords_) line += " #" + digest_hex(digest);
    if (keys_.all) {
        line += " ~*";
    } else {
        for (const std::string& pattern : keys_.patterns) line += " ~" + pattern;
    }
    if (channels_.all) {
        line += " &*";
    } else {
        line += " resetchannels";
        for (const std::string& pattern : channels_.patterns) line += " &" + pattern;
    }
    for (const std::string& rule : command_rules_) line += " " + rule;
    return line;
}

// ---- Acl -------------------------------------------------------------------

Acl::Acl(const Registry& registry) {
    auto user = std::make_unique<AclUser>(std::string(kDefaultUserName), registry);
    for (std::string_view rule : {"on", "nopass", "~*", "&*", "+@all"}) {
        (void)user->apply_rule(rule, registry);  // valid rules: cannot fail
    }
    users_.emplace(std::string(kDefaultUserName), std::move(user));
    finish();
}

void Acl::finish() {
    default_user_ = users_.find(kDefaultUserName)->second.get();
    auth_required_ = !(default_user_->enabled() && default_user_->nopass());
}

namespace {

// One line's words: separated by spaces and tabs, a '\r' before the '\n'
// ignored.
std::vector<std::string_view> split_words(std::string_view line) {
    std::vector<std::string_view> words;
    for (std::size_t i = 0; i < line.size();) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
        const std::size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
        if (i > start) words.push_back(line.substr(start, i - start));
    }
    return words;
}

}  // namespace

core::Status Acl::add_file_user(const Registry& registry,
                                const std::vector<std::string_view>& words) {
    if (words[0] != "user" || words.size() < 2) {
        return core::Error{"a line must be 'user NAME rule...'"};
    }
    const std::string_view name = words[1];
    if (!printable_word(name)) {
        return core::Error{"a user name must be printable ASCII without spaces"};
    }
    if (users_.count(name) != 0) {
        return core::Error{"user '" + std::string(name) + "' is defined twice"};
    }
    auto user = std::make_unique<AclUser>(std::string(name), registry);
    for (std::size_t i = 2; i < words.size(); ++i) {
        if (const core::Status applied = user->apply_rule(words[i], registry); !applied) {
            return core::Error{"user '" + std::string(name) + "': " + applied.error()};
        }
    }
    users_.emplace(std::string(name), std::move(user));
    return {};
}

core::Status Acl::add_file_users(const Registry& registry, std::string_view aclfile_name,
                                 std::string_view aclfile_text) {
    std::size_t line_number = 0;
    std::size_t line_start = 0;
    while (line_start < aclfile_text.size()) {
        std::size_t line_end = aclfile_text.find('\n', line_start);
        if (line_end == std::string_view::npos) line_end = aclfile_text.size();
        const std::string_view line = aclfile_text.substr(line_start, line_end - line_start);
        line_start = line_end + 1;
        ++line_number;
        const std::vector<std::string_view> words = split_words(line);
        if (words.empty() || words[0][0] == '#') continue;
        if (const core::Status added = add_file_user(registry, words); !added) {
            return core::Error{std::string(aclfile_name) + ":" + std::to_string(line_number) +
                               ": " + added.error()};
        }
    }
    return {};
}

void Acl::add_default_user(const Registry& registry, std::string_view requirepass) {
    auto user = std::make_unique<AclUser>(std::string(kDefaultUserName), registry);
    // Valid rules: none of them can fail.
    for (std::string_view rule : {"on", "~*", "&*", "+@all"}) {
        (void)user->apply_rule(rule, registry);
    }
    if (requirepass.empty()) {
        (void)user->apply_rule("nopass", registry);
    } else {
        // Appended, not "literal" + std::string: GCC 12 reports a false
        // -Wrestrict on that once inlined (GCC bug 105329).
        std::string password_rule = ">";
        password_rule += requirepass;
        (void)user->apply_rule(password_rule, registry);
    }
    users_.emplace(std::string(kDefaultUserName), std::move(user));
}

core::Result<std::shared_ptr<const Acl>> Acl::build(const Registry& registry,
                                                    std::string_view requirepass,
                                                    std::string_view aclfile_name,
                                                    std::string_view aclfile_text) {
    std::shared_ptr<Acl> acl(new Acl());
    if (!aclfile_name.empty()) {
        if (core::Status added = acl->add_file_users(registry, aclfile_name, aclfile_text);
            !added) {
            return added.failure();
        }
    }
    if (acl->users_.count(kDefaultUserName) == 0) {
        acl->add_default_user(registry, requirepass);
    } else if (!requirepass.empty()) {
        return core::Error{std::string(aclfile_name) +
                           " defines the default user and --requirepass sets its password too; "
                           "keep one (e.g. a '>password' rule on the 'user default' line)"};
    }
    acl->finish();
    return std::shared_ptr<const Acl>(std::move(acl));
}

const AclUser* Acl::find(std::string_view name) const {
    const auto it = users_.find(name);
    return it == users_.end() ? nullptr : it->second.get();
}

const AclUser* Acl::authenticate(std::string_view name, std::string_view password) const {
    const AclUser* user = find(name);
    if (user == nullptr) {
        // Hash anyway, so an unknown name costs what a wrong password does.
        (void)hash_password(password);
        return nullptr;
    }
    return user->authenticates(password) ? user : nullptr;
}

std::vector<const AclUser*> Acl::users() const {
    std::vector<const AclUser*> out;
    out.reserve(users_.size());
    for (const auto& [name, user] : users_) out.push_back(user.get());
    return out;
}

core::Status configure_access_control(Registry& registry, const core::Config& config) {
    std::string text;
    if (!config.aclfile.empty()) {
        const auto unreadable = [&] {
            return core::Error{"cannot read --aclfile " + config.aclfile + ": " +
                               std::strerror(errno)};
        };
        std::ifstream file(config.aclfile, std::ios::binary);
        if (!file) return unreadable();
        std::ostringstream content;
        content << file.rdbuf();
        if (file.bad()) return unreadable();
        text = content.str();
    }
    auto acl = Acl::build(registry, config.requirepass, config.aclfile, text);
    if (!acl) return acl.failure();
    registry.set_acl(std::move(*acl));
    return {};
}

core::Status authenticate_client(const Acl& acl, ClientState& client, std::string_view username,
                                 std::string_view password) {
    const AclUser* user = acl.authenticate(username, password);
    // One reason for an unknown user, a disabled one and a wrong password,
    // so the reply does not tell which names exist.
    if (user == nullptr) return core::Error{std::string(errors::kWrongPass)};
    client.user.store(user, std::memory_order_relaxed);
    client.authenticated = true;
    return {};
}

}  // namespace bloomery::command
