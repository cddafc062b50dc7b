// Access control without sockets: password digests, ACL file parsing, rule
// application, the parser's pre-authentication limits and the security
// options. What the commands answer (AUTH, HELLO, ACL, NOAUTH, NOPERM) is
// in acl_commands_test.cpp.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "bloomery/app/command_line.hpp"
#include "bloomery/command/acl.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/resp/parser.hpp"

namespace bloomery::command {
namespace {

// A handler that does nothing, for tables built in a test.
void ignore_command(Context&, Args) {}

// SHA-256 test vectors (FIPS 180-2).
constexpr std::string_view kSha256OfAbc =
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr std::string_view kSha256OfEmpty =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

const Registry& table() {
    static const Registry registry = [] {
        Registry r;
        if (const auto built = build_default_registry(r); !built) {
            throw std::runtime_error(built.error());
        }
        return r;
    }();
    return registry;
}

const CommandSpec& spec(std::string_view name) {
    const std::size_t bar = name.find('|');
    const CommandSpec* found = table().find(name.substr(0, bar));
    if (found != nullptr && bar != std::string_view::npos) {
        found = found->find_subcommand(name.substr(bar + 1));
    }
    if (found == nullptr) throw std::runtime_error("no command " + std::string(name));
    return *found;
}

std::shared_ptr<const Acl> build(std::string_view text, std::string_view requirepass = "") {
    auto acl = Acl::build(table(), requirepass, "users.acl", text);
    EXPECT_TRUE(acl) << acl.error();
    return acl ? *acl : nullptr;
}

std::string build_error(std::string_view text, std::string_view requirepass = "") {
    auto acl = Acl::build(table(), requirepass, "users.acl", text);
    EXPECT_FALSE(acl);
    return acl ? std::string() : acl.error();
}

constexpr std::string_view kUsers =
    "user reader on >rpw ~* +@read\n"
    "user writer on >wpw ~* +@read +@write -@dangerous\n"
    "user admin on >apw ~* +@all\n";

TEST(PasswordDigest, IsSha256AndComparesEveryByte) {
    EXPECT_EQ(digest_hex(hash_password("abc")), kSha256OfAbc);
    EXPECT_EQ(digest_hex(hash_password("")), kSha256OfEmpty);
    const PasswordDigest a = hash_password("secret");
    PasswordDigest first = a, last = a;
    first[0] ^= 1;
    last[31] ^= 0x80;
    EXPECT_TRUE(digests_equal(a, hash_password("secret")));
    EXPECT_FALSE(digests_equal(a, first));
    EXPECT_FALSE(digests_equal(a, last));
    // Binary passwords: a NUL byte is part of the password.
    EXPECT_FALSE(digests_equal(hash_password(std::string_view("a\0b", 3)), hash_password("a")));
}

TEST(Registry, CommandCategoriesMustBeListedOnce) {
    Registry registry;
    registry.register_handler<ignore_command>("ping");
    const std::string entry =
        R"({"name":"ping","arity":-1,"flags":["no_auth"],"first_key":0,"last_key":0,"step":0,)";
    const core::Status built =
        registry.build(R"({"acl_categories":["@fast","@connection"],"commands":[)" + entry +
                       R"("acl_categories":["@connection"]}]})");
    EXPECT_TRUE(built) << built.error();
    EXPECT_EQ(registry.categories(), (std::vector<std::string>{"fast", "connection"}));
    EXPECT_EQ(registry.find("ping")->categories, 2u);
    EXPECT_TRUE(registry.find("ping")->no_auth);
    for (std::string_view bad : {R"("@slow")", R"("")", R"("connection")"}) {
        const core::Status refused =
            registry.build(R"({"acl_categories":["@fast","@connection"],"commands":[)" + entry +
                           R"("acl_categories":[)" + std::string(bad) + "]}]}");
        EXPECT_FALSE(refused) << bad;
        EXPECT_NE(refused.error().find("not in the top-level \"acl_categories\""),
                  std::string::npos)
            << refused.error();
    }
}

TEST(Acl, WithoutSettingsTheDefaultUserRunsEverythingWithoutPassword) {
    const Acl& acl = table().acl();
    EXPECT_FALSE(acl.auth_required());
    EXPECT_EQ(acl.default_user().describe(), "user default on nopass ~* &* +@all");
    for (const CommandSpec* command : table().by_id()) {
        EXPECT_TRUE(acl.default_user().may_run(*command)) << command->name;
    }
    EXPECT_TRUE(acl.is_authenticated(ClientState{}));
}

TEST(Acl, RequirepassGivesTheDefaultUserThatPasswordOnly) {
    auto acl = build("", "s3cret");
    ASSERT_TRUE(acl);
    EXPECT_TRUE(acl->auth_required());
    EXPECT_FALSE(acl->default_user().nopass());
    EXPECT_FALSE(acl->is_authenticated(ClientState{}));
    EXPECT_EQ(acl->authenticate("default", "s3cret"), &acl->default_user());
    EXPECT_EQ(acl->authenticate("default", "s3cre"), nullptr);
    EXPECT_EQ(acl->authenticate("default", "s3crett"), nullptr);
    EXPECT_EQ(acl->authenticate("default", ""), nullptr);
    EXPECT_EQ(acl->authenticate("nobody", "s3cret"), nullptr);
    EXPECT_EQ(acl->default_user().describe(),
              "user default on #" + digest_hex(hash_password("s3cret")) + " ~* &* +@all");
}

TEST(Acl, FileUsersGetTheirCategories) {
    auto acl = build(kUsers);
    ASSERT_TRUE(acl);
    // No default user in the file and no password: the open default user.
    EXPECT_FALSE(acl->auth_required());
    const AclUser* reader = acl->authenticate("reader", "rpw");
    const AclUser* writer = acl->authenticate("writer", "wpw");
    const AclUser* admin = acl->authenticate("admin", "apw");
    ASSERT_TRUE(reader && writer && admin);
    for (std::string_view allowed : {"bf.exists", "bf.mexists", "bf.info", "bf.card", "exists"}) {
        EXPECT_TRUE(reader->may_run(spec(allowed))) << allowed;
    }
    for (std::string_view denied : {"bf.add", "bf.madd", "bf.reserve", "flushall", "del"}) {
        EXPECT_FALSE(reader->may_run(spec(denied))) << denied;
    }
    EXPECT_TRUE(writer->may_run(spec("bf.add")));
    EXPECT_TRUE(writer->may_run(spec("bf.exists")));
    EXPECT_FALSE(writer->may_run(spec("flushall")));  // @write but also @dangerous
    EXPECT_FALSE(writer->may_run(spec("keys")));
    EXPECT_FALSE(writer->may_run(spec("save")));
    EXPECT_TRUE(admin->may_run(spec("flushall")));
    EXPECT_TRUE(admin->may_run(spec("config|get")));
    EXPECT_EQ(acl->users().size(), 4u);
    EXPECT_EQ(acl->users()[0]->name(), "admin");  // ordered by name
    EXPECT_EQ(reader->describe(), "user reader on #" + digest_hex(hash_password("rpw")) +
                                      " ~* resetchannels -@all +@read");
}

TEST(Acl, EveryUserMayRunTheNoAuthCommands) {
    auto acl = build(
        "user nobody on nopass nocommands\nuser gone on nopass "
        "+@all -@connection\n");
    ASSERT_TRUE(acl);
    for (std::string_view name : {"nobody", "gone"}) {
        const AclUser* user = acl->find(name);
        ASSERT_TRUE(user);
        EXPECT_TRUE(user->may_run(spec("auth"))) << name;
        EXPECT_TRUE(user->may_run(spec("hello"))) << name;
        EXPECT_TRUE(user->may_run(spec("quit"))) << name;
        EXPECT_FALSE(user->may_run(spec("ping"))) << name;
    }
}

TEST(Acl, SubcommandsAndContainersAreAddressable) {
    auto acl = build(
        "user one on nopass -@all +client|list +acl|whoami\n"
        "user all on nopass +client\n"
        "user most on nopass +@all -client|kill -config\n");
    ASSERT_TRUE(acl);
    const AclUser& one = *acl->find("one");
    EXPECT_TRUE(one.may_run(spec("client|list")));
    EXPECT_TRUE(one.may_run(spec("acl|whoami")));
    EXPECT_FALSE(one.may_run(spec("client|kill")));
    EXPECT_FALSE(one.may_run(spec("acl|list")));
    const AclUser& all = *acl->find("all");
    EXPECT_TRUE(all.may_run(spec("client|kill")));
    EXPECT_TRUE(all.may_run(spec("client|id")));
    EXPECT_FALSE(all.may_run(spec("ping")));
    const AclUser& most = *acl->find("most");
    EXPECT_FALSE(most.may_run(spec("client|kill")));
    EXPECT_TRUE(most.may_run(spec("client|list")));
    EXPECT_FALSE(most.may_run(spec("config|get")));
    EXPECT_FALSE(most.may_run(spec("config|set")));
    EXPECT_EQ(most.describe(), "user most on nopass resetchannels +@all -client|kill -config");
}

TEST(Acl, CategoryRulesApplyInOrder) {
    auto acl = build("user u on nopass ~* +@all -@dangerous +info\n");
    ASSERT_TRUE(acl);
    const AclUser& user = *acl->find("u");
    EXPECT_FALSE(user.may_run(spec("flushall")));
    EXPECT_FALSE(user.may_run(spec("keys")));
    EXPECT_TRUE(user.may_run(spec("info")));  // @dangerous, then added back
    EXPECT_TRUE(user.may_run(spec("bf.add")));
    EXPECT_EQ(user.describe(), "user u on nopass ~* resetchannels +@all -@dangerous +info");
}

TEST(Acl, KeyPatternsLimitTheKeysACommandNames) {
    auto acl = build("user app on nopass ~app:* ~shared +@all\nuser nokeys on nopass +@all\n");
    ASSERT_TRUE(acl);
    const AclUser& app = *acl->find("app");
    auto args = [](std::vector<std::string_view> words) { return words; };
    auto may = [&](const AclUser& user, std::vector<std::string_view> words) {
        const auto argv = args(words);
        const CommandSpec& command = spec(argv[0]);
        return user.may_access_keys(command, Args(argv));
    };
    EXPECT_TRUE(may(app, {"bf.add", "app:1", "x"}));
    EXPECT_TRUE(may(app, {"bf.add", "shared", "x"}));
    EXPECT_FALSE(may(app, {"bf.add", "other", "x"}));
    EXPECT_TRUE(may(app, {"del", "app:1", "app:2"}));
    EXPECT_FALSE(may(app, {"del", "app:1", "other"}));
    EXPECT_FALSE(may(app, {"rename", "app:1", "other"}));
    EXPECT_TRUE(may(app, {"dbsize"}));  // no keys named
    EXPECT_TRUE(may(app, {"flushall"}));
    EXPECT_FALSE(may(*acl->find("nokeys"), {"bf.exists", "k", "x"}));
    EXPECT_EQ(app.describe(), "user app on nopass ~app:* ~shared resetchannels +@all");
}

TEST(Acl, PasswordRules) {
    auto acl = build(
        "user two on >one >two\n"
        "user removed on >one >two <one\n"
        "user hashed on #" +
        digest_hex(hash_password("hashed-pw")) +
        "\n"
        "user any on nopass\n"
        "user reset on >x resetpass\n"
        "user disabled off >pw\n"
        "user later on >pw nopass\n"
        "user wiped on >pw +@all reset\n");
    ASSERT_TRUE(acl);
    EXPECT_TRUE(acl->authenticate("two", "one"));
    EXPECT_TRUE(acl->authenticate("two", "two"));
    EXPECT_FALSE(acl->authenticate("removed", "one"));
    EXPECT_TRUE(acl->authenticate("removed", "two"));
    EXPECT_TRUE(acl->authenticate("hashed", "hashed-pw"));
    EXPECT_TRUE(acl->authenticate("any", "whatever"));
    EXPECT_FALSE(acl->authenticate("reset", "x"));
    EXPECT_FALSE(acl->authenticate("reset", ""));
    EXPECT_FALSE(acl->authenticate("disabled",
                                   "pw"));  // off: even the right password fails
    EXPECT_TRUE(acl->authenticate("later", "anything"));
    EXPECT_EQ(acl->find("later")->password_count(), 0u);
    EXPECT_EQ(acl->find("wiped")->describe(), "user wiped off resetchannels -@all");
}

TEST(Acl, TheFileDefaultUserWinsAndRequirepassConflictsWithIt) {
    auto acl = build("user default on nopass ~* +@read\n");
    ASSERT_TRUE(acl);
    EXPECT_FALSE(acl->auth_required());
    EXPECT_FALSE(acl->default_user().may_run(spec("bf.add")));
    EXPECT_TRUE(acl->default_user().may_run(spec("bf.exists")));

    auto off = build("user default off\nuser app on >pw ~* +@all\n");
    ASSERT_TRUE(off);
    EXPECT_TRUE(off->auth_required());
    EXPECT_FALSE(off->default_user().nopass());

    const std::string error = build_error("user default on >a ~* +@all\n", "b");
    EXPECT_NE(error.find("users.acl defines the default user"), std::string::npos) << error;
    EXPECT_NE(error.find("--requirepass"), std::string::npos) << error;

    auto with_password = build(kUsers, "topsecret");
    ASSERT_TRUE(with_password);
    EXPECT_TRUE(with_password->auth_required());
    EXPECT_TRUE(with_password->authenticate("default", "topsecret"));
    EXPECT_TRUE(with_password->authenticate("reader", "rpw"));
}

TEST(Acl, SkipsBlankAndCommentLinesAndAcceptsCrlf) {
    auto acl = build("# users for the pre-check\r\n\r\n   \n\tuser a on nopass +@read\r\n");
    ASSERT_TRUE(acl);
    EXPECT_TRUE(acl->find("a"));
    // Rules Redis writes for pub/sub and payload sanitising load as no-ops.
    EXPECT_TRUE(
        build("user r on nopass sanitize-payload ~* &* resetchannels "
              "allchannels +@all\n"));
}

TEST(Acl, FileErrorsNameTheFileAndLine) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"user ok on nopass\nuser bad on +@nosuch\n", "users.acl:2: user 'bad': unknown command"},
        {"\n\nuser bad on +bf.nosuch\n",
         "users.acl:3: user 'bad': unknown command or category "
         "'+bf.nosuch'"},
        {"user bad on +client|nosuch\n", "users.acl:1: user 'bad': unknown command"},
        {"user bad on +select|0\n", "users.acl:1: user 'bad': allowing one first argument"},
        {"user bad on frobnicate\n", "users.acl:1: user 'bad': unknown rule 'frobnicate'"},
        {"user bad on #abc\n", "users.acl:1: user 'bad': a password hash (#) must be 64"},
        {"user bad on %R~app:*\n", "users.acl:1: user 'bad': read-only and write-only"},
        {"user bad on ~* ~app:*\n", "users.acl:1: user 'bad': the key pattern '~app:*' after"},
        {"user bad on (+@read ~*)\n", "users.acl:1: user 'bad': selectors"},
        {"users bad on\n", "users.acl:1: a line must be 'user NAME rule...'"},
        {"user\n", "users.acl:1: a line must be 'user NAME rule...'"},
        {"user a on\nuser a off\n", "users.acl:2: user 'a' is defined twice"},
        {"user b\xc3\xa9 on\n", "users.acl:1: a user name must be printable ASCII"},
    };
    for (const auto& [text, expected] : cases) {
        const std::string error = build_error(text);
        EXPECT_EQ(error.rfind(expected, 0), 0u) << "got: " << error << "\nwant: " << expected;
    }
}

