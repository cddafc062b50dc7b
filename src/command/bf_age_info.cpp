// BF.INFO of an expiring filter (bloom/age_filter.hpp): RedisBloom's five
// fields with their meaning for a window, the single fields plain filters
// also answer where they apply, and the window's own.

#include <cstdint>
#include <string_view>

#include "bf_age_info.hpp"
#include "bloomery/core/ascii.hpp"

namespace bloomery::command {
namespace {

using bloom::AgeFilter;

struct AgeField {
    std::string_view word;
    std::string_view name;
    void (*write)(resp::Writer& out, const AgeFilter& filter);
};

void integer(resp::Writer& out, std::uint64_t value) {
    out.integer(static_cast<std::int64_t>(value));
}

// RedisBloom's five first, in its order.
constexpr std::size_t kRedisBloomFields = 5;
constexpr AgeField kAgeFields[] = {
    // The items the window always holds (l·g).
    {"CAPACITY", "Capacity",
     [](resp::Writer& out, const AgeFilter& f) { integer(out, f.geometry().window_items()); }},
    {"SIZE", "Size",
     [](resp::Writer& out, const AgeFilter& f) { integer(out, f.allocated_bytes()); }},
    {"FILTERS", "Number of filters", [](resp::Writer& out, const AgeFilter&) { out.integer(1); }},
    // Items added to the generations still wholly found.
    {"ITEMS", "Number of items inserted",
     [](resp::Writer& out, const AgeFilter& f) { integer(out, f.items()); }},
    // An expiring filter does not grow.
    {"EXPANSION", "Expansion rate", [](resp::Writer& out, const AgeFilter&) { out.null(); }},
    {"LAYOUT", "Layout", [](resp::Writer& out, const AgeFilter&) { out.bulk("expiring"); }},
    {"SCHEME", "Scheme", [](resp::Writer& out, const AgeFilter&) { out.bulk("bloomery"); }},
    // Bits of all slices per item of the window.
    {"BITSPERITEM", "Bits per item",
     [](resp::Writer& out, const AgeFilter& f) {
         out.real(static_cast<double>(f.num_words()) * 64.0 /
                  static_cast<double>(f.geometry().window_items()));
     }},
    {"ERROR", "Error rate",
     [](resp::Writer& out, const AgeFilter& f) { out.real(f.geometry().error_rate); }},
    {"TIGHTENING", "Tightening ratio", [](resp::Writer& out, const AgeFilter&) { out.null(); }},
    {"MAXSCALEDCAPACITY", "Max scaled capacity",
     [](resp::Writer& out, const AgeFilter& f) { integer(out, f.geometry().window_items()); }},
    {"FPR", "False positive rate",
     [](resp::Writer& out, const AgeFilter& f) { out.real(f.estimated_false_positive_rate()); }},
    // The window's own: its length in ms (0: a count window), its shape
    // [k, l], the generation number, the items a generation takes, when it
    // last shifted (unix ms), and the early shifts of a time window.
    {"WINDOW", "Window ms",
     [](resp::Writer& out, const AgeFilter& f) { integer(out, f.geometry().window_ms); }},
    {"SLICES", "Slices",
     [](resp::Writer& out, const AgeFilter& f) {
         out.array(2);
         integer(out, f.geometry().shape.k);
         integer(out, f.geometry().shape.l);
     }},
    {"GENERATION", "Generation",
     [](resp::Writer& out, const AgeFilter& f) { integer(out, f.generation()); }},
    {"GENERATIONITEMS", "Generation items",
     [](resp::Writer& out, const AgeFilter& f) { integer(out, f.geometry().generation_items); }},
    {"SHIFTED", "Last shift ms",
     [](resp::Writer& out, const AgeFilter& f) { integer(out, f.shifted_ms()); }},
    {"EARLYSHIFTS", "Early shifts",
     [](resp::Writer& out, const AgeFilter& f) { integer(out, f.early_shifts()); }},
};

}  // namespace

bool reply_age_info(resp::Writer& out, const AgeFilter& filter,
                    std::optional<std::string_view> field) {
    if (!field) {
        out.map(kRedisBloomFields);
        for (std::size_t i = 0; i < kRedisBloomFields; ++i) {
            out.simple(kAgeFields[i].name);
            kAgeFields[i].write(out, filter);
        }
        return true;
    }
    for (const AgeField& known : kAgeFields) {
        if (!core::iequals(*field, known.word)) continue;
        if (out.protocol() >= 3) {
            out.map(1);
            out.simple(known.name);
        } else {
            out.array(1);
        }
        known.write(out, filter);
        return true;
    }
    return false;
}

}  // namespace bloomery::command
