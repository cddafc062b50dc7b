// No heap allocation per command on the hot path: BF.ADD,
// BF.EXISTS, BF.MADD and BF.MEXISTS on an existing filter, through the RESP
// parser and the dispatcher as a connection runs them, allocate nothing once
// warm. Its own executable because it replaces the global operator new and
// delete with counting versions.
//
// Sanitizer builds: the replacements below forward to malloc / free, which
// ASan and TSan intercept, so the test stays valid there (the sanitizers
// still see every allocation; only new/delete-vs-malloc/free mismatch reports
// are lost, in this executable alone) and runs in `make asan` / `make tsan`.
//
// Its few replies are compared as bytes: this executable links no matchers,
// whose allocations it would count.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "bloomery/cluster/topology.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/command/slowlog.hpp"
#include "bloomery/resp/parser.hpp"
#include "bloomery/resp/writer.hpp"
#include "fake_hooks.hpp"

namespace {

// Counted only while armed, and only on the arming thread, so that gtest's
// bookkeeping and any other thread never count.
std::atomic<std::size_t> g_allocations{0};
thread_local bool t_counting = false;

void* counted_malloc(std::size_t size) {
    if (t_counting) g_allocations.fetch_add(1, std::memory_order_relaxed);
    return std::malloc(size == 0 ? 1 : size);
}

void* counted_aligned(std::size_t size, std::align_val_t align) {
    if (t_counting) g_allocations.fetch_add(1, std::memory_order_relaxed);
    const auto alignment = std::max(static_cast<std::size_t>(align), sizeof(void*));
    void* p = nullptr;
    if (posix_memalign(&p, alignment, size == 0 ? 1 : size) != 0) return nullptr;
    return p;
}

// Counts the allocations made on this thread while it lives.
class AllocationCounter {
public:
    AllocationCounter() : start_(g_allocations.load()) { t_counting = true; }
    ~AllocationCounter() { t_counting = false; }
    std::size_t count() const { return g_allocations.load() - start_; }

private:
    std::size_t start_;
};

}  // namespace

void* operator new(std::size_t size) {
    void* p = counted_malloc(size);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}
void* operator new[](std::size_t size) {
    return ::operator new(size);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
    return counted_malloc(size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
    return counted_malloc(size);
}
void* operator new(std::size_t size, std::align_val_t align) {
    void* p = counted_aligned(size, align);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}
void* operator new[](std::size_t size, std::align_val_t align) {
    return ::operator new(size, align);
}
void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
    return counted_aligned(size, align);
}
void* operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
    return counted_aligned(size, align);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}

namespace bloomery::command {
namespace {

using testing::FakeHooks;

constexpr std::size_t kBatch = 100;
constexpr int kRounds = 50;

// Builds the command layer as the server does (tests/unit/command_test.cpp),
// without sockets.
class HotPathAllocations : public ::testing::Test {
protected:
    void SetUp() override {
        const auto built = build_default_registry(registry);
        ASSERT_TRUE(built) << built.error();
        // Large enough that the adds below never grow it: growth allocates a
        // layer, which is the filter's memory, not per-command overhead.
        ASSERT_EQ(run_words({"BF.RESERVE", "hot", "0.01", "1000000"}), "+OK\r\n");
        for (int round = 0; round < 2 * kRounds + 2; ++round) {
            std::vector<std::string> madd{"BF.MADD", "hot"};
            std::vector<std::string> mexists{"BF.MEXISTS", "hot"};
            for (std::size_t i = 0; i < kBatch; ++i) {
                madd.push_back("https://example.com/batch/" + std::to_string(round) + "/" +
                               std::to_string(i));
                mexists.push_back("https://example.com/probe/" + std::to_string(round * 7 + 1) +
                                  "/" + std::to_string(i));
            }
            const std::string item = "https://example.com/item/" + std::to_string(round);
            commands.push_back({"BF.ADD", "hot", item});
            commands.push_back({"BF.EXISTS", "hot", item});
            commands.push_back({"BF.EXISTS", "hot", item + "/absent"});
            commands.push_back(std::move(madd));
            commands.push_back(std::move(mexists));
        }
    }

