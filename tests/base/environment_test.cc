#include "base/environment.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

namespace granary {
namespace {

TEST(Environment, ReadsNumbersStrictly) {
  const Environment env({{"A", "12"}, {"B", "-3"}, {"C", "7x"}, {"D", ""}, {"E", "99999999999"}});
  EXPECT_EQ(env.Number("A"), 12);
  EXPECT_EQ(env.Number("B"), -1);  // not a count
  EXPECT_EQ(env.Number("C"), -1);
  EXPECT_EQ(env.Number("D"), -1);
  EXPECT_EQ(env.Number("E"), -1);  // past an int
  EXPECT_EQ(env.Number("unset"), -1);
  EXPECT_TRUE(env.Has("D"));  // set, if empty
  EXPECT_FALSE(env.Has("unset"));
  EXPECT_EQ(env.Get("unset", "x"), "x");
}

TEST(Environment, OfProcessIsReadOnceAndACopyChangesNothingElse) {
  ::setenv("GRANARY_ENVIRONMENT_TEST", "before", 1);
  const Environment read = Environment::OfProcess();
  ::setenv("GRANARY_ENVIRONMENT_TEST", "after", 1);
  EXPECT_EQ(read.Get("GRANARY_ENVIRONMENT_TEST"), "before");
  const Environment changed = read.With("GRANARY_ENVIRONMENT_TEST", "mine");
  EXPECT_EQ(changed.Get("GRANARY_ENVIRONMENT_TEST"), "mine");
  EXPECT_EQ(read.Get("GRANARY_ENVIRONMENT_TEST"), "before");
  const std::vector<std::string> entries = changed.Entries();
  EXPECT_NE(std::find(entries.begin(), entries.end(), "GRANARY_ENVIRONMENT_TEST=mine"), entries.end());
  ::unsetenv("GRANARY_ENVIRONMENT_TEST");
}

}  // namespace
}  // namespace granary
