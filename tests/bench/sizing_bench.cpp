// The sizing table: for each error rate and layout, what BF.RESERVE key p n
// costs in bits per item (against RedisBloom's bits for the same RESERVE),
// what a lookup costs, and the false-positive rate measured at capacity.
//
//   sizing_bench [items] [probes]     (defaults 10000000 and 2000000)
//
// Each filter is a scaling one as BF.RESERVE makes it (one sub-filter at p/2
// until it fills), filled with `items` distinct items (untimed). Then:
//   ns/lookup  single-threaded ScalableFilter::contains_many (BF.MEXISTS's
//              path) over batches of 100 items, half present, half absent,
//              hashing included; the best of three passes over `probes`
//              items, so other work on the machine shows less.
//   fpr        the share of `probes` / 2 absent items reported present.
// Layouts: the filter policies classic, blocked, auto (as filters made
// before multi-line blocks have it) and auto (blocks), the default; then
// one layer in each block size of 1,024, 2,048 and 4,096 bits, sized as
// auto would (bounds.hpp: size_layer), looked up as contains_many looks up
// a one-layer blocked filter (hash the batch, then contains_blocked); rows
// where that block is not used at that rate (small or too many bits) are
// left out.
// Output: one tab-separated line per (rate, layout), with a header.
//
// Built by the bench preset (tests/bench/CMakeLists.txt); needs only the
// bloom library.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <functional>
#include <span>

#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/filter.hpp"
#include "bloomery/bloom/hash.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/bloom/scalable_filter.hpp"