    // Cluster mode with this node as `self` of a two-node map: "hot" hashes
    // to slot 6093, node a's.
    void enable_cluster(std::string_view self) {
        auto topology =
            cluster::parse_topology("0-8191=127.0.0.1:7001,8192-16383=127.0.0.1:7002", self, "");
        ASSERT_TRUE(topology) << topology.error();
        config.cluster_enabled = true;
        config.cluster = std::make_shared<const cluster::Topology>(std::move(*topology));
        hooks.cluster.publish(cluster::ClusterMap::from_topology(*config.cluster));
    }

    std::string run_words(const std::vector<std::string>& words) {
        const std::vector<std::string_view> views(words.begin(), words.end());
        out.clear();
        dispatch(registry, context, views);
        return out;
    }

    // Runs commands [first, first + count) through the dispatcher with an
    // argv vector whose capacity is reused, as the connection does.
    void dispatch_range(std::size_t first, std::size_t count) {
        for (std::size_t c = first; c < first + count; ++c) {
            argv.clear();
            for (const std::string& word : commands[c]) argv.emplace_back(word);
            out.clear();
            dispatch(registry, context, argv);
        }
    }

    // Warms up on the first two rounds, then counts the allocations of
    // dispatching the other kRounds.
    std::size_t allocations_after_warm_up() {
        dispatch_range(0, 5 * 2);
        AllocationCounter counter;
        dispatch_range(5 * 2, 5 * kRounds);
        return counter.count();
    }

    // The same commands as one pipelined RESP buffer.
    std::string pipeline(std::size_t first, std::size_t count) const {
        std::string bytes;
        for (std::size_t c = first; c < first + count; ++c) {
            bytes += "*" + std::to_string(commands[c].size()) + "\r\n";
            for (const std::string& word : commands[c]) {
                bytes += "$" + std::to_string(word.size()) + "\r\n" + word + "\r\n";
            }
        }
        return bytes;
    }

    // Parses `bytes` command by command and dispatches each, replies appended
    // to `out` (cleared per pipeline, not per command: one write per batch).
    // Returns the number of commands run.
    std::size_t parse_and_dispatch(std::string_view bytes) {
        std::size_t ran = 0;
        out.clear();
        std::uint64_t clock_mark = core::CommandClock::get().now();  // as a connection times
        while (!bytes.empty()) {
            const resp::ParseResult parsed = parser.parse(bytes, argv);
            if (parsed.status != resp::ParseStatus::complete) break;
            bytes.remove_prefix(parsed.consumed);
            dispatch(registry, context, argv, clock_mark);
            ++ran;
        }
        return ran;
    }

    // Feeds `bytes` to the parser `read_size` bytes at a time, as reads
    // arrive; returns the number of commands parsed.
    std::size_t parse_in_reads(std::string_view bytes, std::size_t read_size) {
        std::size_t start = 0;  // first byte not consumed
        std::size_t received = 0;
        std::size_t parsed = 0;
        while (received < bytes.size()) {
            received = std::min(bytes.size(), received + read_size);
            for (;;) {
                const resp::ParseResult result =
                    parser.parse(bytes.substr(start, received - start), argv);
                if (result.status != resp::ParseStatus::complete) break;
                start += result.consumed;
                ++parsed;
            }
        }
        return parsed;
    }

