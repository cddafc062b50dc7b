// What a filter reports: BF.INFO and BF.DEBUG, with RedisBloom's fields and
// reply shapes (and BF.INFO fields of bloomery's and valkey-bloom's).

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "bf_age_info.hpp"
#include "bf_family.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/ascii.hpp"

namespace bloomery::command {
namespace {

using bloom::ScalableFilter;

// BF.INFO LAYOUT: the layout the filter asked for; under auto, followed by
// the layouts its sub-filters have, "auto (classic)", "auto (blocked)",
// "auto (blocked-1024, classic)" and so on: blocked ones by block size, then
// classic.
std::string layout_reply(const ScalableFilter& filter) {
    const bloom::Layout policy = filter.options().layout;
    std::string reply(bloom::layout_name(policy));
    if (!bloom::automatic_policy(policy)) return reply;
    const char* separator = " (";
    for (const bloom::Layout layout :
         {bloom::Layout::blocked, bloom::Layout::blocked_1024, bloom::Layout::blocked_2048,
          bloom::Layout::blocked_4096, bloom::Layout::classic}) {
        for (std::size_t i = 0; i < filter.num_layers(); ++i) {
            if (filter.layer(i).layout() != layout) continue;
            reply += separator;
            reply += bloom::layout_name(layout);
            separator = ", ";
            break;
        }
    }
    return reply + ")";
}

// What a field may need beside the filter: the server's limits.
struct InfoLimits {
    std::uint64_t max_filter_bytes = 0;
};

// One BF.INFO field: the word that asks for it, the name its value is shown
// under, and how the value is written.
struct InfoField {
    std::string_view word;
    std::string_view name;
    void (*write)(resp::Writer& out, const ScalableFilter& filter, const InfoLimits& limits);
};

// MAXSCALEDCAPACITY: the capacity of the filter's layers once grown as far
// as the bounds and --max-filter-bytes let it (its capacity if NONSCALING).
std::uint64_t max_scaled_capacity(const ScalableFilter& filter, const InfoLimits& limits) {
    std::vector<bloom::LayerGeometry> layers(filter.num_layers());
    for (std::size_t i = 0; i < layers.size(); ++i) layers[i] = filter.layer(i).geometry();
    return bloom::max_scaled_capacity(filter.options(), layers, limits.max_filter_bytes).capacity;
}

// RedisBloom's five fields first, in its order: BF.INFO key answers them.
constexpr std::size_t kRedisBloomInfoFields = 5;
constexpr InfoField kInfoFields[] = {
    {"CAPACITY", "Capacity",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits&) {
         out.integer(static_cast<std::int64_t>(filter.capacity()));
     }},
    {"SIZE", "Size",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits&) {
         out.integer(static_cast<std::int64_t>(filter.info_size()));
     }},
    {"FILTERS", "Number of filters",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits&) {
         out.integer(static_cast<std::int64_t>(filter.num_layers()));
     }},
    {"ITEMS", "Number of items inserted",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits&) {
         out.integer(static_cast<std::int64_t>(filter.items()));
     }},
    {"EXPANSION", "Expansion rate",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits&) {
         if (filter.options().nonscaling) {
             out.null();
         } else {
             out.integer(filter.options().expansion);
         }
     }},
    // bloomery's: the layout new layers use (a layer whose error rate is too
    // low to block stays classic; see bounds.hpp); for auto, also what its
    // layers are.
    {"LAYOUT", "Layout",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits&) {
         out.bulk(layout_reply(filter));
     }},
    // bloomery's: how items are hashed and placed (bounds.hpp: HashScheme),
    // "redisbloom" for filters migrated from it.
    {"SCHEME", "Scheme",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits&) {
         out.bulk(bloom::scheme_name(filter.scheme()));
     }},
    // bloomery's: bits of all layers per item of capacity.
    {"BITSPERITEM", "Bits per item",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits&) {
         out.real(static_cast<double>(filter.bits_size()) * 8.0 /
                  static_cast<double>(filter.capacity()));
     }},
    // valkey-bloom's: the error rate the filter was created for.
    {"ERROR", "Error rate",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits&) {
         out.real(filter.options().error_rate);
     }},
    // valkey-bloom's: the ratio between a layer's error rate and the one
    // before it (bounds.hpp: first_layer), 0.5 unless TIGHTENING chose another.
    {"TIGHTENING", "Tightening ratio",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits&) {
         out.real(filter.options().tightening);
     }},
    // valkey-bloom's (bounds.hpp: max_scaled_capacity).
    {"MAXSCALEDCAPACITY", "Max scaled capacity",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits& limits) {
         out.integer(static_cast<std::int64_t>(max_scaled_capacity(filter, limits)));
     }},
    // bloomery's: the false-positive rate estimated from the layers' fill
    // (ScalableFilter::estimated_false_positive_rate).
    {"FPR", "False positive rate",
     [](resp::Writer& out, const ScalableFilter& filter, const InfoLimits&) {
         out.real(filter.estimated_false_positive_rate());
     }},
};

