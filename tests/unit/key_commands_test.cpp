// DUMP, RESTORE, COPY, RENAMENX, RANDOMKEY and MIGRATE driven without
// sockets: what they answer and what they leave in the keyspace, MIGRATE
// against a second keyspace standing in for its target, and MIGRATE's keys
// in cluster mode. The payload format and the keyspace writes behind these
// commands are in dump_test.cpp.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/cluster/topology.hpp"
#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/pubsub.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/key_slot.hpp"
#include "bloomery/persist/dump_payload.hpp"
#include "bloomery/resp/writer.hpp"
#include "bloomery/store/keyspace.hpp"
#include "dump_test_support.hpp"
#include "fake_hooks.hpp"
#include "resp_matchers.hpp"

namespace bloomery {
namespace {

using bloom::FilterRef;
using bloom::ScalableFilter;
using command::testing::FakeHooks;
using store::Keyspace;
using testing::refooted;
using testing::scandump;
using namespace resp::testing;  // the reply matchers
using ::testing::_;
using ::testing::Each;
using ::testing::Gt;
using ::testing::StartsWith;

class FakeSuspender : public command::ClientSuspender {
public:
    struct Sink : command::ReplySink {
        explicit Sink(std::vector<command::ReplyWriter>& into) : delivered(into) {}
        void deliver(command::ReplyWriter write_reply) override {
            delivered.push_back(std::move(write_reply));
        }
        std::vector<command::ReplyWriter>& delivered;
    };
    std::shared_ptr<command::ReplySink> suspend() override {
        return std::make_shared<Sink>(delivered);
    }
    std::vector<command::ReplyWriter> delivered;
};

// MIGRATE's target, played by a second keyspace: every RESTORE command the
// source sends is parsed and run there, its replies recorded as a target's.
class FakeTarget {
public:
    Keyspace keyspace{4};
    std::vector<std::string> commands;  // the command names it got
    command::MigrateRequest last;
    // Set to make the target refuse: every RESTORE answers this error line.
    std::string refuse;
    bool unreachable = false;
    // Runs once a key's payload is made, before the target answers.
    std::function<void(const std::string& key)> after_payload;

