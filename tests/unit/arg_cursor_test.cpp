// command::ArgCursor: the one reader of command arguments.

#include "bloomery/command/arg_cursor.hpp"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace {

using bloomery::command::ArgCursor;
using bloomery::command::parse_double;

TEST(ArgCursor, ReadsWordsAndNumbersLeftToRight) {
    const std::vector<std::string_view> argv = {"BF.RESERVE", "k", "0.01", "100", "nonscaling"};
    ArgCursor args(argv, 2);
    EXPECT_EQ(args.position(), 2u);
    EXPECT_EQ(args.remaining(), 3u);
    EXPECT_EQ(args.next_double(), 0.01);
    EXPECT_EQ(args.next_int(), 100);
    EXPECT_FALSE(args.eat("EXPANSION"));
    EXPECT_TRUE(args.eat("NONSCALING"));  // case ignored
    EXPECT_FALSE(args.has_next());
    EXPECT_EQ(args.peek(), "");
    EXPECT_EQ(args.next(), "");
}

TEST(ArgCursor, TakesNothingWhenTheArgumentIsNotWhatWasAsked) {
    const std::vector<std::string_view> argv = {"X", " 1", "1e3", "+1", "007"};
    ArgCursor args(argv);
    EXPECT_EQ(args.next_int(), std::nullopt);  // Redis refuses a leading space
    EXPECT_EQ(args.position(), 1u);
    EXPECT_EQ(args.next_double(), std::nullopt);
    EXPECT_EQ(args.next(), " 1");
    EXPECT_EQ(args.next_int(), std::nullopt);  // not an integer...
    EXPECT_EQ(args.next_double(), 1000.0);     // ...but a double
    EXPECT_EQ(args.next_int(), std::nullopt);  // string2ll refuses '+'
    args.next();
    EXPECT_EQ(args.next_int(), std::nullopt);  // and leading zeros
    EXPECT_EQ(args.next(), "007");
}

TEST(ArgCursor, TakeFailsWithTheCallersText) {
    const std::vector<std::string_view> argv = {"X", "ten"};
    ArgCursor args(argv);
    const auto bad = args.take_int("ERR bad capacity");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error(), "ERR bad capacity");
    EXPECT_EQ(args.next(), "ten");
    const auto missing = args.take_double("ERR bad error rate");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error(), "ERR bad error rate");
}

TEST(ArgCursor, EatOneOfRestAndUnread) {
    const std::vector<std::string_view> argv = {"X", "gt", "ITEMS", "a", "b"};
    ArgCursor args(argv);
    EXPECT_EQ(args.eat_one_of({"NX", "XX", "GT", "LT"}), 2u);
    EXPECT_EQ(args.eat_one_of({"NX"}), std::nullopt);
    EXPECT_EQ(args.next(), "ITEMS");
    args.unread();
    EXPECT_TRUE(args.eat("items"));
    const auto items = args.rest();
    ASSERT_EQ(items.size(), 2u);
    EXPECT_EQ(items[0], "a");
    EXPECT_FALSE(args.has_next());
    EXPECT_TRUE(args.rest().empty());
}

TEST(ArgCursor, FindsAWordAnywhereAfterItWithoutMoving) {
    const std::vector<std::string_view> argv = {"BF.RESERVE", "expansion", "0.01", "100",
                                                "x",          "Expansion", "4"};
    const ArgCursor options(argv, 4);
    const auto expansion = options.find("EXPANSION");
    ASSERT_TRUE(expansion.has_value());
    EXPECT_EQ(expansion->position(), 6u);  // just past the word, at its value
    EXPECT_EQ(options.position(), 4u);     // the searching cursor stays
    EXPECT_FALSE(options.find("NONSCALING").has_value());
    // The search starts at the cursor's own argument.
    EXPECT_EQ(ArgCursor(argv, 1).find("expansion")->position(), 2u);
    // A word that ends the arguments: found, with nothing after it.
    const auto last = ArgCursor(argv, 6).find("4");
    ASSERT_TRUE(last.has_value());
    EXPECT_FALSE(last->has_next());
}

TEST(ParseDouble, FollowsRedisRules) {
    double value = 0;
    EXPECT_TRUE(parse_double("inf", value));
    EXPECT_TRUE(parse_double("-1.5e-3", value));
    EXPECT_EQ(value, -1.5e-3);
    EXPECT_FALSE(parse_double("nan", value));
    EXPECT_FALSE(parse_double(" 1", value));
    EXPECT_FALSE(parse_double("1 ", value));
    EXPECT_FALSE(parse_double("", value));
    EXPECT_FALSE(parse_double("1e999999", value) && value != HUGE_VAL);
}

}  // namespace
