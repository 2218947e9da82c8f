#include "trainer/loop/same_flow.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/trainer/two_ranks.h"

namespace granary {
namespace {

// The same flow on every rank passes; a rank that stops where the other goes
// on is named on both, with the call and the count, instead of the hang that
// follows in a real run.
TEST(SameFlow, AFlowThatDiffersBetweenRanksIsNamedOnEveryRank) {
  std::vector<std::string> messages(2);
  OnTwoRanks([&](Comm& comm) -> Status {
    GRANARY_RETURN_IF_ERROR(CheckSameFlow(comm, Flow::kGoOn, "after step 1"));
    GRANARY_RETURN_IF_ERROR(CheckSameFlow(comm, Flow::kStop, "after epoch 1"));
    const Status differs = CheckSameFlow(comm, comm.rank() == 0 ? Flow::kStop : Flow::kGoOn, "after step 7");
    messages[comm.rank()] = differs.message();
    if (differs.code() != Status::Code::kFailedPrecondition) {
      return Status::InvalidArgument("not refused: " + differs.ToString());
    }
    return Status::OK();
  });
  EXPECT_NE(messages[0].find("the hooks' flow differs between ranks after step 7: 1 of 2 ranks stopped (this one did)"),
            std::string::npos)
      << messages[0];
  EXPECT_NE(messages[1].find("1 of 2 ranks stopped (this one did not)"), std::string::npos) << messages[1];
}

}  // namespace
}  // namespace granary