    void serve(command::MigrateRequest request,
               const std::function<void(command::MigrateResult)>& done) {
        command::MigrateResult result;
        last = request;
        if (unreachable) {
            result.failure = command::MigrateResult::Failure::connect;
            done(result);
            return;
        }
        for (std::size_t i = 0; i < request.keys; ++i) {
            std::string text;
            if (!request.restore_command(i, text)) continue;
            const std::vector<std::string> argv = parse(text);
            commands.push_back(argv.at(0));
            if (after_payload) after_payload(argv.at(1));
            const bool replace = argv.size() == 5 && argv[4] == "REPLACE";
            std::string error;
            if (!refuse.empty()) {
                error = refuse;
            } else if (!replace && keyspace.contains(argv[1])) {
                error = "BUSYKEY Target key name already exists.";
            } else {
                EXPECT_TRUE(persist::verify_dump_payload(argv[3]));
                const core::Result<persist::DumpValue> value = persist::parse_dump_value(argv[3]);
                EXPECT_TRUE(value.ok()) << value.error();
                const std::int64_t ttl = std::stoll(argv[2]);
                if (value) {
                    keyspace.restore(
                        argv[1], persist::build_dump_filter(*value),
                        {.expire_at_ms = ttl == 0 ? 0 : store::now_ms() + ttl,
                         .if_live = replace ? store::IfLive::replace : store::IfLive::keep});
                }
            }
            if (error.empty()) {
                result.accepted.push_back(i);
            } else if (result.target_error.empty()) {
                result.target_error = error;
            }
        }
        done(result);
    }

private:
    // A command: a RESP array of bulk strings.
    static std::vector<std::string> parse(const std::string& text) {
        const RespValue command = decode_reply(text);
        EXPECT_THAT(command, IsArrayThat(Each(IsBulk(_))));
        std::vector<std::string> out;
        for (const RespValue& word : command.elements) out.push_back(word.text);
        return out;
    }
};

class MigratingHooks final : public command::ClientDirectory,
                             public command::ServerStats,
                             public command::Persistence,
                             public command::Shutdown,
                             public command::Replication,
                             public command::ReplicaGate,
                             public command::Migration {
public:
    explicit MigratingHooks(FakeTarget& target) : target_(target) {}
    std::size_t connected_clients() override { return 1; }
    std::int64_t blocked_clients() override { return 0; }
    std::string client_list(std::span<const std::int64_t>) override { return ""; }
    bool kill_client(std::int64_t) override { return false; }
    bool kill_client(std::string_view) override { return false; }
    command::StatsTotals stats() override { return {}; }
    void reset_stats() override {}
    void save_async(std::function<void(persist::SaveResult)> done) override { done({}); }
    persist::SaveResult bgsave() override { return {}; }
    persist::PersistenceInfo persistence() override { return {}; }
    bool snapshot_failing() override { return false; }
    void begin_shutdown(const command::ShutdownOptions&, std::function<void()>) override {}
    void abort_shutdown(std::function<void(bool)> done) override { done(false); }
    std::int64_t start_time_ms() override { return 0; }
    unsigned worker_threads() override { return 1; }
    void migrate(command::MigrateRequest request,
                 std::function<void(command::MigrateResult)> done) override {
        target_.serve(std::move(request), done);
    }
    command::PubSub& pubsub() { return channels_; }
    cluster::ClusterState& cluster_state() { return cluster_; }

private:
    FakeTarget& target_;
    command::PubSub channels_;
    cluster::ClusterState cluster_;
};

class KeyCommands : public ::testing::Test {
protected:
    void SetUp() override {
        const auto built = command::build_default_registry(registry);
        ASSERT_TRUE(built) << built.error();
    }
    std::string run(std::vector<std::string> words) {
        std::vector<std::string_view> argv(words.begin(), words.end());
        out.clear();
        command::DispatchContext ctx{registry, keyspace, config, settings,  hooks,
                                     client,   stats,    writer, &suspender};
        command::dispatch(registry, ctx, argv);
        for (auto& write_reply : suspender.delivered) write_reply(writer);
        suspender.delivered.clear();
        return out;
    }
    // The bulk string a reply holds.
    static std::string bulk(const std::string& reply) {
        const RespValue value = decode_reply(reply);
        EXPECT_THAT(value, IsBulk(_));
        return value.text;
    }
    std::vector<std::string> scandump_of(const std::string& key) {
        return scandump(keyspace.get(key)->value.filter());
    }