TEST(Acl, ErrorsNeverRepeatAPassword) {
    const std::string error = build_error("user u on >visible <hunter2\n");
    EXPECT_NE(error.find("users.acl:1:"), std::string::npos) << error;
    EXPECT_EQ(error.find("hunter2"), std::string::npos) << error;
    EXPECT_EQ(error.find("visible"), std::string::npos) << error;
}

TEST(Acl, DescribeRoundTripsThroughTheFileFormat) {
    auto acl =
        build(std::string(kUsers) + "user keys on nopass ~a:* +@all -flushall +client|list\n");
    ASSERT_TRUE(acl);
    std::string text;
    for (const AclUser* user : acl->users()) text += user->describe() + "\n";
    auto again = build(text);
    ASSERT_TRUE(again);
    std::string text_again;
    for (const AclUser* user : again->users()) text_again += user->describe() + "\n";
    EXPECT_EQ(text, text_again);
    EXPECT_TRUE(again->authenticate("reader", "rpw"));
}

// Timing must not tell which users exist or are on: every AUTH hashes the
// offered password once, whoever it names.
TEST(Acl, AuthHashesThePasswordForOnOffNopassAndMissingUsers) {
    auto acl = build(
        "user on_user on >pw ~* +@all\n"
        "user off_user off >pw ~* +@all\n"
        "user open_user on nopass ~* +@all\n");
    ASSERT_TRUE(acl);
    for (const char* name : {"on_user", "off_user", "open_user", "missing"}) {
        for (const char* password : {"pw", "wrong"}) {
            const std::uint64_t before = password_hashes_computed();
            (void)acl->authenticate(name, password);
            EXPECT_EQ(password_hashes_computed() - before, 1u) << name << " " << password;
        }
    }
    EXPECT_TRUE(acl->authenticate("on_user", "pw"));
    EXPECT_FALSE(acl->authenticate("off_user", "pw"));
    EXPECT_FALSE(acl->authenticate("missing", "pw"));
}

