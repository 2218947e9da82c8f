#include "base/status.h"

#include <gtest/gtest.h>

#include <string>

namespace granary {
namespace {

TEST(StatusOr, HoldsAValueOrAnError) {
  StatusOr<std::string> good = std::string("db/");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good.value(), "db/");
  EXPECT_EQ(good->size(), 3u);
  StatusOr<std::string> bad = Status::NotFound("db/manifest.json");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().ToString(), "NotFound: db/manifest.json");
}

StatusOr<int> Half(int n) {
  if (n % 2 != 0) return Status::InvalidArgument(std::to_string(n) + " is odd");
  return n / 2;
}

// The value moves into a new or an existing variable; an error returns at
// once, and nothing after it runs.
StatusOr<int> Quarter(int n, int* steps) {
  GRANARY_ASSIGN_OR_RETURN(const int half, Half(n));
  ++*steps;
  int quarter = 0;
  GRANARY_ASSIGN_OR_RETURN(quarter, Half(half));
  ++*steps;
  return quarter;
}

TEST(StatusOr, AssignOrReturnTakesTheValueOrReturnsTheError) {
  int steps = 0;
  EXPECT_EQ(Quarter(12, &steps).value(), 3);
  EXPECT_EQ(steps, 2);
  steps = 0;
  EXPECT_EQ(Quarter(6, &steps).status().ToString(), "InvalidArgument: 3 is odd");
  EXPECT_EQ(steps, 1);
  steps = 0;
  EXPECT_EQ(Quarter(5, &steps).status().ToString(), "InvalidArgument: 5 is odd");
  EXPECT_EQ(steps, 0);
}

// Reading the value of an error was undefined behaviour (an empty optional
// dereferenced); it is a bug in the caller, so it aborts naming the error.
TEST(StatusOrDeathTest, ReadingTheValueOfAnErrorAbortsNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)StatusOr<int>(Status::Corruption("shard-00001.mdb, key 7")).value(),
               "Corruption: shard-00001.mdb, key 7.*not checked");
  EXPECT_DEATH((void)StatusOr<std::string>(Status::IOError("db/", "open", 2))->size(), "IOError: db/: open failed");
  EXPECT_DEATH((void)StatusOr<int>(Status::OK()).value(), "no value \\(made from an OK Status\\)");
}

}  // namespace
}  // namespace granary