    command::Registry registry;
    Keyspace keyspace{8};
    core::Config config;
    core::RuntimeSettings settings{config};
    FakeTarget target;
    MigratingHooks hooks{target};
    FakeSuspender suspender;
    command::ClientState client;
    command::WorkerStats stats;
    std::string out;
    resp::Writer writer{out};
};

TEST_F(KeyCommands, DumpAndRestoreRoundTrip) {
    EXPECT_THAT(run({"DUMP", "missing"}), IsNullBulk());
    ASSERT_THAT(run({"BF.RESERVE", "src", "0.001", "1000", "EXPANSION", "3"}), IsOk());
    for (int i = 0; i < 3000; ++i) run({"BF.ADD", "src", "item-" + std::to_string(i)});
    const std::string payload = bulk(run({"DUMP", "src"}));
    EXPECT_THAT(run({"RESTORE", "dst", "0", payload}), IsOk());
    EXPECT_EQ(scandump_of("dst"), scandump_of("src"));
    EXPECT_EQ(run({"BF.INFO", "dst", "ITEMS"}), run({"BF.INFO", "src", "ITEMS"}));
    EXPECT_THAT(run({"TTL", "dst"}), IsInt(-1));
    EXPECT_THAT(run({"BF.EXISTS", "dst", "item-2999"}), IsInt(1));
    // Another DUMP of the copy is the same payload.
    EXPECT_EQ(bulk(run({"DUMP", "dst"})), payload);
    // TTL kept (relative, then absolute).
    EXPECT_THAT(run({"RESTORE", "ttl", "100000", payload}), IsOk());
    EXPECT_THAT(run({"PTTL", "ttl"}), IsInt(Gt(90000)));
    const std::int64_t at = store::now_ms() + 500000;
    EXPECT_THAT(run({"RESTORE", "abs", std::to_string(at), payload, "ABSTTL"}), IsOk());
    EXPECT_THAT(run({"PEXPIRETIME", "abs"}), IsInt(at));
}

TEST_F(KeyCommands, RestoreChecksInRedissOrder) {
    ASSERT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
    const std::string payload = bulk(run({"DUMP", "k"}));
    EXPECT_THAT(run({"RESTORE", "k", "0", payload}),
                IsError("BUSYKEY Target key name already exists."));
    // Options first, then BUSYKEY, then the TTL, then the payload.
    EXPECT_THAT(run({"RESTORE", "k", "x", "junk", "NOPE"}), IsError("ERR syntax error"));
    EXPECT_THAT(run({"RESTORE", "k", "x", "junk"}),
                IsError("BUSYKEY Target key name already exists."));
    EXPECT_THAT(run({"RESTORE", "n", "x", "junk"}),
                IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"RESTORE", "n", "-1", "junk"}),
                IsError("ERR Invalid TTL value, must be >= 0"));
    EXPECT_THAT(run({"RESTORE", "n", "0", "junk"}),
                IsError("ERR DUMP payload version or checksum are wrong"));
    EXPECT_THAT(run({"RESTORE", "n", "0", ""}),
                IsError("ERR DUMP payload version or checksum are wrong"));
    EXPECT_THAT(run({"RESTORE", "n", "0", refooted("\x01garbage")}),
                IsError("ERR Bad data format"));
    EXPECT_THAT(run({"RESTORE", "n", "0", payload, "IDLETIME", "-1"}),
                IsError("ERR Invalid IDLETIME value, must be >= 0"));
    EXPECT_THAT(run({"RESTORE", "n", "0", payload, "IDLETIME", "x"}),
                IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"RESTORE", "n", "0", payload, "FREQ", "256"}),
                IsError("ERR Invalid FREQ value, must be >= 0 and <= 255"));
    EXPECT_THAT(run({"RESTORE", "n", "0", payload, "FREQ", "-1"}),
                IsError("ERR Invalid FREQ value, must be >= 0 and <= 255"));
    // IDLETIME and FREQ exclude each other (the second is a syntax error).
    EXPECT_THAT(run({"RESTORE", "n", "0", payload, "IDLETIME", "1", "FREQ", "1"}),
                IsError("ERR syntax error"));
    EXPECT_THAT(run({"RESTORE", "n", "0", payload, "IDLETIME"}), IsError("ERR syntax error"));
    EXPECT_THAT(run({"EXISTS", "n"}), IsInt(0));
    EXPECT_THAT(run({"RESTORE", "n", "0", payload, "IDLETIME", "100"}), IsOk());
    EXPECT_THAT(run({"RESTORE", "f", "0", payload, "freq", "255", "replace", "absttl"}), IsOk());
    // REPLACE replaces; an expired TTL deletes what was there.
    ASSERT_THAT(run({"BF.ADD", "other", "zzz"}), IsInt(1));
    EXPECT_THAT(run({"RESTORE", "other", "0", payload, "REPLACE"}), IsOk());
    EXPECT_THAT(run({"BF.EXISTS", "other", "zzz"}), IsInt(0));
    EXPECT_THAT(run({"BF.EXISTS", "other", "a"}), IsInt(1));
    EXPECT_THAT(run({"RESTORE", "other", "1", payload, "REPLACE", "ABSTTL"}), IsOk());
    EXPECT_THAT(run({"EXISTS", "other"}), IsInt(0));
    EXPECT_THAT(run({"RESTORE", "never", "1", payload, "ABSTTL"}), IsOk());
    EXPECT_THAT(run({"EXISTS", "never"}), IsInt(0));
}