// The field `word` asks for (any case); null if none.
const InfoField* find_info_field(std::string_view word) {
    for (const InfoField& field : kInfoFields) {
        if (core::iequals(word, field.word)) return &field;
    }
    return nullptr;
}

// BF.INFO key [field]: RedisBloom's fields, as a flat array under RESP2 and
// a map under RESP3 (RedisBloom 2.8: one field alone is a map of one, its
// name and value; under RESP2 an array of its value).
void cmd_info(Context& ctx, Args argv) {
    if (argv.size() > 3) {
        reply_wrong_arity(ctx, "bf.info");
        return;
    }
    const bool one_field = argv.size() == 3;
    const InfoField* field = one_field ? find_info_field(argv[2]) : nullptr;
    const InfoLimits limits{ctx.config.max_filter_bytes};
    bool age = false;             // the key holds an expiring filter
    bool age_field_found = true;  // ... which has the field asked for
    const bool found = ctx.keyspace.with_value(argv[1], [&](const store::ValueRef& value) {
        if (const bloom::AgeFilter* filter = value.age_or_null()) {
            age = true;
            age_field_found =
                reply_age_info(ctx.out, *filter, one_field ? std::optional(argv[2]) : std::nullopt);
            return;
        }
        const ScalableFilter& filter = value.filter();
        if (!one_field) {
            ctx.out.map(kRedisBloomInfoFields);
            for (std::size_t i = 0; i < kRedisBloomInfoFields; ++i) {
                ctx.out.simple(kInfoFields[i].name);
                kInfoFields[i].write(ctx.out, filter, limits);
            }
        } else if (field != nullptr) {
            if (ctx.out.protocol() >= 3) {
                ctx.out.map(1);
                ctx.out.simple(field->name);
            } else {
                ctx.out.array(1);
            }
            field->write(ctx.out, filter, limits);
        }
    });
    if (!found) {
        ctx.out.error(errors::kNotFound);
    } else if (age ? !age_field_found : one_field && field == nullptr) {
        ctx.out.error(errors::kInvalidInfoField);
    }
}

// BF.DEBUG key: RedisBloom's report, "size:<items>" and one line per layer.
// The numbers are this filter's own: its bit arrays' bytes and bits, its
// hash functions, 64-bit hashing (the two 64-bit halves of MurmurHash3 x64
// 128), each layer's capacity, items and error rate.
void cmd_debug(Context& ctx, Args argv) {
    const bool found = ctx.keyspace.with_filter(argv[1], [&](const ScalableFilter& filter) {
        const std::size_t layers = filter.num_layers();
        ctx.out.array(1 + layers);
        ctx.out.bulk("size:" + std::to_string(filter.items()));
        char text[256];
        for (std::size_t i = 0; i < layers; ++i) {
            const bloom::BloomLayer& layer = filter.layer(i);
            std::snprintf(text, sizeof text,
                          "bytes:%llu bits:%llu hashes:%u hashwidth:64 capacity:%llu size:%llu "
                          "ratio:%g",
                          static_cast<unsigned long long>(layer.byte_size()),
                          static_cast<unsigned long long>(layer.bits()), layer.hashes(),
                          static_cast<unsigned long long>(layer.capacity()),
                          static_cast<unsigned long long>(layer.items()), layer.error_rate());
            ctx.out.bulk(text);
        }
    });
    if (!found) ctx.out.error(errors::kNotFound);
}

}  // namespace

void register_bf_info_commands(Registry& registry) {
    registry.register_handler<cmd_info>("bf.info");
    registry.register_handler<cmd_debug>("bf.debug");
}

}  // namespace bloomery::command