    Registry registry;
    store::Keyspace keyspace{8};
    // The slow log's threshold is an hour: the check runs for every command
    // as in the server, but a command descheduled on a loaded machine is not
    // logged (logging one copies its arguments, which allocates).
    core::Config config = [] {
        core::Config c;
        c.slowlog_log_slower_than_us = 3600ll * 1000 * 1000;
        return c;
    }();
    FakeHooks hooks;
    ClientState client;
    // Every command is timed into `stats` (per-command counters and latency
    // histogram, allocated on a command's first call, in the warm-up) and
    // checked against the slow log's threshold.
    WorkerStats stats;
    core::RuntimeSettings settings{config};
    Slowlog slowlog{settings};
    std::string out;
    resp::Writer writer{out};
    DispatchContext context{registry, keyspace, config, settings, hooks,
                            client,   stats,    writer, nullptr,  &slowlog};
    resp::Parser parser;
    std::vector<std::vector<std::string>> commands;  // 5 per round
    std::vector<std::string_view> argv;
};

TEST_F(HotPathAllocations, CountingAllocatorSeesAllocations) {
    // The counter must be able to fail the tests below.
    AllocationCounter counter;
    auto* p = new std::string(100, 'x');
    delete p;
    EXPECT_GE(counter.count(), 1u);
}

TEST_F(HotPathAllocations, CountingSeesAllocationsInsideTheDispatcher) {
    // Creating a filter allocates it: the counter sees the command layer's
    // allocations, not only this file's.
    const std::vector<std::string_view> create{"BF.ADD", "new-key", "item"};
    out.clear();
    std::size_t allocations;
    {
        AllocationCounter counter;
        dispatch(registry, context, create);
        allocations = counter.count();
    }
    EXPECT_GE(allocations, 1u);
    EXPECT_EQ(out, ":1\r\n");
}

TEST_F(HotPathAllocations, BloomCommandsOnAnExistingFilterDoNotAllocate) {
    // Warm-up: grows the argv and reply buffers and the handlers' per-thread
    // scratch vectors to their steady size.
    const std::size_t allocations = allocations_after_warm_up();
    EXPECT_EQ(allocations, 0u) << "allocations in " << 5 * kRounds << " commands";
    // The commands did their work: the last MEXISTS answered 100 integers.
    EXPECT_EQ(out.rfind("*100\r\n", 0), 0u) << out.substr(0, 40);
    EXPECT_EQ(run_words({"BF.EXISTS", "hot", commands[5 * kRounds + 5][2]}), ":1\r\n");
}

TEST_F(HotPathAllocations, EachCommandAloneDoesNotAllocate) {
    // Per command, so a failure names the command that allocates.
    dispatch_range(0, 5 * 2);
    for (std::size_t kind = 0; kind < 5; ++kind) {
        std::size_t allocations;
        {
            AllocationCounter counter;
            for (int round = 2; round < 2 + kRounds; ++round) {
                dispatch_range(static_cast<std::size_t>(round) * 5 + kind, 1);
            }
            allocations = counter.count();
        }
        EXPECT_EQ(allocations, 0u) << commands[kind][0];
    }
}

TEST_F(HotPathAllocations, ClusterModeServingItsOwnSlotDoesNotAllocate) {
    // The slot check hashes each key once, in place.
    enable_cluster("127.0.0.1:7001");
    const std::size_t allocations = allocations_after_warm_up();
    EXPECT_EQ(allocations, 0u) << "allocations in " << 5 * kRounds << " commands";
    EXPECT_EQ(out.rfind("*100\r\n", 0), 0u) << out.substr(0, 40);
}

TEST_F(HotPathAllocations, ClusterRedirectsDoNotAllocate) {
    // A node that does not own "hot" answers every command with -MOVED,
    // formatted on the stack.
    enable_cluster("127.0.0.1:7002");
    const std::size_t allocations = allocations_after_warm_up();
    EXPECT_EQ(allocations, 0u) << "allocations in " << 5 * kRounds << " redirects";
    EXPECT_EQ(out, "-MOVED 6093 127.0.0.1:7001\r\n");
}

TEST_F(HotPathAllocations, ParsingAndDispatchingAPipelineDoesNotAllocate) {
    const std::string warm = pipeline(0, 5 * 2);
    const std::string bytes = pipeline(5 * 2, 5 * kRounds);
    ASSERT_EQ(parse_and_dispatch(warm), 5u * 2);
    // The reply buffer of a whole pipeline: a connection keeps its output
    // buffer's capacity between batches.
    out.reserve(64 * 1024);
    std::size_t ran;
    std::size_t allocations;
    {
        AllocationCounter counter;
        ran = parse_and_dispatch(bytes);
        allocations = counter.count();
    }
    EXPECT_EQ(ran, 5u * kRounds);
    EXPECT_EQ(allocations, 0u) << "allocations parsing and running " << ran << " commands";
}

TEST_F(HotPathAllocations, ParsingAPipelineSplitAcrossReadsDoesNotAllocate) {
    // A connection hands the parser what its reads returned so far; a
    // command cut at a read boundary resumes on the next call. BF.MADD of
    // 100 URLs is about 4 KB, so 1000-byte reads cut most commands.
    const std::string warm = pipeline(0, 5 * 2);
    const std::string bytes = pipeline(5 * 2, 5 * kRounds);
    ASSERT_EQ(parse_in_reads(warm, 1000), 5u * 2);
    std::size_t parsed;
    std::size_t allocations;
    {
        AllocationCounter counter;
        parsed = parse_in_reads(bytes, 1000);
        allocations = counter.count();
    }
    EXPECT_EQ(parsed, 5u * kRounds);
    EXPECT_EQ(allocations, 0u);
}

}  // namespace
}  // namespace bloomery::command
