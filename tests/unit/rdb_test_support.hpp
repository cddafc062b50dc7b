#pragma once
// What the `--import-rdb` reader's tests share (rdb_import_test.cpp,
// rdb_cuckoo_test.cpp): the fixtures of tests/fixtures/redisbloom, a reader
// that collects what read_rdb hands over, and a builder of RDB bytes as
// Redis's rdb.c and RedisBloom's module values write them.

#include <nlohmann/json.hpp>

#include <bit>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "bloomery/bloom/dump.hpp"
#include "bloomery/bloom/redisbloom.hpp"
#include "bloomery/persist/rdb_import.hpp"
#include "bloomery/store/keyspace.hpp"
#include "redisbloom_fixtures.hpp"

namespace bloomery::persist::rdb_testing {

using json = nlohmann::json;
using Chunks = std::vector<std::pair<std::int64_t, std::string>>;

using fixtures::base64_decode;
using fixtures::fixture_path;
using fixtures::read_file;

inline Chunks chunks_of(const json& list) {
    Chunks out;
    for (const auto& entry : list) {
        out.emplace_back(entry[0].get<std::int64_t>(), base64_decode(entry[1].get<std::string>()));
    }
    return out;
}

inline Chunks dump_all(const bloom::ScalableFilter& filter) {
    Chunks out;
    for (std::int64_t iter = 0;;) {
        bloom::DumpChunk chunk = bloom::dump_chunk(filter, iter);
        if (chunk.next_iter == 0) return out;
        out.emplace_back(chunk.next_iter, std::move(chunk.data));
        iter = chunk.next_iter;
    }
}

struct Imported {
    bloom::FilterRef filter;
    std::int64_t deadline;
};

struct ImportedCuckoo {
    cuckoo::CuckooRef filter;
    std::int64_t deadline;
};

struct ReadResult {
    bool ok = false;
    std::string error;
    RdbImportStats stats;
    std::map<std::string, Imported> filters;
    std::map<std::string, ImportedCuckoo> cuckoo;
    std::vector<std::string> warnings;
};

inline ReadResult read(std::string_view bytes, std::int64_t now = store::now_ms()) {
    ReadResult result;
    const RdbFilterSink sink = [&](std::string key, bloom::FilterRef filter,
                                   std::int64_t deadline) {
        result.filters[key] = Imported{std::move(filter), deadline};
    };
    const RdbCuckooSink cuckoo_sink = [&](std::string key, cuckoo::CuckooRef filter,
                                          std::int64_t deadline) {
        result.cuckoo[key] = ImportedCuckoo{std::move(filter), deadline};
    };
    const RdbWarningSink warn = [&](const std::string& w) { result.warnings.push_back(w); };
    core::Result<RdbImportStats> stats =
        read_rdb({reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()}, now, sink,
                 warn, cuckoo_sink);
    result.ok = stats.ok();
    if (stats) {
        result.stats = std::move(*stats);
    } else {
        result.error = stats.error();
    }
    return result;
}

// Each refusal names the offset and the reason.
inline void expect_refused(std::string_view bytes, const std::string& reason) {
    SCOPED_TRACE("expected: " + reason);
    const ReadResult r = read(bytes);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error.rfind("offset ", 0), 0u) << r.error;
    EXPECT_NE(r.error.find(reason), std::string::npos) << r.error;
}

// Redis's CRC-64 (Jones, reflected), to seal hand-built files.
inline std::uint64_t crc64(std::string_view data) {
    std::uint64_t crc = 0;
    for (unsigned char byte : data) {
        crc ^= byte;
        for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ ((crc & 1) != 0 ? 0x95ac9329ac4bc9b5ull : 0);
    }
    return crc;
}

inline std::string seal(std::string body) {
    std::uint64_t crc = crc64(body);
    for (int i = 0; i < 8; ++i) body.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
    return body;
}

// Writes what rdb.c's rdbSaveLen, rdbSaveRawString and module values write.
struct Builder {
    std::string out;
    Builder& byte(unsigned v) {
        out.push_back(static_cast<char>(v));
        return *this;
    }
    Builder& len(std::uint64_t n) {
        if (n < 64) return byte(static_cast<unsigned>(n));
        if (n < 16384) return byte(0x40 | static_cast<unsigned>(n >> 8)).byte(n & 0xff);
        if (n <= 0xffffffffull) {
            byte(0x80);
            for (int i = 3; i >= 0; --i) byte((n >> (8 * i)) & 0xff);
            return *this;
        }
        byte(0x81);
        for (int i = 7; i >= 0; --i) byte((n >> (8 * i)) & 0xff);
        return *this;
    }
    Builder& le(std::uint64_t v, int bytes) {
        for (int i = 0; i < bytes; ++i) byte((v >> (8 * i)) & 0xff);
        return *this;
    }
    Builder& str(std::string_view s) {
        len(s.size());
        out.append(s);
        return *this;
    }
    // LZF with a literal run, then a back reference copying `repeat` bytes.
    Builder& lzf_str(std::string_view literal, std::size_t repeat) {
        std::string compressed;
        compressed.push_back(static_cast<char>(literal.size() - 1));
        compressed.append(literal);
        std::size_t left = repeat;
        while (left > 0) {
            const std::size_t take = std::min<std::size_t>(left, 264);
            const std::size_t code = take - 2;  // 0..262
            const std::size_t back = literal.size() - 1;
            if (code < 7) {
                compressed.push_back(static_cast<char>((code << 5) | (back >> 8)));
            } else {
                compressed.push_back(static_cast<char>((7 << 5) | (back >> 8)));
                compressed.push_back(static_cast<char>(code - 7));
            }
            compressed.push_back(static_cast<char>(back & 0xff));
            left -= take;
        }
        byte(0xc3).len(compressed.size()).len(literal.size() + repeat);
        out += compressed;
        return *this;
    }
    Builder& module_id(std::string_view name, unsigned encoding) {
        static const std::string kCharset =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        std::uint64_t id = 0;
        for (char c : name) id = (id << 6) | kCharset.find(c);
        return len((id << 10) | encoding);
    }
    Builder& uint_field(std::uint64_t v) { return len(2).len(v); }
    Builder& double_field(double v) { return len(4).le(std::bit_cast<std::uint64_t>(v), 8); }
    Builder& string_field(std::string_view s) { return len(5).str(s); }
    // RedisBloom's BFRdbSave of `filter`, as a MODULE_2 value.
    Builder& bloom(const bloom::ScalableFilter& filter) {
        module_id("MBbloom--", 4);
        const bloom::FilterOptions options = filter.options();
        uint_field(filter.items()).uint_field(filter.num_layers());
        uint_field(options.redisbloom_options).uint_field(options.expansion);
        for (std::size_t i = 0; i < filter.num_layers(); ++i) {
            const bloom::LayerGeometry g = filter.layer(i).geometry();
            uint_field(g.capacity).double_field(g.error_rate).uint_field(g.hashes);
            double_field(g.redisbloom_bpe).uint_field(g.bits).uint_field(g.redisbloom_n2);
            std::string words;
            for (std::uint64_t w = 0; w < filter.layer(i).num_words(); ++w) {
                const std::uint64_t word = filter.layer(i).load_word(w);
                for (int b = 0; b < 8; ++b) words.push_back(static_cast<char>(word >> (8 * b)));
            }
            string_field(words).uint_field(filter.layer(i).items());
        }
        return len(0);
    }
};

}  // namespace bloomery::persist::rdb_testing
