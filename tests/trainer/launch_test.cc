// The launcher on stand-in ranks (/bin/sh scripts): what it reports and that
// it never returns with a rank still running.
#include "trainer/launch.h"

#include <gtest/gtest.h>

#include <string>

namespace granary {
namespace {

// Ranks that run `script` under /bin/sh; the launcher's "--rank R --port P"
// become $0 $1 $2 $3, so the rank number is $1.
LaunchOutcome Launch(const std::string& script, int ranks) {
  LaunchOptions o;
  o.program = "/bin/sh";
  o.args = {"sh", "-c", script};
  o.ranks = ranks;
  o.grace_s = 2;
  auto outcome = LaunchRanks(o);
  EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
  return outcome.ok() ? outcome.value() : LaunchOutcome{-1, "launch failed"};
}

TEST(Launch, RanksThatSucceedGiveZero) {
  LaunchOutcome out = Launch("test \"$0\" = --rank && exit 0", 3);
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_EQ(out.failure, "");
}

// A rank that would run for minutes is stopped when another fails; that the
// launcher returns at all shows it did not wait for it.
TEST(Launch, AFailingRankStopsTheOthersAndGivesItsStatus) {
  LaunchOutcome out = Launch("if [ \"$1\" = 1 ]; then exit 3; fi; exec sleep 300", 2);
  EXPECT_EQ(out.exit_code, 3);
  EXPECT_EQ(out.failure, "");  // the rank said why itself
}

TEST(Launch, AKilledRankIsNamed) {
  LaunchOutcome out = Launch("if [ \"$1\" = 1 ]; then kill -9 $$; fi; exec sleep 300", 2);
  EXPECT_EQ(out.exit_code, 128 + 9);
  EXPECT_EQ(out.failure.rfind("rank 1 was killed by signal 9", 0), 0u) << out.failure;
}

// A rank that ignores SIGTERM is killed after the grace period.
TEST(Launch, ARankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  LaunchOutcome out = Launch("if [ \"$1\" = 1 ]; then exit 5; fi; trap '' TERM; while :; do sleep 1; done", 2);
  EXPECT_EQ(out.exit_code, 5);
}

TEST(Launch, AProgramThatCannotStartIsExit127) {
  LaunchOptions o;
  o.program = "/nonexistent/train";
  o.args = {"train"};
  o.ranks = 2;
  auto out = LaunchRanks(o);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->exit_code, 127);
}

}  // namespace
}  // namespace granary
