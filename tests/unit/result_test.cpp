// core::Result: a value or a reason, never both.

#include "bloomery/core/result.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace {

using bloomery::core::Error;
using bloomery::core::Result;
using bloomery::core::Status;

Result<int> half(int n) {
    if (n % 2 != 0) return Error{"ERR " + std::to_string(n) + " is odd"};
    return n / 2;
}

Status check(bool fine) {
    if (!fine) return Error{"not fine"};
    return {};
}

TEST(Result, HoldsTheValueWhenOk) {
    const Result<int> r = half(10);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(static_cast<bool>(r));
    EXPECT_EQ(*r, 5);
    EXPECT_EQ(r.value(), 5);
}

TEST(Result, HoldsTheReasonWhenNot) {
    const Result<int> r = half(7);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error(), "ERR 7 is odd");
    // A failure passes on unchanged into a Result of another type.
    const Result<std::string> passed = r.failure();
    ASSERT_FALSE(passed);
    EXPECT_EQ(passed.error(), "ERR 7 is odd");
}

TEST(Result, MovesOutMoveOnlyValues) {
    Result<std::unique_ptr<int>> r = std::make_unique<int>(3);
    ASSERT_TRUE(r);
    EXPECT_EQ(**r, 3);
    std::unique_ptr<int> taken = std::move(r).value();
    EXPECT_EQ(*taken, 3);
}

TEST(Status, IsOkByDefaultAndCarriesAReasonOtherwise) {
    EXPECT_TRUE(check(true).ok());
    const Status failed = check(false);
    EXPECT_FALSE(failed);
    EXPECT_EQ(failed.error(), "not fine");
    EXPECT_EQ(failed.failure().text, "not fine");
}

}  // namespace