TEST_F(KeyCommands, RestoreAppliesTheFilterBounds) {
    ASSERT_THAT(run({"BF.RESERVE", "big", "0.0001", "200000"}), IsOk());
    const std::string payload = bulk(run({"DUMP", "big"}));
    config.max_filter_bytes = 64 * 1024;
    EXPECT_THAT(run({"RESTORE", "copy", "0", payload}),
                IsError(StartsWith("ERR filter would exceed max-filter-bytes")));
    EXPECT_THAT(run({"COPY", "big", "copy"}),
                IsError(StartsWith("ERR filter would exceed max-filter-bytes")));
    EXPECT_THAT(run({"EXISTS", "copy"}), IsInt(0));
    // DUMP makes nothing a RESTORE could not take (here 91 bytes: one run).
    config.max_filter_bytes = 0;
    config.proto_max_bulk_len = 64;
    EXPECT_THAT(run({"DUMP", "big"}),
                IsError(StartsWith("ERR DUMP payload would exceed proto-max-bulk-len")));
}

TEST_F(KeyCommands, CopyMakesAnIndependentFilterWithTheDeadline) {
    EXPECT_THAT(run({"COPY", "missing", "dst"}), IsInt(0));
    ASSERT_THAT(run({"BF.MADD", "src", "a", "b"}), IsArray(IsInt(1), IsInt(1)));
    ASSERT_THAT(run({"EXPIRE", "src", "1000"}), IsInt(1));
    EXPECT_THAT(run({"COPY", "src", "src"}),
                IsError("ERR source and destination objects are the same"));
    EXPECT_THAT(run({"COPY", "src", "dst", "DB", "1"}), IsError("ERR DB index is out of range"));
    EXPECT_THAT(run({"COPY", "src", "dst", "DB", "x"}),
                IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"COPY", "src", "dst", "DB"}), IsError("ERR syntax error"));
    EXPECT_THAT(run({"COPY", "src", "dst", "NOPE"}), IsError("ERR syntax error"));
    EXPECT_THAT(run({"COPY", "src", "dst", "DB", "0"}), IsInt(1));
    EXPECT_EQ(scandump_of("dst"), scandump_of("src"));
    EXPECT_EQ(run({"PEXPIRETIME", "dst"}), run({"PEXPIRETIME", "src"}));
    EXPECT_NE(keyspace.get("dst")->value.bloom_or_null(),
              keyspace.get("src")->value.bloom_or_null());
    ASSERT_THAT(run({"BF.ADD", "src", "only-in-src"}), IsInt(1));
    EXPECT_THAT(run({"BF.EXISTS", "dst", "only-in-src"}), IsInt(0));
    EXPECT_THAT(run({"COPY", "src", "dst"}), IsInt(0));
    EXPECT_THAT(run({"COPY", "src", "dst", "REPLACE"}), IsInt(1));
    EXPECT_THAT(run({"BF.EXISTS", "dst", "only-in-src"}), IsInt(1));
}

TEST_F(KeyCommands, RenamenxTouchAndRandomkey) {
    EXPECT_THAT(run({"RENAMENX", "missing", "x"}), IsError("ERR no such key"));
    EXPECT_THAT(run({"RANDOMKEY"}), IsNullBulk());
    ASSERT_THAT(run({"BF.ADD", "a", "1"}), IsInt(1));
    ASSERT_THAT(run({"BF.ADD", "b", "1"}), IsInt(1));
    EXPECT_THAT(run({"RENAMENX", "a", "b"}), IsInt(0));
    EXPECT_THAT(run({"RENAMENX", "a", "a"}), IsInt(0));
    EXPECT_THAT(run({"RENAMENX", "a", "c"}), IsInt(1));
    EXPECT_THAT(run({"EXISTS", "a", "c"}), IsInt(1));
    EXPECT_THAT(run({"TOUCH", "a", "b", "c", "c"}), IsInt(3));
    EXPECT_THAT(run({"TOUCH", "nothing"}), IsInt(0));
    std::set<std::string> drawn;
    for (int i = 0; i < 200; ++i) drawn.insert(bulk(run({"RANDOMKEY"})));
    EXPECT_EQ(drawn, (std::set<std::string>{"b", "c"}));
}