TEST(Acl, ConfigureReadsTheFileAndRefusesAMissingOne) {
    Registry registry;
    const auto built = build_default_registry(registry);
    ASSERT_TRUE(built) << built.error();
    core::Config config;
    config.aclfile = ::testing::TempDir() + "bloomery_acl_test_missing.acl";
    std::remove(config.aclfile.c_str());
    const core::Status missing = configure_access_control(registry, config);
    EXPECT_FALSE(missing);
    EXPECT_NE(missing.error().find(config.aclfile), std::string::npos) << missing.error();

    config.aclfile = ::testing::TempDir() + "bloomery_acl_test.acl";
    std::ofstream(config.aclfile) << "user default off\nuser x on >pw ~* +@all\n";
    const core::Status configured = configure_access_control(registry, config);
    ASSERT_TRUE(configured) << configured.error();
    EXPECT_TRUE(registry.acl().auth_required());
    EXPECT_TRUE(registry.acl().authenticate("x", "pw"));
    std::remove(config.aclfile.c_str());
}

// ---- the parser's limits before AUTH --------------------------------------

resp::ParseStatus parse_once(resp::Parser& parser, const std::string& input) {
    std::vector<std::string_view> argv;
    return parser.parse(input, argv).status;
}

std::string multibulk(std::size_t args, std::size_t bulk_bytes) {
    std::string out = "*" + std::to_string(args) + "\r\n";
    for (std::size_t i = 0; i < args; ++i) {
        out += "$" + std::to_string(bulk_bytes) + "\r\n" + std::string(bulk_bytes, 'x') + "\r\n";
    }
    return out;
}

