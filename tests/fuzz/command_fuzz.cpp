// libFuzzer target: commands through the dispatcher, against an in-memory
// keyspace and a fake server (command/server.hpp) (no sockets, no files, no threads).
//
// The input is a program of steps, read front to back (see run_program):
//   - a command: one byte picks the name from the registry's own table (so the
//     fuzzer never has to guess "bf.loadchunk"), one the argument count, and
//     each argument is either a token from kTokens (keys, option names,
//     numbers at and past every bound) or raw bytes from the input;
//   - BF.ADD / BF.MADD / BF.INSERT followed by BF.EXISTS / BF.MEXISTS of the
//     same items: an item the server accepted must be reported present (a
//     Bloom filter has no false negatives);
//   - a dump round trip: BF.SCANDUMP one key to the end and BF.LOADCHUNK every
//     piece into another: whatever the server created it must restore
//     (the filter bounds), to the same BF.INFO and the same dump;
//   - BF.LOADCHUNK of a real SCANDUMP piece with one byte changed, its checksum
//     optionally recomputed (XXH64, seed 0, per proto/resp.md) so the
//     decoder's range checks are reached, not only the checksum check.
// Every reply must be exactly one well-formed RESP value (RESP2 types only
// unless the client said HELLO 3), with no CR or LF inside a status or error
// line (command_fuzz_replies.hpp checks). Any violation aborts.
//
// Memory stays bounded: the keyspace is emptied before every input, keys come
// from a set of four names, and max-filter-bytes is small (kMaxFilterBytes),
// so a BF.RESERVE of 10^12 items is refused rather than allocated.

#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/command/context.hpp"
#include "bloomery/command/pubsub.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/command/server.hpp"
#include "bloomery/core/ascii.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/resp/writer.hpp"
#include "bloomery/store/keyspace.hpp"
#include "bloomery/store/keyspace_view.hpp"
#include "command_fuzz_replies.hpp"

