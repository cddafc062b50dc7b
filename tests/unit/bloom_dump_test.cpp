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
#include "bloomery/bloom/dump.hpp"

namespace bloomery::bloom {
namespace {

using testing::absent_item;
using testing::make_options;
using testing::present_item;

// A scaling filter with three layers (100 + 200 + some of 400 items).
FilterRef make_three_layer_filter() {
    FilterRef filter = ScalableFilter::create(make_options(100, 0.01, 2));
    for (std::uint64_t i = 0; filter->num_layers() < 3 || filter->items() < 350; ++i) {
        testing::add(*filter, present_item(i));
    }
    return filter;
}

std::vector<std::uint64_t> all_words(const ScalableFilter& filter) {
    std::vector<std::uint64_t> words;
    for (std::size_t l = 0; l < filter.num_layers(); ++l) {
        const BloomLayer& layer = filter.layer(l);
        const std::size_t start = words.size();
        words.resize(start + layer.num_words());
        layer.copy_words(0, layer.num_words(), words.data() + start);
    }
    return words;
}

struct Chunk {
    std::int64_t iter;  // as returned with the chunk, i.e. what LOADCHUNK gets
    std::string data;
};

std::vector<Chunk> dump_all(const ScalableFilter& filter, std::size_t max_chunk_bytes) {
    std::vector<Chunk> chunks;
    std::int64_t iter = 1;
    for (;;) {
        DumpChunk c = dump_chunk(filter, iter, max_chunk_bytes);
        if (c.next_iter == 0) {
            EXPECT_TRUE(c.data.empty());
            break;
        }
        chunks.push_back(Chunk{c.next_iter, std::move(c.data)});
        iter = c.next_iter;
    }
    return chunks;
}

void put_u32_at(std::string& s, std::size_t pos, std::uint32_t v) {
    std::memcpy(&s[pos], &v, 4);
}
void put_u64_at(std::string& s, std::size_t pos, std::uint64_t v) {
    std::memcpy(&s[pos], &v, 8);
}

// Recomputes the trailing checksum so that field checks, not the checksum,
// are what reject a tampered header. (Tests run on little-endian hosts.)
std::string reseal(std::string header) {
    const std::size_t body = header.size() - 8;
    put_u64_at(header, body, XXH64(header.data(), body, 0));
    return header;
}

std::string seal_chunk(std::uint64_t offset, const std::string& payload) {
    std::string buf(8, '\0');
    put_u64_at(buf, 0, offset);
    buf += payload;
    std::string out = payload;
    out.resize(payload.size() + 8);
    put_u64_at(out, payload.size(), XXH64(buf.data(), buf.size(), 0));
    return out;
}

TEST(BloomDump, HeaderIsTheFirstReplyAndIterStartsAtOne) {
    const FilterRef filter_ref = ScalableFilter::create(make_options(100, 0.01));
    const ScalableFilter& filter = *filter_ref;
    const DumpChunk first = dump_chunk(filter, 0);
    EXPECT_EQ(first.next_iter, 1);
    EXPECT_EQ(first.data, encode_header(filter));
    EXPECT_EQ(first.data.substr(0, 8), "BLMDUMP1");
    EXPECT_EQ(first.data.size(), 48u + 40u);
}

TEST(BloomDump, RoundTripThroughManySmallChunksIsIdentical) {
    const auto source = make_three_layer_filter();
    ASSERT_EQ(source->num_layers(), 3u);
    const std::string header = dump_chunk(*source, 0).data;
    const std::vector<Chunk> chunks = dump_all(*source, 64);

    std::uint64_t total_bytes = 0;
    for (std::size_t l = 0; l < source->num_layers(); ++l) {
        total_bytes += source->layer(l).byte_size();
    }
    EXPECT_GT(chunks.size(), total_bytes / 64);  // layers are not multiples of 64 bytes
    std::int64_t previous = 1;
    for (const Chunk& c : chunks) {
        ASSERT_LE(c.data.size(), 64u + 8);
        ASSERT_EQ(c.iter - previous, static_cast<std::int64_t>(c.data.size() - 8));
        previous = c.iter;
    }
    EXPECT_EQ(static_cast<std::uint64_t>(previous - 1), total_bytes);

    auto decoded = decode_header(header, 0);
    ASSERT_TRUE(decoded) << decoded.error();
    const FilterRef& copy = *decoded;
    ASSERT_EQ(copy->num_layers(), 3u);
    for (std::size_t l = 0; l < 3; ++l) {
        EXPECT_EQ(copy->layer(l).bits(), source->layer(l).bits());
        EXPECT_EQ(copy->layer(l).hashes(), source->layer(l).hashes());
        EXPECT_EQ(copy->layer(l).capacity(), source->layer(l).capacity());
        EXPECT_EQ(copy->layer(l).error_rate(), source->layer(l).error_rate());
        EXPECT_EQ(copy->layer(l).items(), source->layer(l).items());
        EXPECT_EQ(copy->layer(l).set_bits(), 0u);
    }
    EXPECT_EQ(copy->options().capacity, 100u);
    EXPECT_EQ(copy->options().error_rate, 0.01);
    EXPECT_EQ(copy->options().expansion, 2u);
    EXPECT_FALSE(copy->options().nonscaling);

    for (const Chunk& c : chunks) {
        const core::Status loaded = load_chunk(*copy, c.iter, c.data);
        ASSERT_TRUE(loaded) << loaded.error();
    }
    EXPECT_EQ(all_words(*copy), all_words(*source));
    EXPECT_EQ(copy->items(), source->items());
    EXPECT_EQ(copy->capacity(), source->capacity());
    EXPECT_EQ(copy->estimate_cardinality(), source->estimate_cardinality());
    for (std::size_t l = 0; l < 3; ++l) {
        EXPECT_EQ(copy->layer(l).set_bits(), source->layer(l).set_bits());
    }
    for (std::uint64_t i = 0; i < 2000; ++i) {
        EXPECT_EQ(copy->contains(present_item(i)), source->contains(present_item(i)));
        EXPECT_EQ(copy->contains(absent_item(i)), source->contains(absent_item(i)));
    }
    // The copy keeps growing like the original would.
    EXPECT_EQ(testing::add(*copy, "new item"), testing::add(*source, "new item"));
}

TEST(BloomDump, ALoadedChunkSetsItsBitsAndNeverClearsOne) {
    // Loading a chunk into a filter that already holds items keeps them
    // (bits only go 0 -> 1), so chunks and adds give the same bits in any
    // order and loading never makes an added item answer 0.
    const auto source = make_three_layer_filter();
    const std::string header = dump_chunk(*source, 0).data;
    auto decoded = decode_header(header, 0);
    ASSERT_TRUE(decoded) << decoded.error();
    const FilterRef& target = *decoded;
    for (std::uint64_t i = 0; i < 300; ++i) testing::add(*target, absent_item(i));
    const std::vector<std::uint64_t> before = all_words(*target);
    for (const Chunk& c : dump_all(*source, 64)) {
        const core::Status loaded = load_chunk(*target, c.iter, c.data);
        ASSERT_TRUE(loaded) << loaded.error();
    }
    const std::vector<std::uint64_t> after = all_words(*target);
    const std::vector<std::uint64_t> theirs = all_words(*source);
    ASSERT_EQ(after.size(), before.size());
    std::uint64_t set = 0;
    for (std::size_t i = 0; i < after.size(); ++i) {
        EXPECT_EQ(after[i], before[i] | theirs[i]) << "word " << i;
        set += static_cast<std::uint64_t>(std::popcount(after[i]));
    }
    std::uint64_t counted = 0;
    for (std::size_t l = 0; l < target->num_layers(); ++l) counted += target->layer(l).set_bits();
    EXPECT_EQ(counted, set);
    for (std::uint64_t i = 0; i < 300; ++i) EXPECT_TRUE(target->contains(absent_item(i)));
    for (std::uint64_t i = 0; i < 2000; ++i) {
        if (source->contains(present_item(i))) {
            EXPECT_TRUE(target->contains(present_item(i)));
        }
    }

    // A layer with per-thread bit counters (mapped, >= 32 KiB) keeps them
    // exact through the OR.
    const auto big = ScalableFilter::create(make_options(50000, 0.01));
    ASSERT_TRUE(big->layer(0).mapped());
    for (std::uint64_t i = 0; i < 5000; ++i) testing::add(*big, present_item(i));
    auto big_decoded = decode_header(dump_chunk(*big, 0).data, 0);
    ASSERT_TRUE(big_decoded) << big_decoded.error();
    const FilterRef& big_target = *big_decoded;
    for (std::uint64_t i = 0; i < 5000; ++i) testing::add(*big_target, absent_item(i));
    for (const Chunk& c : dump_all(*big, 4096)) {
        const core::Status loaded = load_chunk(*big_target, c.iter, c.data);
        ASSERT_TRUE(loaded) << loaded.error();
    }
    std::uint64_t big_set = 0;
    for (std::uint64_t word : all_words(*big_target)) {
        big_set += static_cast<std::uint64_t>(std::popcount(word));
    }
    EXPECT_EQ(big_target->layer(0).set_bits(), big_set);
    for (std::uint64_t i = 0; i < 5000; ++i) {
        EXPECT_TRUE(big_target->contains(present_item(i)));
        EXPECT_TRUE(big_target->contains(absent_item(i)));
    }
}

TEST(BloomDump, DefaultChunkSizeDumpsOneChunkPerSmallLayer) {
    const auto source = make_three_layer_filter();
    const std::vector<Chunk> chunks = dump_all(*source, kMaxDumpChunkBytes);
    ASSERT_EQ(chunks.size(), 3u);
    for (std::size_t l = 0; l < 3; ++l) {
        EXPECT_EQ(chunks[l].data.size(), source->layer(l).byte_size() + 8);
    }
}

TEST(BloomDump, NonscalingFlagRoundTrips) {
    const FilterRef source_ref = ScalableFilter::create(make_options(500, 0.001, 4, true));
    const ScalableFilter& source = *source_ref;
    auto decoded = decode_header(encode_header(source), 0);
    ASSERT_TRUE(decoded) << decoded.error();
    const FilterRef& copy = *decoded;
    EXPECT_TRUE(copy->options().nonscaling);
    EXPECT_EQ(copy->options().expansion, 4u);
    EXPECT_EQ(copy->layer(0).error_rate(), 0.001);
}

TEST(BloomDump, IteratorsPastTheEndOrMisalignedFinishTheDump) {
    const FilterRef filter_ref = ScalableFilter::create(make_options(100, 0.01));
    const ScalableFilter& filter = *filter_ref;
    const std::int64_t end = static_cast<std::int64_t>(filter.layer(0).byte_size()) + 1;
    EXPECT_EQ(dump_chunk(filter, end).next_iter, 0);
    EXPECT_EQ(dump_chunk(filter, end + 8).next_iter, 0);
    EXPECT_EQ(dump_chunk(filter, 2).next_iter, 0);
    EXPECT_EQ(dump_chunk(filter, -1).next_iter, 0);
    EXPECT_TRUE(dump_chunk(filter, 2).data.empty());
    EXPECT_EQ(dump_chunk(filter, 9, 1).next_iter, 17);  // chunk size rounds up to one word
}

TEST(BloomDump, HeaderRejectsEveryTruncation) {
    const auto source = make_three_layer_filter();
    const std::string header = encode_header(*source);
    for (std::size_t len = 0; len < header.size(); ++len) {
        const auto decoded = decode_header(header.substr(0, len), 0);
        ASSERT_FALSE(decoded) << len;
        EXPECT_FALSE(decoded.error().empty());
    }
    EXPECT_FALSE(decode_header(header + "x", 0));
}

TEST(BloomDump, HeaderRejectsEveryFlippedBit) {
    const auto source = make_three_layer_filter();
    const std::string header = encode_header(*source);
    for (std::size_t bit = 0; bit < header.size() * 8; ++bit) {
        std::string bad = header;
        bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
        const auto decoded = decode_header(bad, 0);
        ASSERT_FALSE(decoded) << bit;
        EXPECT_EQ(decoded.error(), "dump header checksum mismatch") << bit;
    }
}

TEST(BloomDump, HeaderRejectsWrongMagicAndVersion) {
    const FilterRef source_ref = ScalableFilter::create(make_options(100, 0.01));
    const ScalableFilter& source = *source_ref;
    const std::string header = encode_header(source);

    std::string bad = header;
    bad[0] = 'X';
    auto decoded = decode_header(reseal(bad), 0);
    ASSERT_FALSE(decoded);
    EXPECT_EQ(decoded.error(), "invalid dump header");

    bad = header;
    put_u32_at(bad, 8, 3);
    decoded = decode_header(reseal(bad), 0);
    ASSERT_FALSE(decoded);
    EXPECT_EQ(decoded.error(), "unsupported dump version");

    EXPECT_TRUE(decode_header(reseal(header), 0));  // reseal itself is neutral
}

TEST(BloomDump, HeaderRejectsOutOfRangeFields) {
    const FilterRef source_ref = ScalableFilter::create(make_options(100, 0.01));
    const ScalableFilter& source = *source_ref;
    const std::string header = encode_header(source);
    ASSERT_EQ(header.size(), 88u);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    struct Case {
        const char* name;
        std::size_t pos;
        int width;  // 4 or 8
        std::uint64_t value;
    };
    const std::vector<Case> cases = {
        {"options error 0", 12, 8, std::bit_cast<std::uint64_t>(0.0)},
        {"options error 1", 12, 8, std::bit_cast<std::uint64_t>(1.0)},
        {"options error nan", 12, 8, std::bit_cast<std::uint64_t>(nan)},
        {"options capacity 0", 20, 8, 0},
        {"expansion 0", 28, 4, 0},
        {"unknown flag", 32, 4, 8},
        // Blocked and auto together (6) are auto with multi-line blocks.
        {"blocked and counting", 32, 4, 18},
        {"blocked, auto and counting", 32, 4, 22},
        {"unknown layout", 68, 4, 2},  // auto is a filter's, not a layer's
        {"auto with multi-line blocks as a layer's layout", 68, 4, 7},
        {"layer count larger than the layers present", 36, 4, 2},
        {"zero layers", 36, 4, 0},
        {"65 layers", 36, 4, 65},
        {"layer capacity 0", 40, 8, 0},
        {"layer error negative", 48, 8, std::bit_cast<std::uint64_t>(-0.5)},
        {"layer error inf", 48, 8,
         std::bit_cast<std::uint64_t>(std::numeric_limits<double>::infinity())},
        {"bits 0", 56, 8, 0},
        {"bits not a multiple of 64", 56, 8, 1000},
        {"hashes 0", 64, 4, 0},
        {"hashes 129", 64, 4, 129},
        {"expansion 32769", 28, 4, 32769},
        {"options capacity 2^48 + 1", 20, 8, (std::uint64_t{1} << 48) + 1},
        {"layer capacity 2^48 + 1", 40, 8, (std::uint64_t{1} << 48) + 1},
        {"bits 2^49 + 64", 56, 8, (std::uint64_t{1} << 49) + 64},
        {"items 2^56 + 1", 72, 8, (std::uint64_t{1} << 56) + 1},
    };
    for (const Case& c : cases) {
        std::string bad = header;
        if (c.width == 4) {
            put_u32_at(bad, c.pos, static_cast<std::uint32_t>(c.value));
        } else {
            put_u64_at(bad, c.pos, c.value);
        }
        const auto decoded = decode_header(reseal(bad), 0);
        ASSERT_FALSE(decoded) << c.name;
        EXPECT_EQ(decoded.error(), "invalid dump header") << c.name;
    }
    // A nonscaling filter claiming two layers (with the right length).
    const auto scaled = make_three_layer_filter();
    std::string two = encode_header(*scaled);
    put_u32_at(two, 32, 1);  // set nonscaling
    EXPECT_FALSE(decode_header(reseal(two), 0));
}

TEST(BloomDump, HeaderRejectsFiltersOverTheWholeFilterLimit) {
    // The limit bounds every layer together: a header of many layers, each
    // under the limit, is still refused (before anything is allocated).
    const auto source = make_three_layer_filter();
    const std::string header = encode_header(*source);
    const std::uint64_t all = source->bits_size();
    EXPECT_TRUE(decode_header(header, all));
    const auto decoded = decode_header(header, all - 1);
    ASSERT_FALSE(decoded);
    EXPECT_EQ(decoded.error(), "dump exceeds max filter size");
    EXPECT_GT(all - 1, source->layer(2).byte_size());  // each layer alone would fit
}

TEST(BloomDump, HeaderWithTheSmallestErrorRateAndAllLayersRoundTrips) {
    // The extreme filter the server can create (bounds.hpp) dumps and loads.
    const FilterRef source = ScalableFilter::create(make_options(1, kMinErrorRate, 1));
    for (std::uint64_t i = 0; source->num_layers() < kMaxLayers; ++i) {
        testing::add(*source, present_item(i));
    }
    const auto decoded = decode_header(encode_header(*source), 0);
    ASSERT_TRUE(decoded) << decoded.error();
    const FilterRef& copy = *decoded;
    EXPECT_EQ(copy->num_layers(), kMaxLayers);
    EXPECT_EQ(copy->layer(kMaxLayers - 1).hashes(), source->layer(kMaxLayers - 1).hashes());
}

class BloomDumpChunks : public ::testing::Test {
protected:
    void SetUp() override {
        source_ = make_three_layer_filter();
        chunks_ = dump_all(*source_, 64);
        auto decoded = decode_header(encode_header(*source_), 0);
        ASSERT_TRUE(decoded) << decoded.error();
        target_ = std::move(decoded).value();
        // Load every other chunk so the target has some bits to protect.
        for (std::size_t i = 0; i < chunks_.size(); i += 2) {
            const core::Status loaded = load_chunk(*target_, chunks_[i].iter, chunks_[i].data);
            ASSERT_TRUE(loaded) << loaded.error();
        }
        before_ = all_words(*target_);
        before_set_bits_ = set_bits(*target_);
    }

