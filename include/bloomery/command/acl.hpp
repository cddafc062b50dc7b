#pragma once
// Access control: users, their passwords, and the commands and keys each may
// use, in a subset of Redis's ACL rules (README "Security" lists it). Built
// once at start from --requirepass / --requirepass-file / --aclfile and the
// command table, then read-only: worker threads read it without locks, and a
// client keeps a plain pointer to its user for the life of the server.
//
// The check before every command is one bit test: each user holds a bitset
// over CommandSpec::id, computed from its rules when the ACL is built; no
// string is looked at unless the user is limited to key patterns.
//
// Thread safety: const after build; every const member is safe from any thread.

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/command/context.hpp"
#include "bloomery/command/pubsub.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/result.hpp"

namespace bloomery::command {

// SHA-256 of a password: a user stores only digests, and ACL LIST shows them
// as 64 hex digits (Redis's "#<hash>" rule form).
using PasswordDigest = std::array<unsigned char, 32>;
PasswordDigest hash_password(std::string_view password);
// How many times hash_password() ran since start (any thread). AUTH hashes
// the offered password exactly once whether the user is on, off or missing,
// so its time does not reveal which users exist; tests count on this.
std::uint64_t password_hashes_computed();
// True if equal. Looks at all 32 bytes whatever they hold (OpenSSL's
// CRYPTO_memcmp), so the time taken says nothing about where they differ.
bool digests_equal(const PasswordDigest& a, const PasswordDigest& b);
std::string digest_hex(const PasswordDigest& digest);

// The name every connection starts as, and the one AUTH <password> checks.
inline constexpr std::string_view kDefaultUserName = "default";

class AclUser {
public:
    // A new user as Redis makes one: off, no password, no keys, no commands
    // (except the no_auth ones every user may run: AUTH, HELLO, QUIT).
    AclUser(std::string name, const Registry& registry);

    const std::string& name() const { return name_; }
    bool enabled() const { return enabled_; }
    bool nopass() const { return nopass_; }
    bool all_keys() const { return keys_.all; }
    std::size_t password_count() const { return passwords_.size(); }

    // Applies one rule ("on", ">secret", "~*", "+@read", "-flushall",
    // "+client|list", ...). Fails, saying why, on a rule that is malformed,
    // unknown or outside the supported subset; the reason never repeats a
    // password.
    core::Status apply_rule(std::string_view rule, const Registry& registry);

    // True if the user is on and `password` is one of its passwords (any
    // password, if it is nopass). Hashes `password` once and compares the
    // digest with every stored one, without stopping at the first match,
    // also when the user is off.
    bool authenticates(std::string_view password) const;

    // May this user run `spec` (the subcommand, for a container)? One bit
    // test; inline, since dispatch asks before every command.
    bool may_run(const CommandSpec& spec) const {
        return (allowed_[spec.id / 64] >> (spec.id % 64)) & 1;
    }
    // May it name every key that `argv` names for `spec`? True at once for a
    // user with all keys and for commands without keys.
    bool may_access_keys(const CommandSpec& spec, Args argv) const {
        return keys_.all || keys_match(spec, argv);
    }
    // May it publish to or subscribe to the channel `name` (a channel
    // pattern of its matches it)? For a pattern (PSUBSCRIBE), Redis 7's rule:
    // it must be one of the user's own, character for character.
    bool may_access_channel(std::string_view name, ChannelKind kind) const;
    bool all_channels() const { return channels_.all; }

    // As ACL LIST shows it and an ACL file accepts it:
    // "user reader on #<sha256 hex> ~* -@all +@read".
    std::string describe() const;

private:
    // What a command rule does to the commands it names.
    enum class Grant { allow, deny };
    // The keys (~pattern) or the channels (&pattern) a user may name: all,
    // or those matching one of `patterns` (globs).
    struct PatternRules {
        bool all = false;
        std::vector<std::string> patterns;
    };
    // The words of the rules of one PatternRules: "allkeys", "~*",
    // "resetkeys" and "key" in its messages, or the channels' equivalents.
    struct PatternRuleWords;

