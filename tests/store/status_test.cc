#include "store/status.h"

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
