// LATENCY: the latency monitor's events (core/latency_monitor.hpp) and the
// per-command latency histograms (core/command_stats.hpp), with Redis 7's
// reply shapes.

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/core/printable.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {
namespace {

std::int64_t unix_now() {
    return static_cast<std::int64_t>(std::time(nullptr));
}

// LATENCY LATEST: per event, its name, the time and latency of its newest
// sample, and its worst.
void cmd_latency_latest(Context& ctx, Args) {
    const std::vector<core::LatencyEvent> events = core::latency_events();
    ctx.out.array(events.size());
    for (const core::LatencyEvent& event : events) {
        const core::LatencySample newest =
            event.samples.empty() ? core::LatencySample{} : event.samples.back();
        ctx.out.array(4);
        ctx.out.bulk(event.name);
        ctx.out.integer(newest.time);
        ctx.out.integer(newest.latency_ms);
        ctx.out.integer(event.max_ms);
    }
}

// LATENCY HISTORY event: its samples, oldest first; empty for an unknown one.
void cmd_latency_history(Context& ctx, Args argv) {
    const std::optional<core::LatencyEvent> found = core::latency_event(ArgCursor(argv, 2).next());
    if (!found) {
        ctx.out.array(0);
        return;
    }
    const core::LatencyEvent& event = *found;
    ctx.out.array(event.samples.size());
    for (const core::LatencySample& sample : event.samples) {
        ctx.out.array(2);
        ctx.out.integer(sample.time);
        ctx.out.integer(sample.latency_ms);
    }
}

void cmd_latency_reset(Context& ctx, Args argv) {
    const Args events = ArgCursor(argv, 2).rest();
    const std::vector<std::string_view> names(events.begin(), events.end());
    ctx.out.integer(static_cast<std::int64_t>(core::latency_reset(names)));
}

// ---- GRAPH ----

// How long ago a sample was, as a column's label: 7s, 12m, 3h, 2d.
std::string age_label(std::int64_t seconds) {
    char text[32];
    if (seconds < 60) {
        std::snprintf(text, sizeof text, "%llds", static_cast<long long>(seconds));
    } else if (seconds < 3600) {
        std::snprintf(text, sizeof text, "%lldm", static_cast<long long>(seconds / 60));
    } else if (seconds < 86400) {
        std::snprintf(text, sizeof text, "%lldh", static_cast<long long>(seconds / 3600));
    } else {
        std::snprintf(text, sizeof text, "%lldd", static_cast<long long>(seconds / 86400));
    }
    return text;
}

// A filled sparkline as Redis draws LATENCY GRAPH: one column per sample
// (at most kColumns a block), kRows rows of three levels each ('_', 'o',
// '#', and '|' below a column's top), the lowest sample on the bottom
// level and the highest on the top one; under them a blank line and each
// column's label written downwards.
void append_sparkline(std::string& out, const std::vector<std::uint32_t>& values,
                      const std::vector<std::string>& labels) {
    constexpr std::size_t kColumns = 80;
    constexpr int kRows = 4;
    constexpr std::string_view kLevels = "_o#";
    constexpr int kSteps = kRows * static_cast<int>(kLevels.size());
    const auto [low, high] = std::minmax_element(values.begin(), values.end());
    const double range = *high == *low ? 1.0 : static_cast<double>(*high - *low);
    for (std::size_t first = 0; first < values.size(); first += kColumns) {
        if (first != 0) out += '\n';
        const std::size_t count = std::min(kColumns, values.size() - first);
        std::vector<int> step(count);
        for (std::size_t j = 0; j < count; ++j) {
            const int s =
                static_cast<int>(static_cast<double>(values[first + j] - *low) * kSteps / range);
            step[j] = std::clamp(s, 0, kSteps - 1);
        }
        for (int row = 0; row < kRows; ++row) {
            std::string text(count, ' ');
            for (std::size_t j = 0; j < count; ++j) {
                const int level = step[j] - (kRows - 1 - row) * static_cast<int>(kLevels.size());
                if (level >= static_cast<int>(kLevels.size())) {
                    text[j] = '|';
                } else if (level >= 0) {
                    text[j] = kLevels[static_cast<std::size_t>(level)];
                }
            }
            out += text;
            out += '\n';
        }
        std::size_t longest = 0;
        for (std::size_t j = 0; j < count; ++j)
            longest = std::max(longest, labels[first + j].size());
        if (longest == 0) continue;
        out += std::string(count, ' ');
        out += '\n';
        for (std::size_t k = 0; k < longest; ++k) {
            std::string text(count, ' ');
            for (std::size_t j = 0; j < count; ++j) {
                if (k < labels[first + j].size()) text[j] = labels[first + j][k];
            }
            out += text;
            out += '\n';
        }
    }
}

void cmd_latency_graph(Context& ctx, Args argv) {
    const std::string_view name = ArgCursor(argv, 2).next();
    const std::optional<core::LatencyEvent> found = core::latency_event(name);
    if (!found || found->samples.empty()) {
        std::string message(errors::kNoLatencySamples);
        core::append_printable(message, name);
        message += "'";
        ctx.out.error(message);
        return;
    }
    const core::LatencyEvent& event = *found;
    std::vector<std::uint32_t> values;
    std::vector<std::string> labels;
    const std::int64_t now = unix_now();
    for (const core::LatencySample& sample : event.samples) {
        values.push_back(sample.latency_ms);
        labels.push_back(age_label(std::max<std::int64_t>(0, now - sample.time)));
    }
    const auto [low, high] = std::minmax_element(values.begin(), values.end());
    char heading[256];
    std::snprintf(heading, sizeof heading, " - high %u ms, low %u ms (all time high %u ms)\n",
                  *high, *low, event.max_ms);
    std::string graph = event.name + heading + std::string(80, '-') + "\n";
    append_sparkline(graph, values, labels);
    ctx.out.verbatim(graph);
}

// ---- DOCTOR ----

struct EventSummary {
    std::size_t samples = 0;
    std::uint32_t average = 0;
    std::uint32_t deviation = 0;  // mean absolute deviation
    std::int64_t period = 0;      // seconds from the oldest sample to now
};

EventSummary summarize(const core::LatencyEvent& event) {
    EventSummary s;
    s.samples = event.samples.size();
    if (s.samples == 0) return s;
    std::uint64_t sum = 0;
    std::int64_t oldest = event.samples.front().time;
    for (const core::LatencySample& sample : event.samples) {
        sum += sample.latency_ms;
        oldest = std::min(oldest, sample.time);
    }
    s.average = static_cast<std::uint32_t>(sum / s.samples);
    std::uint64_t deviation = 0;
    for (const core::LatencySample& sample : event.samples) {
        const std::int64_t d = static_cast<std::int64_t>(sample.latency_ms) - s.average;
        deviation += static_cast<std::uint64_t>(d < 0 ? -d : d);
    }
    s.deviation = static_cast<std::uint32_t>(deviation / s.samples);
    s.period = std::max<std::int64_t>(1, unix_now() - oldest);
    return s;
}

// The kinds of events a report saw, each with its advice.
struct EventKinds {
    bool commands = false;
    bool fast_commands = false;
    bool expiry = false;
    bool disk = false;
    bool snapshots = false;

    void add(const std::string& name) {
        commands = commands || name == core::kLatencyCommand;
        fast_commands = fast_commands || name == core::kLatencyFastCommand;
        expiry = expiry || name == core::kLatencyExpireCycle;
        disk = disk || name == core::kLatencyJournalFsync || name == core::kLatencySnapshotFsync;
        snapshots = snapshots || name == core::kLatencySnapshot;
    }
};

// The report's first part: one line per event with its spikes.
std::string spikes_report(const std::vector<core::LatencyEvent>& events, EventKinds& kinds) {
    std::string report = "Latency spikes recorded (latency-monitor-threshold " +
                         std::to_string(core::latency_threshold_ms()) + " ms):\n\n";
    int number = 0;
    for (const core::LatencyEvent& event : events) {
        const EventSummary s = summarize(event);
        char text[512];
        std::snprintf(
            text, sizeof text,
            "%d. %s: %zu latency spikes (average %ums, mean deviation %ums, period "
            "%.2f sec). Worst all time event %ums.\n",
            ++number, event.name.c_str(), s.samples, s.average, s.deviation,
            s.samples == 0 ? 0.0 : static_cast<double>(s.period) / static_cast<double>(s.samples),
            event.max_ms);
        report += text;
        kinds.add(event.name);
    }
    return report;
}

// The report's second part: what to look at for the kinds of events seen.
std::string advice_report(const EventKinds& kinds, const core::Config& config) {
    std::string report = "\nAdvice:\n\n";
    const std::size_t before = report.size();
    if (kinds.commands) {
        report +=
            "- Slow commands: SLOWLOG GET lists them with their arguments. KEYS, "
            "BF.SCANDUMP of large filters, BF.RESERVE or BF.LOADCHUNK of very large filters "
            "and DEL of very large filters take time in proportion to their size.\n";
    }
    if (kinds.fast_commands) {
        report +=
            "- Fast commands (BF.ADD, BF.EXISTS, ...) took milliseconds: the machine did not "
            "give the server's threads CPU time. Check the load, noisy neighbours, and that "
            "--threads does not exceed the cores the server may use.\n";
    }
    if (kinds.expiry) {
        report +=
            "- Active expiry: a round erases expired filters for up to 25 ms; freeing very "
            "large filters takes time. Many filters expiring at once show here.\n";
    }
    if (kinds.disk) {
        report +=
            "- fsync was slow: use a local disk (an SSD if you can), keep other disk-heavy "
            "processes away from the data directory" +
            std::string(config.appendfsync == core::AppendFsync::always
                            ? ", and consider --appendfsync everysec: with always, every "
                              "write waits for its fsync"
                            : "") +
            ".\n";
    }
    if (kinds.snapshots) {
        report +=
            "- Snapshots took long: they are written by a thread of their own and do not stop "
            "clients, but they compete for the disk with the journal; raise the save points "
            "(--save) if they run too often.\n";
    }
    if (report.size() == before) report += "- No advice for these events.\n";
    return report;
}

// Redis's report (latency.c: createLatencyReport): each event's spikes, then
// advice for the kinds of events seen, in bloomery's words and for
// bloomery's events.
void cmd_latency_doctor(Context& ctx, Args) {
    const std::vector<core::LatencyEvent> events = core::latency_events();
    if (events.empty() && core::latency_threshold_ms() == 0) {
        return ctx.out.verbatim(
            "Latency monitoring is off: no event has been recorded. Turn it on with "
            "\"CONFIG SET latency-monitor-threshold <milliseconds>\" (or "
            "--latency-monitor-threshold) and events that take at least that long are "
            "recorded.\n");
    }
    if (events.empty()) {
        return ctx.out.verbatim("No latency spike has been recorded: nothing took " +
                                std::to_string(core::latency_threshold_ms()) +
                                " ms or more (latency-monitor-threshold) since the monitor was "
                                "turned on or last reset.\n");
    }
    EventKinds kinds;
    std::string report = spikes_report(events, kinds);
    report += advice_report(kinds, ctx.config);
    ctx.out.verbatim(report);
}

// ---- HISTOGRAM ----

// One command's latency distribution as Redis 7 gives it: its calls, and
// per power-of-two bucket from 1024 ns (named by its bound in whole
// microseconds) the calls at or below it, for the buckets that add calls.
void write_histogram(Context& ctx, const core::CommandTotals& totals) {
    std::vector<std::pair<std::int64_t, std::uint64_t>> buckets;
    std::uint64_t previous = 0;
    const std::uint64_t all = totals.latency_count();
    for (unsigned power = 10; power < core::LatencyBuckets::kMaxBits && previous < all; ++power) {
        const std::uint64_t cumulative = totals.latency_at_or_below_power(power);
        if (cumulative > previous) {
            buckets.emplace_back(static_cast<std::int64_t>((std::uint64_t{1} << power) / 1000),
                                 cumulative);
        }
        previous = std::max(previous, cumulative);
    }
    if (previous < all) {
        // Longer than the histogram's range: counted in its last bucket.
        buckets.emplace_back(
            static_cast<std::int64_t>((std::uint64_t{1} << core::LatencyBuckets::kMaxBits) / 1000),
            all);
    }
    ctx.out.map(2);
    ctx.out.bulk("calls");
    ctx.out.integer(static_cast<std::int64_t>(totals.calls));
    ctx.out.bulk("histogram_usec");
    ctx.out.map(buckets.size());
    for (const auto& [usec, count] : buckets) {
        ctx.out.integer(usec);
        ctx.out.integer(static_cast<std::int64_t>(count));
    }
}

void cmd_latency_histogram(With<uses::Stats>& ctx, Args argv) {
    const std::vector<core::CommandTotals> totals = ctx.server.stats.command_stats();
    const auto& by_id = ctx.registry.by_id();
    std::vector<const CommandSpec*> wanted;
    auto consider = [&](const CommandSpec& spec) {
        if (spec.id < totals.size() && totals[spec.id].latency_count() != 0 &&
            std::find(wanted.begin(), wanted.end(), &spec) == wanted.end()) {
            wanted.push_back(&spec);
        }
    };
    const Args names = ArgCursor(argv, 2).rest();
    if (names.empty()) {
        for (const CommandSpec* spec : by_id) consider(*spec);
    } else {
        // As Redis: unknown names are left out; a container brings its
        // subcommands.
        for (const std::string_view name : names) {
            const std::size_t bar = name.find('|');
            const CommandSpec* spec = ctx.registry.find(name.substr(0, bar));
            if (spec != nullptr && bar != std::string_view::npos) {
                spec = spec->find_subcommand(name.substr(bar + 1));
            }
            if (spec == nullptr) continue;
            consider(*spec);
            for (const auto& sub : spec->subcommands) consider(*sub);
        }
    }
    ctx.out.map(wanted.size());
    for (const CommandSpec* spec : wanted) {
        ctx.out.bulk(spec->name);
        write_histogram(ctx, totals[spec->id]);
    }
}

void cmd_latency_help(Context& ctx, Args) {
    reply_help(ctx,
               {"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "DOCTOR",
                "    A report on the latency spikes recorded, with advice.", "GRAPH <event>",
                "    An ASCII graph of the <event>'s spikes.", "HISTORY <event>",
                "    The <event>'s spikes: unix time and milliseconds, oldest first.", "LATEST",
                "    Every event's newest spike and worst one.", "RESET [<event> ...]",
                "    Forget the spikes of the <event>s named, or of every event.",
                "HISTOGRAM [<command> ...]",
                "    Each command's calls by latency (cumulative, per power of two",
                "    microseconds); every command that ran when none is named.", "HELP",
                "    Print this help."});
}

}  // namespace

void register_latency_commands(Registry& registry) {
    registry.register_handler<cmd_latency_latest>("latency|latest");
    registry.register_handler<cmd_latency_history>("latency|history");
    registry.register_handler<cmd_latency_reset>("latency|reset");
    registry.register_handler<cmd_latency_graph>("latency|graph");
    registry.register_handler<cmd_latency_doctor>("latency|doctor");
    registry.register_handler<cmd_latency_histogram>("latency|histogram");
    registry.register_handler<cmd_latency_help>("latency|help");
}

}  // namespace bloomery::command