TEST_F(KeyCommands, MigrateMovesKeysAndDeletesThemUnlessCopy) {
    EXPECT_THAT(run({"MIGRATE", "127.0.0.1", "1", "missing", "0", "100"}), IsSimple("NOKEY"));
    ASSERT_THAT(run({"BF.MADD", "k1", "a", "b"}), IsArray(IsInt(1), IsInt(1)));
    ASSERT_THAT(run({"BF.MADD", "k2", "c"}), IsArray(IsInt(1)));
    ASSERT_THAT(run({"PEXPIRE", "k2", "100000"}), IsInt(1));
    const std::vector<std::string> k1 = scandump_of("k1");
    const std::vector<std::string> k2 = scandump_of("k2");

    EXPECT_THAT(run({"MIGRATE", "127.0.0.1", "7000", "k1", "3", "0", "COPY"}), IsOk());
    EXPECT_EQ(target.last.host, "127.0.0.1");
    EXPECT_EQ(target.last.port, 7000);
    EXPECT_EQ(target.last.db, 3);
    EXPECT_EQ(target.last.timeout_ms, 1000);  // 0: Redis's default
    EXPECT_FALSE(target.last.auth);
    EXPECT_THAT(run({"EXISTS", "k1"}), IsInt(1));
    EXPECT_EQ(scandump(target.keyspace.get("k1")->value.filter()), k1);
    // Again: the target has it (BUSYKEY passed back), unless REPLACE.
    EXPECT_THAT(run({"MIGRATE", "h", "7000", "k1", "0", "50"}),
                IsError("ERR Target instance replied with error: BUSYKEY Target "
                        "key name already exists."));
    EXPECT_THAT(run({"EXISTS", "k1"}), IsInt(1));
    EXPECT_THAT(run({"MIGRATE", "h", "7000", "", "0", "50", "REPLACE", "AUTH2", "u", "p", "KEYS",
                     "k1", "k2", "absent"}),
                IsOk());
    EXPECT_TRUE(target.last.auth);
    EXPECT_EQ(target.last.username, "u");
    EXPECT_EQ(target.last.password, "p");
    EXPECT_EQ(target.last.keys, 2u);  // "absent" is not sent
    EXPECT_EQ(target.commands.back(), "RESTORE");
    EXPECT_THAT(run({"EXISTS", "k1", "k2"}), IsInt(0));
    EXPECT_EQ(scandump(target.keyspace.get("k2")->value.filter()), k2);
    const std::int64_t left = *target.keyspace.expiry("k2") - store::now_ms();
    EXPECT_GT(left, 90000);
    EXPECT_LE(left, 100000);
    EXPECT_THAT(run({"MIGRATE", "h", "7000", "", "0", "50", "KEYS", "k1"}), IsSimple("NOKEY"));
}

TEST_F(KeyCommands, MigrateErrors) {
    ASSERT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
    EXPECT_THAT(run({"MIGRATE", "h", "1", "k", "0", "10", "KEYS", "k"}),
                IsError("ERR When using MIGRATE KEYS option, the key argument "
                        "must be set to the empty string"));
    EXPECT_THAT(run({"MIGRATE", "h", "1", "k", "0", "10", "AUTH"}), IsError("ERR syntax error"));
    EXPECT_THAT(run({"MIGRATE", "h", "1", "k", "0", "10", "AUTH2", "u"}),
                IsError("ERR syntax error"));
    EXPECT_THAT(run({"MIGRATE", "h", "1", "k", "0", "10", "BOGUS"}), IsError("ERR syntax error"));
    EXPECT_THAT(run({"MIGRATE", "h", "1", "k", "x", "10"}),
                IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"MIGRATE", "h", "1", "k", "0", "x"}),
                IsError("ERR value is not an integer or out of range"));
    EXPECT_THAT(run({"MIGRATE", "h", "notaport", "k", "0", "10"}),
                IsError("IOERR error or timeout connecting to the client"));
    target.unreachable = true;
    EXPECT_THAT(run({"MIGRATE", "h", "1", "k", "0", "10"}),
                IsError("IOERR error or timeout connecting to the client"));
    target.unreachable = false;
    target.refuse = "NOAUTH Authentication required.";
    EXPECT_THAT(run({"MIGRATE", "h", "1", "k", "0", "10"}),
                IsError("ERR Target instance replied with error: NOAUTH "
                        "Authentication required."));
    EXPECT_THAT(run({"EXISTS", "k"}), IsInt(1));
    target.refuse.clear();
    // A payload past proto-max-bulk-len is not sent.
    config.proto_max_bulk_len = 64;
    EXPECT_THAT(run({"MIGRATE", "h", "1", "k", "0", "10"}),
                IsError(StartsWith("ERR DUMP payload would exceed")));
    EXPECT_THAT(run({"EXISTS", "k"}), IsInt(1));
    EXPECT_FALSE(target.keyspace.contains("k"));
}

