// Access control through dispatch, without sockets: what AUTH, HELLO and
// ACL answer, NOAUTH before authentication, NOPERM for commands and keys a
// user may not use, and CONFIG GET keeping the password back. The rules
// themselves (ACL file, categories, key patterns) are in acl_test.cpp.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/resp/writer.hpp"
#include "bloomery/store/keyspace.hpp"
#include "fake_hooks.hpp"
#include "resp_matchers.hpp"

namespace bloomery::command {
namespace {

using namespace resp::testing;  // the reply matchers
using ::testing::_;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::Each;
using ::testing::SizeIs;
using ::testing::StartsWith;

// A reader, a writer and an admin, as in the rules tests (acl_test.cpp).
constexpr std::string_view kUsers =
    "user reader on >rpw ~* +@read\n"
    "user writer on >wpw ~* +@read +@write -@dangerous\n"
    "user admin on >apw ~* +@all\n";

using testing::FakeHooks;

class AccessControl : public ::testing::Test {
protected:
    void SetUp() override {
        const auto built = build_default_registry(registry);
        ASSERT_TRUE(built) << built.error();
    }
    void configure(std::string_view users, std::string_view requirepass) {
        auto acl = Acl::build(registry, requirepass, users.empty() ? "" : "users.acl", users);
        ASSERT_TRUE(acl) << acl.error();
        registry.set_acl(*acl);
    }
    std::string run(std::vector<std::string> words) {
        std::vector<std::string_view> argv(words.begin(), words.end());
        out.clear();
        DispatchContext ctx{registry, keyspace, config, settings, hooks, client, stats, writer};
        dispatch(registry, ctx, argv);
        return out;
    }
    static ReplyMatcher error(std::string_view text) { return IsError(std::string(text)); }

