#pragma once
// Reading the RedisBloom fixtures (tests/fixtures/redisbloom) the unit tests
// share: their paths, their bytes, and the base64 their chunks are kept in.

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace bloomery::fixtures {

inline std::string fixture_path(const std::string& name) {
    return std::string(BLOOMERY_FIXTURES_DIR) + "/redisbloom/" + name;
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << path;
    return std::string(std::istreambuf_iterator<char>(in), {});
}

inline std::string base64_decode(std::string_view text) {
    static const std::string kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::uint32_t acc = 0;
    int bits = 0;
    for (char c : text) {
        if (c == '=') break;
        const auto value = kAlphabet.find(c);
        if (value == std::string::npos) continue;
        acc = (acc << 6) | static_cast<std::uint32_t>(value);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((acc >> bits) & 0xff));
        }
    }
    return out;
}

}  // namespace bloomery::fixtures