    static std::uint64_t set_bits(const ScalableFilter& f) {
        std::uint64_t total = 0;
        for (std::size_t l = 0; l < f.num_layers(); ++l) total += f.layer(l).set_bits();
        return total;
    }

    void expect_rejected(std::int64_t iter, const std::string& data, const char* what) {
        const core::Status loaded = load_chunk(*target_, iter, data);
        EXPECT_FALSE(loaded) << what;
        EXPECT_FALSE(loaded.error().empty()) << what;
        EXPECT_EQ(all_words(*target_), before_) << what;
        EXPECT_EQ(set_bits(*target_), before_set_bits_) << what;
    }

    FilterRef source_;
    FilterRef target_;
    std::vector<Chunk> chunks_;
    std::vector<std::uint64_t> before_;
    std::uint64_t before_set_bits_ = 0;
};

TEST_F(BloomDumpChunks, RejectBadChecksum) {
    const Chunk& c = chunks_[1];
    std::string bad = c.data;
    bad[3] ^= 0x10;
    expect_rejected(c.iter, bad, "payload bit flip");
    bad = c.data;
    bad.back() ^= 0x01;
    expect_rejected(c.iter, bad, "checksum bit flip");
    EXPECT_EQ(load_chunk(*target_, c.iter, bad).error(), "chunk checksum mismatch");
}

TEST_F(BloomDumpChunks, RejectWrongLength) {
    const Chunk& c = chunks_[1];
    expect_rejected(c.iter, c.data.substr(0, c.data.size() - 1), "one byte short");
    expect_rejected(c.iter, c.data + "x", "one byte long");
    expect_rejected(c.iter, c.data + std::string(8, '\0'), "one word long");
    expect_rejected(c.iter, "", "empty");
    expect_rejected(c.iter, c.data.substr(c.data.size() - 8), "checksum only");
}

TEST_F(BloomDumpChunks, RejectMisalignedOrInvalidIterator) {
    const Chunk& c = chunks_[1];
    expect_rejected(c.iter + 1, c.data, "misaligned");
    expect_rejected(c.iter - 4, c.data, "misaligned backwards");
    expect_rejected(0, c.data, "iter 0");
    expect_rejected(-5, c.data, "negative");
    expect_rejected(static_cast<std::int64_t>(c.data.size()) - 8, c.data, "starts before 0");
    // A valid chunk replayed at another (aligned) offset: the checksum binds it.
    expect_rejected(chunks_[3].iter, c.data, "replayed at another offset");
}

TEST_F(BloomDumpChunks, RejectOutOfBoundsIterator) {
    std::uint64_t total = 0;
    for (std::size_t l = 0; l < source_->num_layers(); ++l) total += source_->layer(l).byte_size();
    const std::string payload(16, '\xff');
    expect_rejected(static_cast<std::int64_t>(total + 16 + 1), seal_chunk(total, payload),
                    "past the end");
    expect_rejected(static_cast<std::int64_t>(total + 8 + 1), seal_chunk(total - 8, payload),
                    "overhanging the end");
    expect_rejected(std::numeric_limits<std::int64_t>::max() - 7,
                    seal_chunk(std::numeric_limits<std::int64_t>::max() - 8 - 16, payload), "huge");
}

TEST_F(BloomDumpChunks, RejectChunkCrossingALayerBoundary) {
    const std::uint64_t boundary = source_->layer(0).byte_size();
    const std::string payload(16, '\xff');
    const std::string sealed = seal_chunk(boundary - 8, payload);
    expect_rejected(static_cast<std::int64_t>(boundary + 8 + 1), sealed, "crossing layers");
    EXPECT_EQ(load_chunk(*target_, static_cast<std::int64_t>(boundary + 8 + 1), sealed).error(),
              "chunk out of range");
    // The same bytes inside one layer are accepted: the rejection was the boundary.
    const core::Status inside = load_chunk(*target_, 16 + 1, seal_chunk(0, payload));
    EXPECT_TRUE(inside) << inside.error();
    EXPECT_EQ(target_->layer(0).load_word(0), ~std::uint64_t{0});
}

}  // namespace
}  // namespace bloomery::bloom
