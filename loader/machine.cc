#include "loader/machine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>

namespace granary {

int UsableCpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
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

// The smallest `file` limit of cgroup `path` under `dir` and of the cgroups above it.
uint64_t LimitOnTheWayUp(const std::string& dir, std::string path, const char* file) {
  uint64_t limit = UINT64_MAX;
  for (;;) {
    limit = std::min(limit, LimitIn(dir + path + "/" + file));
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || path == "/") return limit;
    path.resize(slash);
  }
}

}  // namespace

uint64_t MemoryLimitBytes(const std::string& cgroup_root) {
  uint64_t limit = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    // "hierarchy:controllers:path", v2's hierarchy being "0::path".
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    const std::string path = line.substr(b + 1);
    if (controllers == ",,") {
      limit = std::min(limit, LimitOnTheWayUp(cgroup_root, path, "memory.max"));
      limit = std::min(limit, LimitOnTheWayUp(cgroup_root + "/unified", path, "memory.max"));
    } else if (controllers.find(",memory,") != std::string::npos) {
      limit = std::min(limit, LimitOnTheWayUp(cgroup_root + "/memory", path, "memory.limit_in_bytes"));
    }
  }
  return limit;
}

}  // namespace granary