namespace {

using namespace bloomery;
using fuzz::ReplyReader;
using fuzz::require;
using fuzz::Value;

// 64 KB: a 1 % layer of 50,000 items, so filters still grow a few layers and
// every refusal path (RESERVE, growth, LOADCHUNK) is a small number away;
// small enough that four keys of 64 layers stay far below libFuzzer's 2 GB
// RSS limit and a dump round trip copies little.
constexpr std::uint64_t kMaxFilterBytes = 64 * 1024;
// A dump round trip of a filter this big is skipped: it would only repeat the
// same loop over more chunks.
constexpr std::size_t kMaxRoundTripChunks = 256;

class FakeHooks final : public command::ClientDirectory,
                        public command::ServerStats,
                        public command::Persistence,
                        public command::Shutdown,
                        public command::Replication,
                        public command::ReplicaGate,
                        public command::Migration {
public:
    std::size_t connected_clients() override { return 1; }
    std::int64_t blocked_clients() override { return 0; }
    std::string client_list(std::span<const std::int64_t>) override {
        return "id=1 addr=127.0.0.1:1 laddr=127.0.0.1:6379 name=\n";
    }
    bool kill_client(std::int64_t id) override { return id == 1; }
    bool kill_client(std::string_view) override { return false; }
    command::StatsTotals stats() override { return {}; }
    void reset_stats() override {}
    void save_async(std::function<void(persist::SaveResult)> done) override { done({}); }
    bool snapshot_failing() override { return false; }
    persist::SaveResult bgsave() override { return {persist::SaveStatus::in_progress, {}}; }
    persist::PersistenceInfo persistence() override { return {}; }
    // A SHUTDOWN never stops the fuzzer: it fails at once, as a failed save.
    void begin_shutdown(const command::ShutdownOptions&, std::function<void()> failed) override {
        failed();
    }
    void abort_shutdown(std::function<void(bool)> done) override { done(false); }
    std::int64_t start_time_ms() override { return 0; }
    unsigned worker_threads() override { return 1; }
    command::PubSub& pubsub() { return channels; }
    cluster::ClusterState& cluster_state() { return cluster; }

    command::PubSub channels;
    cluster::ClusterState cluster;
};

// ---- The program -----------------------------------------------------------

// Arguments the fuzzer could not easily invent: keys, option names, numbers at
// and past every bound the commands check.
constexpr std::string_view kTokens[] = {"k0",
                                        "k1",
                                        "k2",
                                        "k3",
                                        "NONSCALING",
                                        "EXPANSION",
                                        "CAPACITY",
                                        "ERROR",
                                        "ITEMS",
                                        "NOCREATE",
                                        "SIZE",
                                        "FILTERS",
                                        "EXPANSION",
                                        "0",
                                        "1",
                                        "-1",
                                        "2",
                                        "3",
                                        "100",
                                        "1000",
                                        "100000",
                                        "1000000000000",
                                        "32768",
                                        "32769",
                                        "4294967295",
                                        "4294967296",
                                        "9223372036854775807",
                                        "9223372036854775808",
                                        "-9223372036854775808",
                                        "18446744073709551615",
                                        "0.01",
                                        "0.5",
                                        "0.999999",
                                        "1e-5",
                                        "1e-300",
                                        "1e-308",
                                        "4.9e-324",
                                        "1.0",
                                        "inf",
                                        "-inf",
                                        "nan",
                                        "+inf",
                                        "1e400",
                                        "0x10",
                                        " 1",
                                        "",
                                        "*",
                                        "k*",
                                        "?",
                                        "[k-",
                                        "\\",
                                        "MATCH",
                                        "COUNT",
                                        "TYPE",
                                        "MBbloom--",
                                        "NX",
                                        "XX",
                                        "GT",
                                        "LT",
                                        "SAVE",
                                        "NOSAVE",
                                        "SETNAME",
                                        "AUTH",
                                        "default",
                                        "ID",
                                        "ADDR",
                                        "LADDR",
                                        "SKIPME",
                                        "USER",
                                        "MAXAGE",
                                        "yes",
                                        "no",
                                        "LIB-NAME",
                                        "LIB-VER",
                                        "a b",
                                        "a\r\nb",
                                        "\n",
                                        "\r",
                                        "\x00",
                                        "max-filter-bytes",
                                        "maxmemory",
                                        "save",
                                        "everything",
                                        "all",
                                        "default",
                                        "server",
                                        "memory",
                                        "keyspace",
                                        "stats",
                                        "persistence"};
constexpr std::size_t kNumTokens = std::size(kTokens);
constexpr std::string_view kKeys[] = {"k0", "k1", "k2", "k3"};

class Input {
public:
    Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
    bool empty() const { return pos_ >= size_; }
    std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
    // A length byte, then that many bytes (fewer at the end of the input).
    std::string_view bytes() {
        const std::size_t want = byte();
        const std::size_t n = std::min(want, size_ - std::min(pos_, size_));
        const std::string_view out(reinterpret_cast<const char*>(data_) + pos_, n);
        pos_ += n;
        return out;
    }

private:
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t pos_ = 0;
};

struct Server {
    Server() {
        require(command::build_default_registry(registry).ok(), "registry did not build");
        config.max_filter_bytes = kMaxFilterBytes;
        client.id = 1;
        client.address = "127.0.0.1:1";
        client.local_address = "127.0.0.1:6379";
        // Every top-level name and every "parent sub" pair, in table order.
        for (const command::CommandSpec* spec : registry.all()) {
            names.push_back({spec->name});
            for (const auto& sub : spec->subcommands) {
                const std::string& full = sub->name;  // "parent|sub"
                names.push_back({spec->name, full.substr(full.find('|') + 1)});
            }
        }
    }

    // Runs one command and returns its reply, checked.
    Value run(const std::vector<std::string>& words) {
        std::vector<std::string_view> argv(words.begin(), words.end());
        out.clear();
        const bool resp3_before = writer->protocol() == 3;
        command::DispatchContext ctx{registry, keyspace, config, settings,
                                     hooks,    client,   stats,  *writer};
        command::dispatch(registry, ctx, argv);
        const bool resp3 = resp3_before || writer->protocol() == 3;
        ReplyReader reader(out, resp3);
        for (std::string_view per_channel :
             {"subscribe", "unsubscribe", "psubscribe", "punsubscribe"}) {
            if (core::iequals(words[0], per_channel)) return reader.read_each();
        }
        return reader.read_whole();
    }

    // The checked steps run their commands at once: a transaction or a
    // RESP2 subscription left by a fuzzed command (MULTI, SUBSCRIBE) ends
    // first, as a client would end it.
    void plain_client() {
        if (client.transaction.active) run({"DISCARD"});
        if (client.subscriptions.count() != 0) {
            run({"UNSUBSCRIBE"});
            run({"PUNSUBSCRIBE"});
        }
    }

    void reset() {
        keyspace.clear();
        out.clear();
        writer.emplace(out);
        client.protocol.store(2);
        client.set_name("");
        client.close_after_reply = false;
        plain_client();
    }