TEST_F(KeyCommands, MigrateSendsAgainAKeyThatChangedWhileItWasSent) {
    ASSERT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
    ASSERT_THAT(run({"BF.ADD", "quiet", "a"}), IsInt(1));
    // Another client adds to "k" after its first `changes` payloads were
    // made, before the target answers: deleting "k" would lose those adds.
    int changes = 1;
    int sends = 0;
    target.after_payload = [&](const std::string& key) {
        if (key != "k") return;
        ++sends;
        if (changes-- <= 0) return;
        std::vector<bloom::AddResult> results;
        const std::string item = "b" + std::to_string(sends);
        const std::vector<std::string_view> items = {item};
        ASSERT_TRUE(keyspace.add_items("k", items, {}, nullptr, results));
        ASSERT_EQ(results.at(0), bloom::AddResult::added);
    };
    EXPECT_THAT(run({"MIGRATE", "h", "1", "", "0", "10", "KEYS", "k", "quiet"}), IsOk());
    EXPECT_EQ(sends, 2);  // sent again, with REPLACE, once it changed
    EXPECT_THAT(run({"EXISTS", "k"}), IsInt(0));
    EXPECT_THAT(run({"EXISTS", "quiet"}), IsInt(0));
    bool has_b = false;
    target.keyspace.with_filter("k", [&](const ScalableFilter& f) { has_b = f.contains("b1"); });
    EXPECT_TRUE(has_b);

    // A key that changes through every round is kept here, with its adds.
    ASSERT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
    changes = 100;
    sends = 0;
    EXPECT_THAT(run({"MIGRATE", "h", "1", "k", "0", "10", "REPLACE"}),
                IsError("ERR a key changed while MIGRATE sent it: it is kept here, and the "
                        "target holds the copy it was sent; MIGRATE it again with REPLACE"));
    EXPECT_EQ(sends, 9);  // the first send and 8 more
    EXPECT_THAT(run({"BF.EXISTS", "k", "b9"}), IsInt(1));
}

TEST_F(KeyCommands, MigrateInClusterModeSendsRestoreAsking) {
    auto topology = cluster::parse_topology("0-16383=a:1", "a:1", "");
    ASSERT_TRUE(topology) << topology.error();
    config.cluster_enabled = true;
    config.cluster = std::make_shared<const cluster::Topology>(std::move(*topology));
    hooks.cluster_state().publish(cluster::ClusterMap::from_topology(*config.cluster));
    ASSERT_THAT(run({"BF.ADD", "k", "a"}), IsInt(1));
    EXPECT_THAT(run({"MIGRATE", "h", "1", "k", "0", "10", "COPY"}), IsOk());
    EXPECT_EQ(target.commands.back(), "RESTORE-ASKING");
}

// ---- Key positions: MIGRATE's KEYS form ----

const command::Registry& table() {
    static const command::Registry registry = [] {
        command::Registry r;
        if (const auto built = command::build_default_registry(r); !built) {
            throw std::runtime_error(built.error());
        }
        return r;
    }();
    return registry;
}

std::vector<std::string_view> keys_of(std::vector<std::string_view> argv) {
    const command::CommandSpec& spec = *table().find(argv[0]);
    std::vector<std::string_view> keys;
    for (std::size_t position : command::Registry::key_positions(spec, argv)) {
        keys.push_back(argv[position]);
    }
    return keys;
}

using Keys = std::vector<std::string_view>;