TEST(UnauthenticatedParser, TenArgumentsAndSixteenKilobyteBulksAtMost) {
    resp::ParserLimits limits;
    limits.unauthenticated = true;
    resp::Parser parser(limits);
    EXPECT_EQ(parse_once(parser, multibulk(10, 1)), resp::ParseStatus::complete);
    EXPECT_EQ(parse_once(parser, "*11\r\n"), resp::ParseStatus::error);
    EXPECT_EQ(parser.error_message(), "unauthenticated multibulk length");
    EXPECT_EQ(parse_once(parser, multibulk(1, 16 * 1024)), resp::ParseStatus::complete);
    EXPECT_EQ(parse_once(parser, "*1\r\n$16385\r\n"), resp::ParseStatus::error);
    EXPECT_EQ(parser.error_message(), "unauthenticated bulk length");
    // The absolute limits are checked first, as in Redis.
    EXPECT_EQ(parse_once(parser, "*99999999999\r\n"), resp::ParseStatus::error);
    EXPECT_EQ(parser.error_message(), "invalid multibulk length");

    limits.unauthenticated = false;
    parser.set_limits(limits);
    EXPECT_EQ(parse_once(parser, multibulk(11, 16 * 1024 + 1)), resp::ParseStatus::complete);
}

// ---- options --------------------------------------------------------------

