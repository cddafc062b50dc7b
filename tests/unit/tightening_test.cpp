// A filter's tightening ratio (bloom/bounds.hpp: FilterOptions::tightening):
// its bounds, the layers it gives, and that it travels with the filter
// through every format (dump header, DUMP payload, snapshot) while filters
// at the default ratio are written exactly as before.

#include <gtest/gtest.h>
#include <xxhash.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "bloom_test_support.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/persist/dump_payload.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/keyspace.hpp"
#include "temp_dir.hpp"

namespace bloomery::bloom {
namespace {

using testing::make_options;
using testing::present_item;

FilterOptions tightened(std::uint64_t capacity, double error_rate, double ratio,
                        std::uint32_t expansion = 2) {
    FilterOptions options = make_options(capacity, error_rate, expansion);
    options.tightening = ratio;
    return options;
}

FilterRef filled(const FilterOptions& options, std::uint64_t items) {
    FilterRef filter = ScalableFilter::create(options);
    for (std::uint64_t i = 0; i < items; ++i) testing::add(*filter, present_item(i));
    return filter;
}

std::uint32_t u32_at(const std::string& bytes, std::size_t at) {
    std::uint32_t v;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return v;
}

double f64_at(const std::string& bytes, std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return std::bit_cast<double>(v);
}

// A header with its checksum recomputed after a field was changed.
std::string resealed(std::string header) {
    const std::size_t body = header.size() - 8;
    const std::uint64_t sum = XXH64(header.data(), body, 0);
    std::memcpy(header.data() + body, &sum, sizeof sum);
    return header;
}

TEST(Tightening, RatioMustLieStrictlyBetweenZeroAndOne) {
    EXPECT_EQ(check_options(tightened(100, 0.01, 0.5)), BoundsError::none);
    EXPECT_EQ(check_options(tightened(100, 0.01, std::nextafter(0.0, 1.0))), BoundsError::none);
    EXPECT_EQ(check_options(tightened(100, 0.01, std::nextafter(1.0, 0.0))), BoundsError::none);
    for (double bad : {0.0, 1.0, -0.5, 2.0, std::numeric_limits<double>::quiet_NaN(),
                       std::numeric_limits<double>::infinity()}) {
        EXPECT_EQ(check_options(tightened(100, 0.01, bad)), BoundsError::tightening_range) << bad;
        EXPECT_EQ(check_stored_options(tightened(100, 0.01, bad)), BoundsError::tightening_range);
    }
    FilterOptions nonscaling = tightened(100, 0.01, 0.25);
    nonscaling.nonscaling = true;
    EXPECT_EQ(check_options(nonscaling), BoundsError::none);
}

TEST(Tightening, TheRedisBloomSchemeHasOnlyRedisBloomsRatio) {
    FilterOptions options = make_options(100, 0.01);
    options.layout = Layout::classic;
    options.scheme = HashScheme::redisbloom;
    options.redisbloom_options = kRedisBloomDefaultOptions;
    EXPECT_EQ(check_options(options), BoundsError::none);
    options.tightening = 0.25;
    EXPECT_EQ(check_options(options), BoundsError::scheme_invalid);
    EXPECT_EQ(check_stored_options(options), BoundsError::scheme_invalid);
}

TEST(Tightening, TheDefaultRatioGivesRedisBloomsLayersBitForBit) {
    for (double p : {0.01, 0.001, 0.3, 1e-15}) {
        const LayerGeometry first = first_layer(make_options(100, p));
        EXPECT_EQ(first.error_rate, p * 0.5) << p;
        const std::optional<LayerGeometry> next = next_layer(make_options(100, p), first);
        ASSERT_TRUE(next);
        EXPECT_EQ(next->error_rate, p * 0.5 * 0.5);
    }
}

TEST(Tightening, LayersErrorRatesSumBelowTheFilterRateForEveryRatio) {
    for (double r : {0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99}) {
        const FilterOptions options = tightened(1000, 0.01, r, 1);
        LayerGeometry layer = first_layer(options);
        EXPECT_EQ(layer.error_rate, 0.01 * (1 - r)) << r;
        double sum = layer.error_rate;
        for (std::size_t i = 1; i < kMaxLayers; ++i) {
            const std::optional<LayerGeometry> next = next_layer(options, layer);
            if (!next) break;
            EXPECT_EQ(next->error_rate, layer.error_rate * r);
            layer = *next;
            sum += layer.error_rate;
        }
        // Below p as real numbers; the doubles' rounding may add an ulp.
        EXPECT_LE(sum, 0.01 * (1 + 1e-12)) << r;
    }
    FilterOptions nonscaling = tightened(1000, 0.01, 0.25);
    nonscaling.nonscaling = true;
    EXPECT_EQ(first_layer(nonscaling).error_rate, 0.01);
}

TEST(Tightening, GrowthStopsWhereTheHashCountWouldPassTheBound) {
    // p = 1e-15 at r = 0.25: 51 hashes in the first layer (-log2 7.5e-16 =
    // 50.2), 2 more per layer, so the 40th would need 129.
    const FilterOptions steep = tightened(1, 1e-15, 0.25, 1);
    const LayerGeometry first = first_layer(steep);
    const ScaleReach reach = max_scaled_capacity(steep, std::span(&first, 1), 0);
    EXPECT_EQ(reach.stop, GrowthStop::bounds);
    EXPECT_EQ(reach.capacity, 39u);
    const FilterOptions halving = make_options(1, 1e-15, 1);
    const LayerGeometry halving_first = first_layer(halving);
    const ScaleReach at_default = max_scaled_capacity(halving, std::span(&halving_first, 1), 0);
    EXPECT_EQ(at_default.stop, GrowthStop::layers);
    EXPECT_EQ(at_default.capacity, kMaxLayers);
    // A ratio so small that the next rate underflows stops growth, it does
    // not size a layer for a rate of 0.
    const FilterOptions tiny = tightened(10, 0.01, 1e-300);
    EXPECT_FALSE(next_layer(tiny, first_layer(tiny)));
}

TEST(Tightening, AFilterKeepsItsRatioAndGrowsByIt) {
    const FilterRef filter = filled(tightened(50, 0.01, 0.25), 400);
    ASSERT_GE(filter->num_layers(), 3u);
    EXPECT_EQ(filter->options().tightening, 0.25);
    double expected = 0.01 * 0.75;
    for (std::size_t i = 0; i < filter->num_layers(); ++i) {
        EXPECT_EQ(filter->layer(i).error_rate(), expected) << i;
        expected *= 0.25;
    }
    for (std::uint64_t i = 0; i < 400; ++i) EXPECT_TRUE(filter->contains(present_item(i)));
    const FilterRef copy = ScalableFilter::copy_of(*filter, filter->num_layers(), 0);
    EXPECT_EQ(copy->options().tightening, 0.25);
}

TEST(Tightening, OnlyAFilterWithAnotherRatioTakesEightMoreBytes) {
    const FilterRef plain = ScalableFilter::create(make_options(100, 0.01));
    const FilterRef other = ScalableFilter::create(tightened(100, 0.01, 0.25));
    const FilterRef same_first = ScalableFilter::create(make_options(100, 0.01 * 0.75 / 0.5));
    EXPECT_EQ(plain->allocated_bytes(), 224u);
    EXPECT_EQ(plain->options().tightening, kDefaultTightening);
    EXPECT_EQ(other->layer(0).geometry().bits, same_first->layer(0).geometry().bits);
    EXPECT_EQ(other->allocated_bytes(), same_first->allocated_bytes() + 8);
}

TEST(Tightening, DumpHeaderOfADefaultFilterIsUnchanged) {
    const FilterRef filter = filled(make_options(100, 0.01), 300);
    const std::string header = encode_header(*filter);
    ASSERT_EQ(header.size(), 40 + 40 * filter->num_layers() + 8);
    EXPECT_EQ(u32_at(header, 32), 0u);  // no flag
    const core::Result<DumpHeader> parsed = parse_header(header);
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(parsed->options.tightening, kDefaultTightening);
}

// A header laid out field by field as versions before the ratio wrote it
// (proto/resp.md: 40 bytes, then 40 per layer, then the checksum).
std::string header_as_before(const ScalableFilter& filter) {
    std::string out = "BLMDUMP1";
    const auto put = [&out](auto value) {
        out.append(reinterpret_cast<const char*>(&value), sizeof value);
    };
    const FilterOptions options = filter.options();
    put(std::uint32_t{2});
    put(options.error_rate);
    put(options.capacity);
    put(options.expansion);
    put(std::uint32_t{(options.nonscaling ? 1u : 0u) |
                      (options.layout == Layout::blocked ? 2u : 0u) |
                      (options.layout == Layout::automatic ? 4u : 0u)});
    put(static_cast<std::uint32_t>(filter.num_layers()));
    for (std::size_t i = 0; i < filter.num_layers(); ++i) {
        const LayerGeometry g = filter.layer(i).geometry();
        put(g.capacity);
        put(g.error_rate);
        put(g.bits);
        put(g.hashes);
        put(static_cast<std::uint32_t>(g.layout));
        put(filter.layer(i).items());
    }
    put(static_cast<std::uint64_t>(XXH64(out.data(), out.size(), 0)));
    return out;
}

TEST(Tightening, DefaultFiltersDumpAsBeforeAndOldHeadersLoad) {
    FilterOptions blocked = make_options(1000, 0.001, 4);
    blocked.layout = Layout::blocked;
    FilterOptions nonscaling = make_options(50, 0.05, 2, true);
    for (const FilterOptions& options : {make_options(100, 0.01), blocked, nonscaling}) {
        const FilterRef filter = filled(options, 40);
        const std::string old = header_as_before(*filter);
        EXPECT_EQ(encode_header(*filter), old);
        const core::Result<FilterRef> decoded = decode_header(old, 0);
        ASSERT_TRUE(decoded) << decoded.error();
        EXPECT_EQ((*decoded)->options().tightening, kDefaultTightening);
        EXPECT_EQ(encode_header(**decoded), old);
    }
}

TEST(Tightening, DumpHeaderCarriesAnotherRatio) {
    const FilterRef filter = filled(tightened(100, 0.01, 0.25), 300);
    const std::string header = encode_header(*filter);
    ASSERT_EQ(header.size(), 40 + 8 + 40 * filter->num_layers() + 8);
    EXPECT_EQ(u32_at(header, 32), 8u);  // flag bit 3
    EXPECT_EQ(f64_at(header, 40), 0.25);
    const core::Result<FilterRef> decoded = decode_header(header, 0);
    ASSERT_TRUE(decoded) << decoded.error();
    const FilterRef& copy = *decoded;
    EXPECT_EQ(copy->options().tightening, 0.25);
    EXPECT_EQ(copy->num_layers(), filter->num_layers());
    EXPECT_EQ(encode_header(*copy), header);
    // A copy grows by its ratio, as the live filter did.
    const std::optional<LayerGeometry> next =
        next_layer(copy->options(), copy->layer(copy->num_layers() - 1).geometry());
    ASSERT_TRUE(next);
    EXPECT_EQ(next->error_rate, copy->layer(copy->num_layers() - 1).error_rate() * 0.25);
}

TEST(Tightening, DumpHeaderRefusesARatioItWouldNotWrite) {
    const std::string header = encode_header(*ScalableFilter::create(tightened(100, 0.01, 0.25)));
    for (double bad : {0.5, 0.0, 1.0, std::numeric_limits<double>::quiet_NaN()}) {
        std::string changed = header;
        const std::uint64_t bits = std::bit_cast<std::uint64_t>(bad);
        std::memcpy(changed.data() + 40, &bits, sizeof bits);
        const core::Result<DumpHeader> parsed = parse_header(resealed(changed));
        ASSERT_FALSE(parsed) << bad;
        EXPECT_EQ(parsed.error(), "invalid dump header");
    }
    // The flag without its field, and the field without its flag.
    std::string no_field = header.substr(0, 40) + header.substr(48);
    EXPECT_FALSE(parse_header(resealed(no_field)));
    std::string no_flag = header;
    const std::uint32_t zero = 0;
    std::memcpy(no_flag.data() + 32, &zero, sizeof zero);
    EXPECT_FALSE(parse_header(resealed(no_flag)));
}

TEST(Tightening, DumpPayloadRoundTripsTheRatioAndLeavesDefaultsAsBefore) {
    const FilterRef plain = filled(make_options(100, 0.01), 300);
    std::string plain_payload;
    persist::append_dump_payload(*plain, plain->num_layers(), plain_payload);
    EXPECT_EQ(static_cast<std::uint8_t>(plain_payload[1 + 8 + 8 + 4]), 0u);  // option bits

    const FilterRef source = filled(tightened(100, 0.01, 0.25), 300);
    std::string payload;
    persist::append_dump_payload(*source, source->num_layers(), payload);
    EXPECT_EQ(static_cast<std::uint8_t>(payload[1 + 8 + 8 + 4]), 2u);
    ASSERT_TRUE(persist::verify_dump_payload(payload));
    const core::Result<persist::DumpValue> value = persist::parse_dump_value(payload);
    ASSERT_TRUE(value) << value.error();
    EXPECT_EQ(value->options.tightening, 0.25);
    const FilterRef restored = persist::build_dump_filter(*value);
    ASSERT_TRUE(restored);
    EXPECT_EQ(restored->options().tightening, 0.25);
    std::string again;
    persist::append_dump_payload(*restored, restored->num_layers(), again);
    EXPECT_EQ(again, payload);
}

TEST(Tightening, SnapshotKeepsTheRatio) {
    bloomery::testing::ScratchDir dir("tightening_test");
    store::Keyspace keyspace(2);
    keyspace.put("plain", filled(make_options(100, 0.01), 300));
    keyspace.put("quarter", filled(tightened(100, 0.01, 0.25), 300));
    FilterOptions nonscaling = tightened(100, 0.01, 0.75);
    nonscaling.nonscaling = true;
    keyspace.put("nonscaling", filled(nonscaling, 50));
    const std::string path = dir.path().string() + "/dump.bloomery";
    const core::Result<persist::SaveStats> saved = persist::save_snapshot(keyspace, path);
    ASSERT_TRUE(saved) << saved.error();
    store::Keyspace loaded(2);
    const core::Result<persist::LoadStats> stats = persist::load_snapshot(path, loaded);
    ASSERT_TRUE(stats) << stats.error();
    for (const char* key : {"plain", "quarter", "nonscaling"}) {
        const FilterRef before = keyspace.get(key)->value.filter_ref();
        const FilterRef after = loaded.get(key)->value.filter_ref();
        EXPECT_EQ(after->options().tightening, before->options().tightening) << key;
        EXPECT_EQ(encode_header(*after), encode_header(*before)) << key;
    }
}

}  // namespace
}  // namespace bloomery::bloom