TEST(MigrateKeys, AreTheKeyArgumentOrThoseAfterKeys) {
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "k", "0", "10"}), Keys{"k"});
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "k", "0", "10", "COPY", "REPLACE"}), Keys{"k"});
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "", "0", "10", "KEYS", "a", "b"}), (Keys{"a", "b"}));
    EXPECT_EQ(keys_of({"migrate", "h", "1", "", "0", "10", "copy", "auth", "pw", "keys", "a"}),
              Keys{"a"});
    // A password or user name that reads KEYS is an option's value.
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "", "0", "10", "AUTH", "KEYS", "KEYS", "a"}),
              Keys{"a"});
    EXPECT_EQ(
        keys_of({"MIGRATE", "h", "1", "", "0", "10", "AUTH2", "KEYS", "KEYS", "KEYS", "x", "y"}),
        (Keys{"x", "y"}));
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "", "0", "10", "KEYS"}), Keys{});
    EXPECT_EQ(keys_of({"MIGRATE", "h", "1", "k", "0", "10", "KEYS", "a"}), Keys{});  // refused
    EXPECT_EQ(keys_of({"COPY", "a", "b", "DB", "0"}), (Keys{"a", "b"}));
    EXPECT_EQ(keys_of({"TOUCH", "a", "b", "c"}), (Keys{"a", "b", "c"}));
    EXPECT_EQ(keys_of({"RESTORE-ASKING", "a", "0", "x"}), Keys{"a"});
    EXPECT_TRUE(table().find("restore-asking")->asking);
    EXPECT_FALSE(table().find("restore")->asking);
}

TEST(MigrateKeys, AccessControlChecksTheKeysAfterKeys) {
    auto acl = command::Acl::build(table(), "", "users.acl", "user app on nopass ~app:* +@all\n");
    ASSERT_TRUE(acl) << acl.error();
    const command::AclUser& app = *(*acl)->find("app");
    const auto may = [&](std::vector<std::string_view> argv) {
        return app.may_access_keys(*table().find(argv[0]), command::Args(argv));
    };
    EXPECT_TRUE(may({"MIGRATE", "h", "1", "app:1", "0", "10"}));
    EXPECT_FALSE(may({"MIGRATE", "h", "1", "other", "0", "10"}));
    EXPECT_TRUE(may({"MIGRATE", "h", "1", "", "0", "10", "KEYS", "app:1", "app:2"}));
    EXPECT_FALSE(may({"MIGRATE", "h", "1", "", "0", "10", "KEYS", "app:1", "other"}));
    EXPECT_FALSE(may({"MIGRATE", "h", "1", "", "0", "10", "COPY", "KEYS", "other"}));
    EXPECT_FALSE(may({"COPY", "app:1", "other"}));
    EXPECT_TRUE(may({"COPY", "app:1", "app:2"}));
    EXPECT_FALSE(may({"RENAMENX", "app:1", "other"}));
    EXPECT_FALSE(may({"TOUCH", "app:1", "other"}));
    EXPECT_FALSE(may({"RESTORE", "other", "0", "x"}));
    EXPECT_FALSE(may({"DUMP", "other"}));
}

TEST(MigrateKeys, TheSlowLogHidesItsPasswords) {
    core::Config config;
    config.slowlog_log_slower_than_us = 0;
    config.slowlog_max_len = 10;
    const core::RuntimeSettings settings(config);
    command::Slowlog log(settings);
    command::ClientState client;
    const auto logged = [&](std::vector<std::string_view> argv) {
        log.reset();
        log.record(table().find("migrate"), argv, 1000, client);
        return log.newest(1).at(0).argv;
    };
    using Words = std::vector<std::string>;
    EXPECT_EQ(logged({"MIGRATE", "h", "1", "k", "0", "10", "AUTH", "secret"}),
              (Words{"MIGRATE", "h", "1", "k", "0", "10", "AUTH", "(redacted)"}));
    EXPECT_EQ(logged({"MIGRATE", "h", "1", "", "0", "10", "AUTH2", "u", "pw", "KEYS", "a"}),
              (Words{"MIGRATE", "h", "1", "", "0", "10", "AUTH2", "(redacted)", "(redacted)",
                     "(redacted)", "(redacted)"}));
    EXPECT_EQ(logged({"MIGRATE", "h", "1", "", "0", "10", "KEYS", "auth", "pw"}),
              (Words{"MIGRATE", "h", "1", "", "0", "10", "KEYS", "auth", "pw"}));
}

