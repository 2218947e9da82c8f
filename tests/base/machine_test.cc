// What of the machine this process may use (base/machine.h): the memory
// limit and the CPU quota of its cgroups, read from cgroup trees of the
// test's own, laid out at this process's cgroup paths.
#include "base/machine.h"

#include <sched.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

void WriteText(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text << "\n";
}

// This process's cgroup path in the v1 hierarchy with `controller`, and in
// v2's; empty where it has none.
struct CgroupPaths {
  std::string v1, v2;
  bool has_v1 = false, has_v2 = false;
};

CgroupPaths PathsOf(const std::string& controller) {
  CgroupPaths p;
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (controllers.empty()) p.has_v2 = true, p.v2 = line.substr(b + 1);
    if (("," + controllers + ",").find("," + controller + ",") != std::string::npos) {
      p.has_v1 = true, p.v1 = line.substr(b + 1);
    }
  }
  return p;
}

TEST(MemoryLimitBytes, TheSmallestLimitOfTheCgroupAndThoseAboveItCounts) {
  const uint64_t machine = MemoryLimitBytes("/nonexistent");
  EXPECT_EQ(machine, static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE));
  const CgroupPaths p = PathsOf("memory");
  if (!p.has_v1 && !p.has_v2) GTEST_SKIP() << "/proc/self/cgroup names no memory cgroup";
  TempDir root;
  uint64_t expected = machine;
  if (p.has_v1) {
    // Unlimited here (v1 writes a huge number), limited at the top.
    WriteText(root.path() + "/memory" + p.v1 + "/memory.limit_in_bytes", "9223372036854771712");
    WriteText(root.path() + "/memory/memory.limit_in_bytes", std::to_string(96 << 20));
    expected = std::min<uint64_t>(expected, 96 << 20);
  }
  if (p.has_v2) {
    // "max" (no limit) here, a limit at the top, and a file that holds no number.
    WriteText(root.path() + p.v2 + "/memory.max", "max");
    WriteText(root.path() + "/memory.max", std::to_string(64 << 20));
    WriteText(root.path() + "/unified/memory.max", "garbage");
    expected = std::min<uint64_t>(expected, 64 << 20);
  }
  EXPECT_EQ(MemoryLimitBytes(root.path()), expected);
}

TEST(CpuQuota, TheSmallestQuotaOfTheCgroupAndThoseAboveItCountsInWholeCpus) {
  EXPECT_EQ(CpuQuota("/nonexistent"), 0);
  EXPECT_EQ(CpuQuotaCpus("/nonexistent"), 0);
  const CgroupPaths p = PathsOf("cpu");
  if (!p.has_v1 && !p.has_v2) GTEST_SKIP() << "/proc/self/cgroup names no cpu cgroup";
  TempDir root;
  const std::string v1 = root.path() + "/cpu", v2 = root.path();
  // No quota anywhere: v1's -1, v2's "max".
  if (p.has_v1) WriteText(v1 + p.v1 + "/cpu.cfs_quota_us", "-1"), WriteText(v1 + p.v1 + "/cpu.cfs_period_us", "100000");
  if (p.has_v2) WriteText(v2 + p.v2 + "/cpu.max", "max 100000");
  EXPECT_EQ(CpuQuota(root.path()), 0);
  // 2.5 CPUs above this cgroup (v1) and 1.5 at v2's top: the smaller, rounded down.
  if (p.has_v1) WriteText(v1 + "/cpu.cfs_quota_us", "250000"), WriteText(v1 + "/cpu.cfs_period_us", "100000");
  if (p.has_v2) WriteText(v2 + "/cpu.max", "75000 50000");
  EXPECT_DOUBLE_EQ(CpuQuota(root.path()), p.has_v2 ? 1.5 : 2.5);
  EXPECT_EQ(CpuQuotaCpus(root.path()), p.has_v2 ? 1 : 2);
  // Less than a CPU is still one; a file that holds no number sets nothing.
  if (p.has_v1) WriteText(v1 + p.v1 + "/cpu.cfs_quota_us", "20000");
  if (p.has_v2) WriteText(v2 + p.v2 + "/cpu.max", "20000 100000"), WriteText(v2 + "/unified/cpu.max", "garbage");
  EXPECT_DOUBLE_EQ(CpuQuota(root.path()), 0.2);
  EXPECT_EQ(CpuQuotaCpus(root.path()), 1);
}

TEST(CountOomKills, SumsTheKillsOfTheCgroupAndThoseAboveIt) {
  EXPECT_EQ(CountOomKills("/nonexistent").cgroup, 0u);
  const CgroupPaths p = PathsOf("memory");
  if (!p.has_v1 && !p.has_v2) GTEST_SKIP() << "/proc/self/cgroup names no memory cgroup";
  TempDir root;
  uint64_t expected = 0;
  if (p.has_v1) {
    WriteText(root.path() + "/memory/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2");
    if (p.v1 != "/") WriteText(root.path() + "/memory" + p.v1 + "/memory.oom_control", "oom_kill 3"), expected += 3;
    expected += 2;
  }
  if (p.has_v2) {
    // memory.events' other counters (oom: the times the limit was hit) are not kills.
    WriteText(root.path() + "/unified" + p.v2 + "/memory.events", "low 0\nhigh 0\nmax 7\noom 5\noom_kill 1");
    expected += 1;
  }
  EXPECT_EQ(CountOomKills(root.path()).cgroup, expected);
}

}  // namespace
}  // namespace granary
