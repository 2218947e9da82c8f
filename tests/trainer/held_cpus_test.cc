// CPUs held by busy pinned processes of others: found, taken last, said.
#include "trainer/launch/held_cpus.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace granary {
namespace {

TEST(HeldCpus, FreeCpusComeFirstAndTheLineSaysWhatIsShared) {
  HeldCpus held;
  held.cpus = {0, 2};
  held.processes = 1;
  held.first_pid = 1234;
  held.first_name = "train";
  EXPECT_EQ(FreeCpusFirst({0, 1, 2, 3}, held), (std::vector<int>{1, 3, 0, 2}));
  EXPECT_EQ(FreeCpusFirst({0, 1, 2, 3}, HeldCpus{}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(HeldCpusNote({1, 3}, held), "CPUs 0,2 are busy with process 1234 (train), pinned to them: left to it");
  held.processes = 3;
  held.cpus = {0};
  EXPECT_EQ(HeldCpusNote({1, 0}, held),
            "CPU 0 is busy with 3 processes, 1234 (train) the first, pinned to it: shared with them on 0 (fewer "
            "ranks or threads would leave it free)");
  EXPECT_EQ(HeldCpusNote({0, 1}, HeldCpus{}), "");
}

// A busy process pinned to the last usable CPU is found, and a one-rank,
// one-thread run is placed elsewhere, the layout's line saying why.
TEST(HeldCpus, ABusyPinnedProcessIsFoundAndItsCpuTakenLast) {
  const std::vector<int> cpus = UsableCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  const int last = cpus.back();
  const pid_t busy = ::fork();
  ASSERT_GE(busy, 0);
  if (busy == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(last, &set);
    ::sched_setaffinity(0, sizeof(set), &set);
    for (volatile uint64_t spin = 0;; spin = spin + 1) {
    }
  }
  // Found once it has run a little (a loaded machine may keep it waiting).
  HeldCpus held;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       held.cpus.count(last) == 0 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    held = FindHeldCpus(cpus);
  }
  EXPECT_EQ(held.cpus.count(last), 1u);
  EXPECT_GE(held.processes, 1);
  TrainConfig c;
  c.data.db = "x";
  c.dist.ranks = 1;
  c.dist.threads = 1;
  const Layout layout = PlanLayoutFreeFirst(c, cpus);
  ASSERT_EQ(layout.cpus.size(), 1u);
  EXPECT_NE(layout.cpus[0], (std::vector<int>{last}));  // others may hold the rest too: then CPU order decides
  EXPECT_NE(layout.Describe().find(" busy with "), std::string::npos) << layout.Describe();
  ::kill(busy, SIGKILL);
  ::waitpid(busy, nullptr, 0);
}

}  // namespace
}  // namespace granary