class ClusterMigrate : public ::testing::Test {
protected:
    void SetUp() override {
        const auto built = command::build_default_registry(registry);
        ASSERT_TRUE(built) << built.error();
        // This node is a, serving slots 0-8191.
        auto topology = cluster::parse_topology("0-8191=a:1,8192-16383=b:2", "a:1", "");
        ASSERT_TRUE(topology) << topology.error();
        config.cluster_enabled = true;
        config.cluster = std::make_shared<const cluster::Topology>(std::move(*topology));
        hooks.cluster_state().publish(cluster::ClusterMap::from_topology(*config.cluster));
        // Keys of this node's slots and of the other's.
        for (int i = 0; mine.size() < 2 || theirs.empty(); ++i) {
            const std::string key = "key" + std::to_string(i);
            (core::key_slot(key) < 8192 ? mine : theirs).push_back(key);
        }
    }
    std::string run(std::vector<std::string> words) {
        std::vector<std::string_view> argv(words.begin(), words.end());
        out.clear();
        command::DispatchContext ctx{registry, keyspace, config, settings,  hooks,
                                     client,   stats,    writer, &suspender};
        command::dispatch(registry, ctx, argv);
        for (auto& write_reply : suspender.delivered) write_reply(writer);
        suspender.delivered.clear();
        return out;
    }

    command::Registry registry;
    Keyspace keyspace{4};
    core::Config config;
    core::RuntimeSettings settings{config};
    FakeTarget target;
    MigratingHooks hooks{target};
    FakeSuspender suspender;
    command::ClientState client;
    command::WorkerStats stats;
    std::string out;
    resp::Writer writer{out};
    std::vector<std::string> mine, theirs;
};

TEST_F(ClusterMigrate, RoutesByTheKeysAfterKeys) {
    // Keys of this node: served (NOKEY, none exists); another node's:
    // redirected, whichever form names them.
    EXPECT_THAT(run({"MIGRATE", "h", "1", mine[0], "0", "10"}), IsSimple("NOKEY"));
    EXPECT_THAT(run({"MIGRATE", "h", "1", theirs[0], "0", "10"}), IsError(StartsWith("MOVED ")));
    EXPECT_THAT(run({"MIGRATE", "h", "1", "", "0", "10", "KEYS", theirs[0]}),
                IsError(StartsWith("MOVED ")));
    // The empty key argument is not a key of the KEYS form.
    if (core::key_slot(mine[0]) != core::key_slot(mine[1])) {
        EXPECT_THAT(run({"MIGRATE", "h", "1", "", "0", "10", "KEYS", mine[0], mine[1]}),
                    IsError("CROSSSLOT Keys in request don't hash to the same slot"));
    }
    EXPECT_THAT(run({"MIGRATE", "h", "1", "", "0", "10", "KEYS", mine[0]}), IsSimple("NOKEY"));
    // RESTORE-ASKING is served as after ASKING: for a slot this node
    // imports; RESTORE is redirected.
    ASSERT_THAT(run({"BF.ADD", mine[0], "x"}), IsInt(1));
    const RespValue dump = decode_reply(run({"DUMP", mine[0]}));
    ASSERT_THAT(dump, IsBulk(_));
    const std::string& payload = dump.text;
    EXPECT_THAT(run({"RESTORE", theirs[0], "0", payload}), IsError(StartsWith("MOVED ")));
    EXPECT_THAT(run({"RESTORE-ASKING", theirs[0], "0", payload}), IsError(StartsWith("MOVED ")));
    const std::string slot = std::to_string(core::key_slot(theirs[0]));
    ASSERT_THAT(run({"CLUSTER", "SETSLOT", slot, "IMPORTING", cluster::node_id("b", 2)}), IsOk());
    EXPECT_THAT(run({"RESTORE-ASKING", theirs[0], "0", payload}), IsOk());
}

}  // namespace
}  // namespace bloomery
