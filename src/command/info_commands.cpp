// INFO: Redis's sections and field names, filled from the server's hooks.
// The sections are in info_sections.hpp's files; this lists them, picks
// those asked for, and holds the helpers their lines share.

#include <cstdio>
#include <string>

#include "args.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/printable.hpp"
#include "families.hpp"
#include "info_sections.hpp"
#include "memory_account.hpp"

namespace bloomery::command {

namespace info {

void line(std::string& out, std::string_view field, std::string_view value) {
    out.append(field);
    out.push_back(':');
    out.append(value);
    out.append("\r\n");
}

void text_line(std::string& out, std::string_view field, std::string_view text) {
    out.append(field);
    out.push_back(':');
    // The whole text: INFO is read by operators and tools, not bounded as an
    // error reply that quotes a client is.
    core::append_printable(out, text, text.size());
    out.append("\r\n");
}

std::string human_bytes(std::uint64_t bytes) {
    const char* units[] = {"B", "K", "M", "G", "T"};
    auto value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024 && unit < 4) {
        value /= 1024;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text, unit == 0 ? "%.0f%s" : "%.2f%s", value, units[unit]);
    return text;
}

std::string percent(std::uint64_t numerator, std::uint64_t denominator) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f%%",
                  denominator == 0
                      ? 0.0
                      : static_cast<double>(numerator) * 100.0 / static_cast<double>(denominator));
    return text;
}

std::string fixed2(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", value);
    return text;
}

std::string ratio(std::uint64_t numerator, std::uint64_t denominator) {
    return fixed2(share(numerator, denominator));
}

}  // namespace info

namespace {

using info::InfoContext;

struct InfoSection {
    // Whether INFO without arguments (and INFO default) shows it; INFO all
    // and everything show every section.
    enum class Shown { by_default, on_request };
    std::string_view name;
    void (*render)(InfoContext&, std::string&);
    Shown shown;
};

// Redis 7.0's sections, in its order.
constexpr InfoSection kInfoSections[] = {
    {"server", info::server_section, InfoSection::Shown::by_default},
    {"clients", info::clients_section, InfoSection::Shown::by_default},
    {"memory", info::memory_section, InfoSection::Shown::by_default},
    {"persistence", info::persistence_section, InfoSection::Shown::by_default},
    {"stats", info::stats_section, InfoSection::Shown::by_default},
    {"replication", info::replication_section, InfoSection::Shown::by_default},
    {"cpu", info::cpu_section, InfoSection::Shown::by_default},
    {"modules", info::modules_section, InfoSection::Shown::by_default},
    {"commandstats", info::commandstats_section, InfoSection::Shown::on_request},
    {"errorstats", info::errorstats_section, InfoSection::Shown::by_default},
    {"latencystats", info::latencystats_section, InfoSection::Shown::on_request},
    {"cluster", info::cluster_section, InfoSection::Shown::by_default},
    {"keyspace", info::keyspace_section, InfoSection::Shown::by_default},
};

// Which sections INFO's arguments ask for: those named, "default" (also
// what no argument means), "all" or "everything"; unknown names are left
// out, as Redis does.
class InfoSelection {
public:
    explicit InfoSelection(Args argv) : names_(ArgCursor(argv).rest()) {
        defaults_ = names_.empty();
        for (const std::string_view name : names_) {
            if (iequals(name, "default")) defaults_ = true;
            if (iequals(name, "all") || iequals(name, "everything")) all_ = true;
        }
    }

    bool wants(const InfoSection& section) const {
        if (all_ || (defaults_ && section.shown == InfoSection::Shown::by_default)) return true;
        for (const std::string_view name : names_) {
            if (iequals(name, section.name)) return true;
        }
        return false;
    }

private:
    Args names_;
    bool defaults_ = false;
    bool all_ = false;
};

void cmd_info(InfoContext& ctx, Args argv) {
    const InfoSelection selection(argv);
    std::string out;
    for (const InfoSection& section : kInfoSections) {
        if (!selection.wants(section)) continue;
        if (!out.empty()) out.append("\r\n");
        section.render(ctx, out);
    }
    ctx.out.verbatim(out);
}

}  // namespace

void register_info_commands(Registry& registry) {
    registry.register_handler<cmd_info>("info");
}

}  // namespace bloomery::command