    command::Registry registry;
    store::Keyspace keyspace{4};
    core::Config config;
    core::RuntimeSettings settings{config};
    FakeHooks hooks;
    command::ClientState client;
    command::WorkerStats stats;
    std::string out;
    std::optional<resp::Writer> writer;
    std::vector<std::vector<std::string>> names;
};

std::string_view key_from(Input& in) {
    return kKeys[in.byte() % std::size(kKeys)];
}

std::string argument(Input& in) {
    const std::uint8_t pick = in.byte();
    if (pick < 160) return std::string(kTokens[pick % kNumTokens]);
    return std::string(in.bytes());
}

// A name byte of 255 is followed by the name's bytes (what the seeds use, so
// they survive commands being added to the table); any other byte indexes it.
void step_command(Server& server, Input& in) {
    const std::uint8_t pick = in.byte();
    std::vector<std::string> words;
    if (pick == 255) {
        words.emplace_back(in.bytes());
    } else {
        words = server.names[pick % server.names.size()];
    }
    const std::size_t extra = in.byte() % 12;
    for (std::size_t i = 0; i < extra && !in.empty(); ++i) words.push_back(argument(in));
    server.run(words);
}

// An add's or a lookup's answer: 0/1 under RESP2, false/true under RESP3.
bool is_integer(const Value& v, std::int64_t expected) {
    return (v.type == ':' || v.type == '#') && v.integer == expected;
}

// Adds items, then asks for them: every item the add answered 0 or 1 for
// must now be reported present.
void step_add_then_exists(Server& server, Input& in) {
    const std::string key(key_from(in));
    const std::uint8_t form = in.byte();
    std::vector<std::string> items;
    const std::size_t count = 1 + (form & 0x07) % 5;
    for (std::size_t i = 0; i < count; ++i) items.emplace_back(in.bytes());
    // A deadline set earlier could expire the key between the two commands.
    server.run({"PERSIST", key});

    std::vector<std::string> add;
    switch ((form >> 3) % 3) {
        case 0:
            items.resize(1);
            add = {"BF.ADD", key};
            break;
        case 1:
            add = {"BF.MADD", key};
            break;
        default:
            add = {"BF.INSERT", key};
            if (form & 0x40) add.insert(add.end(), {"CAPACITY", std::to_string(1 + in.byte())});
            if (form & 0x80) add.insert(add.end(), {"ERROR", "0.001"});
            add.push_back("ITEMS");
            break;
    }
    add.insert(add.end(), items.begin(), items.end());
    const Value added = server.run(add);

    std::vector<bool> accepted(items.size(), false);
    if (added.type == ':' || added.type == '#') {
        accepted[0] = added.integer == 0 || added.integer == 1;
    } else if (added.type == '*') {
        require(added.elements.size() <= items.size(), "more add results than items");
        for (std::size_t i = 0; i < added.elements.size(); ++i) {
            const Value& r = added.elements[i];
            accepted[i] = is_integer(r, 0) || is_integer(r, 1);
        }
    }
    std::vector<std::string> query = {"BF.MEXISTS", key};
    query.insert(query.end(), items.begin(), items.end());
    const Value present = server.run(query);
    require(present.type == '*' && present.elements.size() == items.size(), "MEXISTS shape");
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (accepted[i]) require(is_integer(present.elements[i], 1), "false negative after add");
    }
    if (accepted[0])
        require(is_integer(server.run({"BF.EXISTS", key, items[0]}), 1),
                "BF.EXISTS false negative after add");
}

// One SCANDUMP step: {next iterator, data}, or false if the key has no filter.
bool scandump(Server& server, const std::string& key, std::int64_t iter, std::int64_t& next,
              std::string& data) {
    const Value v = server.run({"BF.SCANDUMP", key, std::to_string(iter)});
    if (v.type == '-') return false;
    require(v.type == '*' && v.elements.size() == 2 && v.elements[0].type == ':' &&
                v.elements[1].type == '$',
            "SCANDUMP shape");
    next = v.elements[0].integer;
    data = v.elements[1].text;
    return true;
}