namespace {

using namespace bloomery::bloom;

// Items as a server sees them: URL-like, 30-50 bytes.
void item(std::string& out, const char* kind, std::uint64_t i) {
    out = "https://example.com/";
    out += kind;
    out += "/page?id=";
    out += std::to_string(i * 2654435761ULL % 1000000007ULL);
    out += "&n=";
    out += std::to_string(i);
}

struct Arena {
    std::string bytes;
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    void add(const std::string& s) {
        spans.emplace_back(bytes.size(), s.size());
        bytes += s;
    }
    std::vector<std::string_view> views() const {
        std::vector<std::string_view> v;
        v.reserve(spans.size());
        for (const auto& [at, len] : spans) v.emplace_back(bytes.data() + at, len);
        return v;
    }
};

std::uint64_t redisbloom_bits(std::uint64_t capacity, double error_rate) {
    const std::optional<LayerGeometry> layer =
        redisbloom_layer(capacity, error_rate / 2, kRedisBloomDefaultOptions);
    return layer ? layer->bits : 0;
}

// The best of three timed passes of `lookup` over the probes in batches
// of 100, in ns per item.
double time_lookups(
    const std::vector<std::string_view>& probe, std::vector<std::uint8_t>& found,
    const std::function<void(std::span<const std::string_view>, std::span<std::uint8_t>)>& lookup) {
    double best = 1e300;
    for (int pass = 0; pass < 3; ++pass) {
        const auto start = std::chrono::steady_clock::now();
        constexpr std::size_t kBatch = 100;
        for (std::size_t at = 0; at < probe.size(); at += kBatch) {
            const std::size_t n = std::min(kBatch, probe.size() - at);
            lookup(std::span(probe).subspan(at, n), std::span(found).subspan(at, n));
        }
        const double ns =
            std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                .count() /
            static_cast<double>(probe.size());
        best = std::min(best, ns);
    }
    return best;
}

struct Row {
    double p;
    std::string layout;
    std::size_t layers;
    std::uint64_t bits;
    double ns;
};

// Prints a row; false on a false negative.
bool report(const Row& row, std::uint64_t items, const std::vector<std::uint8_t>& found) {
    std::uint64_t false_positives = 0;
    std::uint64_t misses = 0;
    for (std::size_t i = 0; i < found.size(); ++i) {
        if (i % 2 == 1) false_positives += found[i];
        if (i % 2 == 0 && found[i] == 0) ++misses;
    }
    if (misses != 0) {
        std::fprintf(stderr, "false negatives: %llu\n", static_cast<unsigned long long>(misses));
        return false;
    }
    const double bpi = static_cast<double>(row.bits) / static_cast<double>(items);
    const double rb =
        static_cast<double>(redisbloom_bits(items, row.p)) / static_cast<double>(items);
    std::printf("%g\t%s\t%zu\t%.3f\t%.3f\t%+.1f%%\t%.1f\t%.3g\n", row.p, row.layout.c_str(),
                row.layers, bpi, rb, (bpi / rb - 1) * 100, row.ns,
                static_cast<double>(false_positives) / static_cast<double>(found.size() / 2));
    std::fflush(stdout);
    return true;
}

// A filter of `layout` (a policy) as BF.RESERVE makes it, filled.
bool run_filter(double p, Layout layout, std::uint64_t items,
                const std::vector<std::string_view>& probe, std::vector<std::uint8_t>& found) {
    FilterOptions options;
    options.error_rate = p;
    options.capacity = items;
    options.layout = layout;
    const FilterRef owned = ScalableFilter::create(options);
    ScalableFilter& filter = *owned;
    std::string s;
    for (std::uint64_t i = 0; i < items; ++i) {
        item(s, "present", i);
        filter.add(s, GrowthLimits{});
    }
    std::string used;
    std::uint64_t bits = 0;
    for (std::size_t l = 0; l < filter.num_layers(); ++l) {
        if (!used.empty()) used += ",";
        used += layout_name(filter.layer(l).layout());
        bits += filter.layer(l).bits();
    }
    const double ns =
        time_lookups(probe, found, [&](auto in, auto out) { filter.contains_many(in, out); });
    const std::string name =
        layout == Layout::automatic_blocks ? "auto-blocks" : std::string(layout_name(layout));
    return report(Row{p, name + "(" + used + ")", filter.num_layers(), bits, ns}, items, found);
}

// One layer of the block size `layout`, sized for p/2 as auto sizes it.
bool run_layer(double p, Layout layout, std::uint64_t items,
               const std::vector<std::string_view>& probe, std::vector<std::uint8_t>& found) {
    const LayerGeometry geometry = size_layer(items, p / 2, layout);
    if (geometry.layout != layout) return true;
    const LayerPtr layer = make_layer(geometry);
    std::string s;
    for (std::uint64_t i = 0; i < items; ++i) {
        item(s, "present", i);
        layer->add(hash_item(s));
    }
    const double ns = time_lookups(probe, found, [&](auto in, auto out) {
        ItemHash hashes[100];
        for (std::size_t i = 0; i < in.size(); ++i) hashes[i] = hash_item(in[i]);
        layer->contains_blocked(hashes, in.size(), out.data());
    });
    return report(Row{p, std::string(layout_name(layout)), 1, geometry.bits, ns}, items, found);
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t items = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10000000;
    const std::uint64_t probes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 2000000;
    const double rates[] = {0.5, 0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6, 1e-9};
    const Layout policies[] = {Layout::classic, Layout::blocked, Layout::automatic,
                               Layout::automatic_blocks};
    const Layout blocks[] = {Layout::blocked_1024, Layout::blocked_2048, Layout::blocked_4096};

    // Probes: every other one present (an item added), absent otherwise.
    Arena arena;
    std::string s;
    for (std::uint64_t i = 0; i < probes; ++i) {
        if (i % 2 == 0) {
            item(s, "present", (i / 2) * (items / (probes / 2 + 1) + 1) % items);
        } else {
            item(s, "absent", i);
        }
        arena.add(s);
    }
    const std::vector<std::string_view> probe = arena.views();
    std::vector<std::uint8_t> found(probe.size());

    std::printf(
        "error_rate\tlayout\tlayers\tbits_per_item\tredisbloom_bits_per_item\tvs_"
        "redisbloom\tns_per_lookup\tfpr\n");
    for (const double p : rates) {
        for (const Layout layout : policies) {
            if (!run_filter(p, layout, items, probe, found)) return 1;
        }
        for (const Layout layout : blocks) {
            if (!run_layer(p, layout, items, probe, found)) return 1;
        }
    }
    return 0;
}
