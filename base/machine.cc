#include "base/machine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <utility>
#include <vector>

namespace granary {

int UsableCpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  static const int quota = CpuQuotaCpus();  // read once: a quota is the container's, not changed within a run
  return std::max(1, quota > 0 ? std::min(quota, CPU_COUNT(&set)) : CPU_COUNT(&set));
}

namespace {

// The number a cgroup limit file holds; UINT64_MAX where the file is
// absent, says "max" (v2: no limit) or holds no number.
uint64_t LimitIn(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text)) return UINT64_MAX;
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || errno != 0) return UINT64_MAX;
  return value;
}

// The number after `key` in a file of "key value" lines (memory.events,
// memory.oom_control, /proc/vmstat); 0 where there is none.
uint64_t CounterIn(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string name;
  uint64_t value = 0;
  while (in >> name >> value) {
    if (name == key) return value;
  }
  return 0;
}

// Calls visit(p) for cgroup `path` and for each cgroup above it, up to the root.
template <typename Visit>
void OnTheWayUp(std::string path, Visit visit) {
  for (;;) {
    visit(path);
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || path == "/") return;
    path.resize(slash);
  }
}

// The smallest `file` limit of cgroup `path` under `dir` and of the cgroups above it.
uint64_t LimitOnTheWayUp(const std::string& dir, const std::string& path, const char* file) {
  uint64_t limit = UINT64_MAX;
  OnTheWayUp(path, [&](const std::string& p) { limit = std::min(limit, LimitIn(dir + p + "/" + file)); });
  return limit;
}

// Each line of /proc/self/cgroup, "hierarchy:controllers:path", as
// (",controllers,", path); v2's hierarchy, "0::path", has ",," as its controllers.
std::vector<std::pair<std::string, std::string>> ProcessCgroups() {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    out.emplace_back("," + line.substr(a + 1, b - a - 1) + ",", line.substr(b + 1));
  }
  return out;
}

// The CPUs one cgroup directory's quota grants; infinity where it sets none.
// v2's cpu.max holds "QUOTA PERIOD" or "max PERIOD"; v1's quota is -1 for none.
double QuotaIn(const std::string& dir, bool v2) {
  double quota = 0, period = 0;
  if (v2) {
    std::ifstream in(dir + "/cpu.max");
    std::string quota_text;
    if (!(in >> quota_text >> period) || quota_text == "max") return HUGE_VAL;
    quota = std::strtod(quota_text.c_str(), nullptr);
  } else {
    std::ifstream quota_in(dir + "/cpu.cfs_quota_us"), period_in(dir + "/cpu.cfs_period_us");
    if (!(quota_in >> quota) || !(period_in >> period)) return HUGE_VAL;
  }
  return quota > 0 && period > 0 ? quota / period : HUGE_VAL;
}

// The smallest quota of cgroup `path` under `dir` and of the cgroups above it.
double QuotaOnTheWayUp(const std::string& dir, const std::string& path, bool v2) {
  double cpus = HUGE_VAL;
  OnTheWayUp(path, [&](const std::string& p) { cpus = std::min(cpus, QuotaIn(dir + p, v2)); });
  return cpus;
}

}  // namespace

double CpuQuota(const std::string& cgroup_root) {
  double cpus = HUGE_VAL;
  for (const auto& [controllers, path] : ProcessCgroups()) {
    if (controllers == ",,") {
      cpus = std::min(cpus, QuotaOnTheWayUp(cgroup_root, path, true));
      cpus = std::min(cpus, QuotaOnTheWayUp(cgroup_root + "/unified", path, true));
    } else if (controllers.find(",cpu,") != std::string::npos) {
      cpus = std::min(cpus, QuotaOnTheWayUp(cgroup_root + "/cpu", path, false));
    }
  }
  return cpus == HUGE_VAL ? 0 : cpus;
}

int CpuQuotaCpus(const std::string& cgroup_root) {
  const double cpus = CpuQuota(cgroup_root);
  if (cpus <= 0) return 0;
  return std::max(1, static_cast<int>(std::min(cpus, 1e6)));
}

uint64_t MachineMemoryBytes() {
  return static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t MemoryLimitBytes(const std::string& cgroup_root) {
  uint64_t limit = MachineMemoryBytes();
  for (const auto& [controllers, path] : ProcessCgroups()) {
    if (controllers == ",,") {
      limit = std::min(limit, LimitOnTheWayUp(cgroup_root, path, "memory.max"));
      limit = std::min(limit, LimitOnTheWayUp(cgroup_root + "/unified", path, "memory.max"));
    } else if (controllers.find(",memory,") != std::string::npos) {
      limit = std::min(limit, LimitOnTheWayUp(cgroup_root + "/memory", path, "memory.limit_in_bytes"));
    }
  }
  return limit;
}

OomKills CountOomKills(const std::string& cgroup_root) {
  OomKills kills;
  auto sum_up = [&kills](const std::string& dir, const std::string& path, const char* file) {
    OnTheWayUp(path, [&](const std::string& p) { kills.cgroup += CounterIn(dir + p + "/" + file, "oom_kill"); });
  };
  for (const auto& [controllers, path] : ProcessCgroups()) {
    if (controllers == ",,") {
      sum_up(cgroup_root, path, "memory.events");
      sum_up(cgroup_root + "/unified", path, "memory.events");
    } else if (controllers.find(",memory,") != std::string::npos) {
      sum_up(cgroup_root + "/memory", path, "memory.oom_control");
    }
  }
  kills.machine = CounterIn("/proc/vmstat", "oom_kill");
  return kills;
}

}  // namespace granary