    Registry registry;
    store::Keyspace keyspace{4};
    core::Config config;
    core::RuntimeSettings settings{config};
    FakeHooks hooks;
    ClientState client;
    WorkerStats stats;
    std::string out;
    resp::Writer writer{out};
};

TEST_F(AccessControl, NoPasswordMeansNoAuthNeededAndAuthIsAnError) {
    EXPECT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
    EXPECT_THAT(run({"AUTH", "pw"}), error(errors::kAuthWithoutPassword));
    // The two-argument form works for the nopass default user, as in Redis.
    EXPECT_THAT(run({"AUTH", "default", "anything"}), IsOk());
    EXPECT_THAT(run({"ACL", "WHOAMI"}), IsBulk("default"));
}

TEST_F(AccessControl, RequirepassAnswersNoauthUntilAuth) {
    configure("", "s3cret");
    for (std::vector<std::string> command : {std::vector<std::string>{"BF.ADD", "k", "a"},
                                             {"BF.EXISTS", "k", "a"},
                                             {"FLUSHALL"},
                                             {"PING"},
                                             {"CONFIG", "GET", "*"},
                                             {"ACL", "WHOAMI"},
                                             {"CLIENT", "LIST"}}) {
        EXPECT_THAT(run(command), error(errors::kNoAuth)) << command[0];
    }
    EXPECT_EQ(keyspace.size(), 0u);
    // Unknown commands and wrong arity come first, as in Redis.
    EXPECT_THAT(run({"NOSUCH"}), IsError(StartsWith("ERR unknown command 'NOSUCH'")));
    EXPECT_THAT(run({"BF.ADD", "k"}),
                IsError("ERR wrong number of arguments for 'bf.add' command"));
    EXPECT_THAT(run({"AUTH", "wrong"}), error(errors::kWrongPass));
    EXPECT_THAT(run({"AUTH", "default", "wrong"}), error(errors::kWrongPass));
    EXPECT_THAT(run({"AUTH", "nobody", "s3cret"}), error(errors::kWrongPass));
    EXPECT_THAT(run({"AUTH", "a", "b", "c"}), IsError("ERR syntax error"));
    EXPECT_FALSE(client.authenticated);
    EXPECT_THAT(run({"AUTH", "s3cret"}), IsOk());
    EXPECT_TRUE(client.authenticated);
    EXPECT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
    // A later failed AUTH keeps the connection authenticated, as in Redis.
    EXPECT_THAT(run({"AUTH", "wrong"}), error(errors::kWrongPass));
    EXPECT_THAT(run({"PING"}), IsSimple("PONG"));
}

TEST_F(AccessControl, QuitNeedsNoAuth) {
    configure("", "s3cret");
    EXPECT_THAT(run({"QUIT"}), IsOk());
    EXPECT_TRUE(client.close_after_reply);
}

TEST_F(AccessControl, HelloAuthenticatesAndSwitchesProtocol) {
    configure("", "s3cret");
    EXPECT_THAT(run({"HELLO"}), error(errors::kHelloNoAuth));
    EXPECT_THAT(run({"HELLO", "3"}), error(errors::kHelloNoAuth));
    EXPECT_THAT(run({"HELLO", "3", "AUTH", "default", "nope"}), error(errors::kWrongPass));
    EXPECT_EQ(writer.protocol(), 2);
    EXPECT_THAT(run({"HELLO", "4", "AUTH", "default", "s3cret"}), error(errors::kProtocolVersion));
    EXPECT_FALSE(client.authenticated);
    EXPECT_THAT(run({"HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "me"}),
                IsMapThat(SizeIs(2 * 7)));
    EXPECT_EQ(writer.protocol(), 3);
    EXPECT_EQ(client.name(), "me");
    EXPECT_THAT(run({"PING"}), IsSimple("PONG"));
}

TEST_F(AccessControl, Hello2AuthKeepsResp2) {
    configure("", "s3cret");
    EXPECT_THAT(run({"HELLO", "2", "AUTH", "default", "s3cret"}), IsArrayThat(SizeIs(14)));
    EXPECT_TRUE(client.authenticated);
}

TEST_F(AccessControl, NopermNamesTheUserAndCommand) {
    configure(kUsers, "");
    EXPECT_THAT(run({"AUTH", "reader", "rpw"}), IsOk());
    EXPECT_THAT(run({"BF.EXISTS", "k", "a"}), IsInt(0));
    EXPECT_THAT(run({"BF.MEXISTS", "k", "a", "b"}), IsArray(IsInt(0), IsInt(0)));
    EXPECT_THAT(run({"BF.ADD", "k", "a"}),
                IsError("NOPERM User reader has no permissions to run the 'bf.add' command"));
    EXPECT_THAT(run({"FLUSHALL"}), IsError("NOPERM User reader has no permissions to run the "
                                           "'flushall' command"));
    EXPECT_THAT(run({"CLIENT", "KILL", "ID", "1"}),
                IsError("NOPERM User reader has no permissions to run the "
                        "'client|kill' command"));
    EXPECT_EQ(keyspace.size(), 0u);
    EXPECT_THAT(run({"ACL", "WHOAMI"}), IsError("NOPERM User reader has no permissions to run the "
                                                "'acl|whoami' command"));
    EXPECT_THAT(run({"AUTH", "writer", "wpw"}), IsOk());
    EXPECT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
    EXPECT_THAT(run({"FLUSHALL"}), IsError(StartsWith("NOPERM User writer")));
    EXPECT_THAT(run({"AUTH", "admin", "apw"}), IsOk());
    EXPECT_THAT(run({"FLUSHALL"}), IsOk());
    EXPECT_THAT(run({"ACL", "WHOAMI"}), IsBulk("admin"));
}

TEST_F(AccessControl, KeyDenialAnswersRedisText) {
    configure("user app on >pw ~app:* +@all\n", "");
    EXPECT_THAT(run({"AUTH", "app", "pw"}), IsOk());
    EXPECT_THAT(run({"BF.ADD", "app:1", "a"}), IsInt(1));
    EXPECT_THAT(run({"BF.ADD", "other", "a"}), error(errors::kNoPermKey));
}

TEST_F(AccessControl, AclListUsersCatAndClientList) {
    configure(kUsers, "");
    EXPECT_THAT(run({"ACL", "USERS"}),
                IsArray(IsBulk("admin"), IsBulk("default"), IsBulk("reader"), IsBulk("writer")));
    const std::string list = run({"ACL", "LIST"});
    EXPECT_THAT(list, IsArrayThat(Contains(IsBulk("user default on nopass ~* &* +@all"))));
    EXPECT_THAT(list,
                IsArrayThat(Contains(IsBulk("user reader on #" + digest_hex(hash_password("rpw")) +
                                            " ~* resetchannels -@all +@read"))));
    EXPECT_EQ(list.find("rpw"), std::string::npos);  // never the password itself
    const std::string categories = run({"ACL", "CAT"});
    for (std::string_view name : {"read", "write", "bloom", "admin", "dangerous", "fast", "slow",
                                  "keyspace", "connection"}) {
        EXPECT_THAT(categories, IsArrayThat(Contains(IsBulk(std::string(name))))) << name;
    }
    EXPECT_THAT(
        run({"ACL", "CAT", "BLOOM"}),
        IsArrayThat(AllOf(SizeIs(14), Contains(IsBulk("bf.merge")), Contains(IsBulk("bf.del")))));
    EXPECT_THAT(run({"ACL", "CAT", "admin"}), IsArrayThat(Contains(IsBulk("client|list"))));
    EXPECT_THAT(run({"ACL", "CAT", "nosuch"}), IsError("ERR Unknown category 'nosuch'"));
    EXPECT_THAT(run({"ACL", "CAT", "a", "b"}),
                IsError("ERR wrong number of arguments for 'acl|cat' command"));
    EXPECT_THAT(run({"ACL", "SETUSER", "x"}),
                IsError(StartsWith("ERR unknown subcommand 'SETUSER'")));
    EXPECT_THAT(run({"ACL", "HELP"}), IsArrayThat(Each(IsSimple(_))));

    EXPECT_NE(format_client_line(client, 0).find(" user=default "), std::string::npos);
    EXPECT_THAT(run({"AUTH", "reader", "rpw"}), IsOk());
    EXPECT_NE(format_client_line(client, 0).find(" user=reader "), std::string::npos);
}

TEST_F(AccessControl, ConfigGetNeverShowsThePassword) {
    config.requirepass = "s3cret";
    EXPECT_THAT(run({"CONFIG", "GET", "requirepass"}),
                IsArray(IsBulk("requirepass"), IsBulk("<redacted>")));
    config.requirepass.clear();
    EXPECT_THAT(run({"CONFIG", "GET", "requirepass"}), IsArray(IsBulk("requirepass"), IsBulk("")));
    EXPECT_THAT(run({"CONFIG", "GET", "protected-mode"}),
                IsArray(IsBulk("protected-mode"), IsBulk("yes")));
}

}  // namespace
}  // namespace bloomery::command
