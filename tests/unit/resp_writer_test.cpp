// The reply writer, byte for byte on purpose: its bytes are the protocol
// (the other tests read replies as trees, resp_matchers.hpp).

#include "bloomery/resp/writer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace bloomery::resp {
namespace {

using namespace std::string_literals;

// The bytes one call produces under the given protocol version.
std::string written(int protocol, const std::function<void(Writer&)>& write) {
    std::string out;
    Writer writer(out);
    writer.set_protocol(protocol);
    write(writer);
    return out;
}

std::string resp2(const std::function<void(Writer&)>& write) {
    return written(2, write);
}
std::string resp3(const std::function<void(Writer&)>& write) {
    return written(3, write);
}

TEST(RespWriter, DefaultsToResp2AndSwitchesToResp3) {
    std::string out;
    Writer writer(out);
    EXPECT_EQ(writer.protocol(), 2);
    writer.null();
    writer.set_protocol(3);
    EXPECT_EQ(writer.protocol(), 3);
    writer.null();
    EXPECT_EQ(out, "$-1\r\n_\r\n");
}

TEST(RespWriter, AppendsToTheCallersBuffer) {
    std::string out = "existing";
    Writer writer(out);
    writer.ok();
    writer.integer(7);
    EXPECT_EQ(out, "existing+OK\r\n:7\r\n");
    EXPECT_EQ(&writer.buffer(), &out);
}

TEST(RespWriter, SimpleStringIsByteExact) {
    for (int protocol : {2, 3}) {
        EXPECT_EQ(written(protocol, [](Writer& w) { w.simple("PONG"); }), "+PONG\r\n");
        EXPECT_EQ(written(protocol, [](Writer& w) { w.simple(""); }), "+\r\n");
        EXPECT_EQ(written(protocol, [](Writer& w) { w.ok(); }), "+OK\r\n");
    }
}

TEST(RespWriter, SimpleStringReplacesCrAndLfWithSpaces) {
    EXPECT_EQ(resp2([](Writer& w) { w.simple("a\r\nb\rc\nd"); }), "+a  b c d\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.simple("\n"); }), "+ \r\n");
}

TEST(RespWriter, ErrorIsByteExactAndReplacesCrAndLf) {
    for (int protocol : {2, 3}) {
        EXPECT_EQ(written(protocol, [](Writer& w) { w.error("ERR unknown command"); }),
                  "-ERR unknown command\r\n");
        EXPECT_EQ(written(protocol, [](Writer& w) { w.error("ERR bad\r\nkey"); }),
                  "-ERR bad  key\r\n");
    }
}

TEST(RespWriter, IntegerCoversTheWholeRange) {
    for (int protocol : {2, 3}) {
        EXPECT_EQ(written(protocol, [](Writer& w) { w.integer(0); }), ":0\r\n");
        EXPECT_EQ(written(protocol, [](Writer& w) { w.integer(-42); }), ":-42\r\n");
        EXPECT_EQ(written(protocol,
                          [](Writer& w) { w.integer(std::numeric_limits<std::int64_t>::max()); }),
                  ":9223372036854775807\r\n");
        EXPECT_EQ(written(protocol,
                          [](Writer& w) { w.integer(std::numeric_limits<std::int64_t>::min()); }),
                  ":-9223372036854775808\r\n");
    }
}

TEST(RespWriter, BulkIsBinarySafe) {
    for (int protocol : {2, 3}) {
        EXPECT_EQ(written(protocol, [](Writer& w) { w.bulk("hello"); }), "$5\r\nhello\r\n");
        EXPECT_EQ(written(protocol, [](Writer& w) { w.bulk(""); }), "$0\r\n\r\n");
        EXPECT_EQ(written(protocol, [](Writer& w) { w.bulk("a\r\n\0b"s); }), "$5\r\na\r\n\0b\r\n"s);
    }
}

TEST(RespWriter, NullIsBulkNullInResp2AndUnderscoreInResp3) {
    EXPECT_EQ(resp2([](Writer& w) { w.null(); }), "$-1\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.null(); }), "_\r\n");
}

TEST(RespWriter, NullArrayIsStarMinusOneInResp2AndUnderscoreInResp3) {
    EXPECT_EQ(resp2([](Writer& w) { w.null_array(); }), "*-1\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.null_array(); }), "_\r\n");
}

TEST(RespWriter, ArrayHeaderIsTheSameInBothProtocols) {
    for (int protocol : {2, 3}) {
        EXPECT_EQ(written(protocol, [](Writer& w) { w.array(0); }), "*0\r\n");
        EXPECT_EQ(written(protocol,
                          [](Writer& w) {
                              w.array(2);
                              w.integer(1);
                              w.bulk("x");
                          }),
                  "*2\r\n:1\r\n$1\r\nx\r\n");
    }
}

TEST(RespWriter, MapIsPercentInResp3AndFlatArrayInResp2) {
    EXPECT_EQ(resp3([](Writer& w) { w.map(3); }), "%3\r\n");
    EXPECT_EQ(resp2([](Writer& w) { w.map(3); }), "*6\r\n");
    EXPECT_EQ(resp2([](Writer& w) { w.map(0); }), "*0\r\n");
}

TEST(RespWriter, SetIsTildeInResp3AndArrayInResp2) {
    EXPECT_EQ(resp3([](Writer& w) { w.set(4); }), "~4\r\n");
    EXPECT_EQ(resp2([](Writer& w) { w.set(4); }), "*4\r\n");
}

TEST(RespWriter, BooleanIsHashInResp3AndIntegerInResp2) {
    EXPECT_EQ(resp3([](Writer& w) { w.boolean(true); }), "#t\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.boolean(false); }), "#f\r\n");
    EXPECT_EQ(resp2([](Writer& w) { w.boolean(true); }), ":1\r\n");
    EXPECT_EQ(resp2([](Writer& w) { w.boolean(false); }), ":0\r\n");
}

TEST(RespWriter, BooleansAreBooleanRepliesOneAfterAnother) {
    const std::vector<std::uint8_t> flags{1, 0, 0, 7, 1};
    for (const bool three : {false, true}) {
        const auto each = [&](Writer& w) {
            for (const std::uint8_t f : flags) w.boolean(f != 0);
        };
        const auto all = [&](Writer& w) { w.booleans(flags); };
        EXPECT_EQ(three ? resp3(all) : resp2(all), three ? resp3(each) : resp2(each));
    }
    EXPECT_EQ(resp2([&](Writer& w) { w.booleans(flags); }), ":1\r\n:0\r\n:0\r\n:1\r\n:1\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.booleans({}); }), "");
}

TEST(RespWriter, RealUsesShortestRoundTripText) {
    EXPECT_EQ(resp3([](Writer& w) { w.real(1.5); }), ",1.5\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.real(0.1); }), ",0.1\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.real(3.0); }), ",3\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.real(-2.25); }), ",-2.25\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.real(1e300); }), ",1e+300\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.real(0.01); }), ",0.01\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.real(std::numeric_limits<double>::denorm_min()); }),
              ",5e-324\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.real(-std::numeric_limits<double>::max()); }),
              ",-1.7976931348623157e+308\r\n");
}