// Dumps `from` into `to` with SCANDUMP / LOADCHUNK; the copy must load and
// then answer as the original does.
void step_round_trip(Server& server, Input& in) {
    const std::string from(key_from(in));
    std::string to(key_from(in));
    if (to == from) to = "copy";
    // A deadline set earlier could expire the key in the middle of the copy.
    server.run({"PERSIST", from});
    std::int64_t next = 0;
    std::string header;
    if (!scandump(server, from, 0, next, header)) return;
    require(next == 1, "SCANDUMP 0 did not answer iterator 1");
    server.run({"DEL", to});
    const Value created = server.run({"BF.LOADCHUNK", to, "1", header});
    if (created.type == '-') {
        std::fprintf(stderr, "LOADCHUNK of %s's header: -%s\n", from.c_str(), created.text.c_str());
    }
    require(created.type == '+', "a filter the server created cannot be restored from its dump");
    std::int64_t iter = 1;
    std::size_t chunks = 0;
    std::string data;
    while (scandump(server, from, iter, next, data) && next != 0) {
        const Value loaded = server.run({"BF.LOADCHUNK", to, std::to_string(next), data});
        require(loaded.type == '+', "a SCANDUMP chunk was refused by LOADCHUNK");
        iter = next;
        if (++chunks == kMaxRoundTripChunks) return;
    }
    for (const char* field : {"CAPACITY", "SIZE", "FILTERS", "ITEMS", "EXPANSION"}) {
        const Value a = server.run({"BF.INFO", from, field});
        const Value b = server.run({"BF.INFO", to, field});
        // One field: an array of its value (RESP2) or a map of its name
        // and value (RESP3, after a fuzzed HELLO 3).
        const auto one_field = [](const Value& v) {
            return (v.type == '*' && v.elements.size() == 1) ||
                   (v.type == '%' && v.elements.size() == 2);
        };
        require(one_field(a) && one_field(b) && a.type == b.type &&
                    a.elements.back().type == b.elements.back().type &&
                    a.elements.back().integer == b.elements.back().integer,
                "BF.INFO differs after a dump round trip");
    }
    std::string a, b;
    std::int64_t next_a = 0, next_b = 0;
    for (iter = 0;;) {
        require(scandump(server, from, iter, next_a, a) && scandump(server, to, iter, next_b, b),
                "a key vanished during its round trip");
        require(next_a == next_b && a == b, "the restored filter dumps differently");
        if (next_a == 0) break;
        iter = next_a;
    }
}

// Loads a real dump piece with one byte changed into a key, its checksum
// optionally fixed so that the field checks behind it are reached.
void step_mutated_chunk(Server& server, Input& in) {
    const std::string from(key_from(in));
    const std::string to(key_from(in));
    const std::uint8_t how = in.byte();
    std::int64_t iter = 0, next = 0;
    std::string data;
    for (std::size_t i = 0; i <= how % 4; ++i) {
        if (!scandump(server, from, iter, next, data) || next == 0) return;
        if (i < how % 4) iter = next;
    }
    const std::size_t at = (static_cast<std::size_t>(in.byte()) << 8 | in.byte());
    if (!data.empty()) data[at % data.size()] = static_cast<char>(in.byte());
    if ((how & 0x10) && data.size() >= 8) {
        // Both checksums are XXH64, seed 0 (proto/resp.md): over the bytes
        // before it for a header, over (u64 offset, payload) for a chunk.
        const std::size_t body = data.size() - 8;
        std::uint64_t sum;
        if (iter == 0) {
            sum = XXH64(data.data(), body, 0);
        } else {
            std::string hashed(8, '\0');
            const std::uint64_t offset = static_cast<std::uint64_t>(next - 1) - body;
            std::memcpy(hashed.data(), &offset, 8);
            hashed.append(data, 0, body);
            sum = XXH64(hashed.data(), hashed.size(), 0);
        }
        std::memcpy(data.data() + body, &sum, 8);
    }
    if (iter == 0) server.run({"DEL", to});
    server.run({"BF.LOADCHUNK", to, std::to_string(next), data});
}

void run_program(Server& server, Input& in) {
    for (std::size_t steps = 0; steps < 64 && !in.empty(); ++steps) {
        const std::uint8_t kind = in.byte();
        switch (kind % 8) {
            case 0:
            case 1:
            case 2:
            case 3:
                step_command(server, in);
                break;
            case 4:
            case 5:
                server.plain_client();
                step_add_then_exists(server, in);
                break;
            case 6:
                server.plain_client();
                step_round_trip(server, in);
                break;
            default:
                server.plain_client();
                step_mutated_chunk(server, in);
                break;
        }
    }
}

}  // namespace

// Every write the commands made (adds, RESTORE, COPY, chunks, merges) kept
// each non-zero word in a touched region of its layer, where snapshots and
// DUMP look.
void require_covered(const store::Keyspace& keyspace) {
    const store::KeyspaceView view = keyspace.view(store::ViewFor::keys);
    for (std::size_t i = 0; i < view.size(); ++i) {
        const store::KeyspaceView::Entry& entry = view.entry(i);
        // Only plain filters keep touched regions.
        const bloom::ScalableFilter* plain = entry.value.bloom_or_null();
        if (plain == nullptr) continue;
        const bloom::ScalableFilter& filter = *plain;
        for (std::size_t l = 0; l < filter.num_layers(); ++l) {
            require(filter.layer(l).summary_covers_nonzero(),
                    "a non-zero word outside its layer's touched regions");
        }
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static Server server;
    server.reset();
    Input in(data, size);
    run_program(server, in);
    require_covered(server.keyspace);
    return 0;
}