    bool keys_match(const CommandSpec& spec, Args argv) const;
    void set_command(const CommandSpec& spec, Grant grant);
    void set_all_commands(Grant grant);
    // No_auth commands stay runnable whatever the rules say, as in Redis.
    void allow_no_auth_commands(const Registry& registry);
    core::Status apply_command_rule(std::string_view rule, const Registry& registry);
    // >password, #hash, <password, !hash.
    core::Status apply_password_rule(std::string_view rule);
    // allkeys, ~*, resetkeys, ~pattern (and %, refused).
    core::Status apply_key_rule(std::string_view rule);
    // allchannels, &*, resetchannels, &pattern.
    core::Status apply_channel_rule(std::string_view rule);
    static core::Status apply_pattern_rule(PatternRules& rules, std::string_view rule,
                                           const PatternRuleWords& words);

    std::string name_;
    bool enabled_ = false;
    bool nopass_ = false;
    std::vector<PasswordDigest> passwords_;
    PatternRules keys_;
    // Pub/Sub channels; a new user has none (Redis 7's acl-pubsub-default
    // resetchannels).
    PatternRules channels_;
    std::vector<std::uint64_t> allowed_;  // bit CommandSpec::id: may run it
    // The command rules as applied, for describe(): starts at "+@all" or
    // "-@all" and lists what was added or taken away since.
    std::vector<std::string> command_rules_;
};

class Acl {
public:
    // Only the default user: on, no password, all keys, every command (what
    // a fresh Redis has).
    explicit Acl(const Registry& registry);

    // The server's ACL from its settings. `aclfile_text` is the content of
    // the ACL file named `aclfile_name` (empty name: none). Lines are
    // "user NAME rule..."; blank lines and lines starting with '#' are
    // skipped. The default user is the file's "user default" line if it has
    // one (then `requirepass` must be empty: both would set it), else "on
    // nopass ~* +@all", or "on >requirepass ~* +@all" when a password is
    // given. Errors name the file and line: "users.acl:3: ...".
    static core::Result<std::shared_ptr<const Acl>> build(const Registry& registry,
                                                          std::string_view requirepass,
                                                          std::string_view aclfile_name,
                                                          std::string_view aclfile_text);

    const AclUser& default_user() const { return *default_user_; }
    const AclUser* find(std::string_view name) const;
    // The user if it exists, is on and accepts the password; nullptr otherwise
    // (the caller answers WRONGPASS either way, as Redis does).
    const AclUser* authenticate(std::string_view name, std::string_view password) const;
    // Every user, ordered by name (ACL LIST / ACL USERS order).
    std::vector<const AclUser*> users() const;

    // True when a new connection must authenticate before running commands
    // other than the no_auth ones: the default user is off or has passwords.
    bool auth_required() const { return auth_required_; }
    bool is_authenticated(const ClientState& client) const {
        return client.authenticated || !auth_required_;
    }
    // The user a client runs as: the one it authenticated as, else default.
    const AclUser& user_of(const ClientState& client) const {
        const AclUser* user = client.user.load(std::memory_order_relaxed);
        return user != nullptr ? *user : *default_user_;
    }

private:
    Acl() = default;
    // Adds the user of each line of the ACL file.
    core::Status add_file_users(const Registry& registry, std::string_view aclfile_name,
                                std::string_view aclfile_text);
    // Adds the user of one line of it, split into words.
    core::Status add_file_user(const Registry& registry,
                               const std::vector<std::string_view>& words);
    // The default user when the file has none: --requirepass's password, or
    // none.
    void add_default_user(const Registry& registry, std::string_view requirepass);
    void finish();

    std::map<std::string, std::unique_ptr<AclUser>, std::less<>> users_;
    const AclUser* default_user_ = nullptr;
    bool auth_required_ = false;
};

// Reads --requirepass / --aclfile from `config`, builds the ACL and installs
// it in `registry`. Fails, saying why (naming the file and line), when the
// ACL file cannot be read or has an error: the server must not start.
core::Status configure_access_control(Registry& registry, const core::Config& config);

// AUTH's check, shared with HELLO ... AUTH: on success the client runs as
// that user from its next command. On failure it keeps its user, and the
// reason is WRONGPASS whatever failed (an unknown user, one that is off, a
// wrong password), so the reply does not tell which names exist. On the
// client's own thread.
core::Status authenticate_client(const Acl& acl, ClientState& client, std::string_view username,
                                 std::string_view password);

}  // namespace bloomery::command