TEST(RespWriter, RealSpellsInfinityAndNan) {
    constexpr double kInfinity = std::numeric_limits<double>::infinity();
    EXPECT_EQ(resp3([](Writer& w) { w.real(kInfinity); }), ",inf\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.real(-kInfinity); }), ",-inf\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.real(std::numeric_limits<double>::quiet_NaN()); }),
              ",nan\r\n");
    EXPECT_EQ(resp2([](Writer& w) { w.real(kInfinity); }), "$3\r\ninf\r\n");
    EXPECT_EQ(resp2([](Writer& w) { w.real(-kInfinity); }), "$4\r\n-inf\r\n");
    EXPECT_EQ(resp2([](Writer& w) { w.real(std::numeric_limits<double>::quiet_NaN()); }),
              "$3\r\nnan\r\n");
}

TEST(RespWriter, RealIsABulkStringOfTheSameTextInResp2) {
    EXPECT_EQ(resp2([](Writer& w) { w.real(1.5); }), "$3\r\n1.5\r\n");
    EXPECT_EQ(resp2([](Writer& w) { w.real(0.1); }), "$3\r\n0.1\r\n");
    EXPECT_EQ(resp2([](Writer& w) { w.real(1e300); }), "$6\r\n1e+300\r\n");
}

TEST(RespWriter, VerbatimIsTxtPrefixedInResp3AndBulkInResp2) {
    EXPECT_EQ(resp3([](Writer& w) { w.verbatim("hello"); }), "=9\r\ntxt:hello\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.verbatim(""); }), "=4\r\ntxt:\r\n");
    EXPECT_EQ(resp3([](Writer& w) { w.verbatim("a\r\nb"); }), "=8\r\ntxt:a\r\nb\r\n");
    EXPECT_EQ(resp2([](Writer& w) { w.verbatim("hello"); }), "$5\r\nhello\r\n");
}

TEST(RespWriter, NestedReplyIsByteExact) {
    const auto write = [](Writer& w) {
        w.map(2);
        w.bulk("Capacity");
        w.integer(100);
        w.bulk("Ratio");
        w.real(0.01);
    };
    EXPECT_EQ(resp3(write), "%2\r\n$8\r\nCapacity\r\n:100\r\n$5\r\nRatio\r\n,0.01\r\n");
    EXPECT_EQ(resp2(write), "*4\r\n$8\r\nCapacity\r\n:100\r\n$5\r\nRatio\r\n$4\r\n0.01\r\n");
}

}  // namespace
}  // namespace bloomery::resp
