// The MPI backend below the trainer: two ranks of mpi_rank.cc under mpirun.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>

#include "../test_util.h"
#include "trainer/comm/comm.h"

namespace granary {
namespace {

using testing::RunCommand;
using testing::TempDir;

TEST(MpiComm, SlicedAllReducesSumEveryElementAndALatePeerIsAwaitedWithoutSpinning) {
  if (!CommHasMpi()) GTEST_SKIP() << "this build has no MPI backend";
  TempDir dir;
  const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  // As the launcher starts a one-machine job: shared memory, mpirun on the loopback device.
  const std::string mca = " --mca btl self,vader --mca oob_tcp_if_include lo";
  auto r = RunCommand(MpirunPath() + root + " --quiet --oversubscribe --bind-to none" + mca + " -np 2 " +
                          GRANARY_MPI_RANK_BIN + " " + dir.Sub("measured"),
                      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto got = nlohmann::json::parse(r.out);
  // Larger than a slice: every element is the sum, across the slices' seams.
  EXPECT_EQ(got["wrong_float"], 0);
  EXPECT_EQ(got["wrong_bf16"], 0);
  // Rank 1 joined only after rank 0's measured second. The MPI thread tested
  // the collective and slept in between, instead of spinning on rank 0's
  // core through that second (a spinning wait costs as many CPU seconds as
  // wall seconds).
  const double cpu = got["late_peer_cpu_s"], wall = got["late_peer_wall_s"];
  EXPECT_GE(wall, 0.9);
  EXPECT_LT(cpu, 0.3 * wall) << "rank 0 spent " << cpu << " s of CPU waiting " << wall << " s for its peer";
}

}  // namespace
}  // namespace granary