app::CommandLine parse(std::vector<std::string> words) {
    words.insert(words.begin(), "bloomery");
    std::vector<char*> argv;
    for (auto& word : words) argv.push_back(word.data());
    return app::parse_command_line(static_cast<int>(argv.size()), argv.data());
}

TEST(SecurityOptions, DefaultsAreRedisLike) {
    const app::CommandLine line = parse({});
    EXPECT_TRUE(line.config.requirepass.empty());
    EXPECT_TRUE(line.config.aclfile.empty());
    EXPECT_TRUE(line.config.protected_mode);
    EXPECT_EQ(line.config.unauthenticated_max_multibulk_len, 10u);
    EXPECT_EQ(line.config.unauthenticated_max_bulk_len, 16u * 1024);
    EXPECT_EQ(line.config.unauthenticated_query_buffer_limit, 1024u * 1024);
    EXPECT_FALSE(parse({"--protected-mode", "no"}).config.protected_mode);
    EXPECT_GT(parse({"--protected-mode", "maybe"}).exit_code, 0);
}

TEST(SecurityOptions, PasswordFromFlagEnvironmentOrFile) {
    EXPECT_EQ(parse({"--requirepass", "flag-pw"}).config.requirepass, "flag-pw");
    setenv("BLOOMERY_REQUIREPASS", "env-pw", 1);
    EXPECT_EQ(parse({}).config.requirepass, "env-pw");
    const std::string path = ::testing::TempDir() + "bloomery_requirepass_test";
    std::ofstream(path) << "file-pw\n";
    // The environment variable and the file both give a password: refused.
    EXPECT_GT(parse({"--requirepass-file", path}).exit_code, 0);
    unsetenv("BLOOMERY_REQUIREPASS");
    EXPECT_GT(parse({"--requirepass", "x", "--requirepass-file", path}).exit_code, 0);
    EXPECT_EQ(parse({"--requirepass-file", path}).config.requirepass, "file-pw");
    std::ofstream(path) << "crlf-pw\r\n";
    EXPECT_EQ(parse({"--requirepass-file", path}).config.requirepass, "crlf-pw");
    std::ofstream(path) << "two-newlines\n\n";
    EXPECT_EQ(parse({"--requirepass-file", path}).config.requirepass, "two-newlines\n");
    std::ofstream(path) << "no-newline";
    EXPECT_EQ(parse({"--requirepass-file", path}).config.requirepass, "no-newline");
    std::ofstream(path) << "\n";
    EXPECT_GT(parse({"--requirepass-file", path}).exit_code, 0);  // empty: refused
    std::remove(path.c_str());
    EXPECT_GT(parse({"--requirepass-file", path}).exit_code,
              0);  // missing: refused
}

}  // namespace
}  // namespace bloomery::command
