#include "trainer/launch/layout.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "base/json_text.h"
#include "base/machine.h"

namespace granary {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Layout, cores, ranks, threads, loader_threads, cpus, not_pinned, held,
                                                quota)

namespace {

// `path`'s first integer, or `fallback` where it cannot be read.
int ReadInt(const std::string& path, int fallback) {
  std::ifstream in(path);
  int value = fallback;
  if (!(in >> value)) return fallback;
  return value;
}

std::string CpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size(); ++i) {
    // Runs of consecutive CPUs as a range: "0-3,8".
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j;
  }
  return out;
}

std::string Plural(int n, const std::string& word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

}  // namespace

std::vector<int> UsableCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  // (SMT thread index within its core, package, core, cpu): every core's
  // first CPU before any core's second.
  std::map<std::pair<int, int>, int> seen_per_core;
  std::vector<std::tuple<int, int, int, int>> order;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    const int package = ReadInt(topology + "physical_package_id", 0);
    const int core = ReadInt(topology + "core_id", cpu);
    const int smt = seen_per_core[{package, core}]++;
    order.emplace_back(smt, package, core, cpu);
  }
  std::sort(order.begin(), order.end());
  for (const auto& entry : order) cpus.push_back(std::get<3>(entry));
  const int quota = CpuQuotaCpus();
  if (quota > 0 && static_cast<size_t>(quota) < cpus.size()) cpus.resize(static_cast<size_t>(quota));
  return cpus;
}

std::string CpuQuotaNote() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return "";
  const int quota = CpuQuotaCpus();
  if (quota == 0 || quota >= CPU_COUNT(&set)) return "";
  const double granted = CpuQuota();
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g CPU%s", granted, granted == 1 ? "" : "s");
  return std::string("a CPU quota (cgroup) grants ") + text + " of the " + std::to_string(CPU_COUNT(&set)) +
         " this process may run on: planned for " + std::to_string(quota);
}

Layout PlanLayout(const TrainConfig& c, const std::vector<int>& cpus) {
  Layout l;
  l.cores = std::max<int>(1, static_cast<int>(cpus.size()));
  l.ranks = c.dist.ranks;
  l.threads = c.ThreadsPerRank(l.cores);
  l.loader_threads = c.data.loader_threads;
  if (!c.dist.pin) {
    l.not_pinned = "--pin off";
  } else if (!c.PinsRanks(static_cast<int>(cpus.size()))) {
    l.not_pinned = "oversubscribed";
  } else {
    for (int r = 0; r < l.ranks; ++r) {
      l.cpus.emplace_back(cpus.begin() + r * l.threads, cpus.begin() + (r + 1) * l.threads);
      std::sort(l.cpus.back().begin(), l.cpus.back().end());
    }
  }
  return l;
}

std::vector<std::string> Layout::ThreadEnvironment() const {
  const std::string t = std::to_string(threads);
  return {"OMP_NUM_THREADS=" + t, "OPENBLAS_NUM_THREADS=" + t, "MKL_NUM_THREADS=" + t};
}

std::string Layout::Describe() const {
  std::string out = Plural(ranks, "rank") + " x " + Plural(threads, "thread") + " (+" +
                    Plural(loader_threads, "loader worker") + (ranks > 1 ? " each" : "") + ") on " +
                    Plural(cores, "CPU") + ", ";
  if (cpus.empty()) return out + "not pinned (" + not_pinned + ")" + (quota.empty() ? "" : "; " + quota);
  out += "pinned:";
  for (size_t r = 0; r < cpus.size(); ++r) {
    out += (r == 0 ? " rank " : ", rank ") + std::to_string(r) + " CPU " + CpuList(cpus[r]);
  }
  if (!quota.empty()) out += "; " + quota;
  return held.empty() ? out : out + "; " + held;
}

std::string Layout::CpuListText(const std::vector<int>& cpus) {
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  return CpuList(sorted);
}

std::string Layout::ToJson() const { return DumpJson(nlohmann::json(*this)); }

StatusOr<Layout> Layout::FromJson(const std::string& json) {
  const nlohmann::json j = ParseJson(json);
  try {
    if (!j.is_object()) throw std::invalid_argument("not an object");
    Layout l = j.get<Layout>();
    if (l.ranks < 1 || l.threads < 1 || l.cores < 1 ||
        (!l.cpus.empty() && l.cpus.size() != static_cast<size_t>(l.ranks))) {
      throw std::invalid_argument("inconsistent counts");
    }
    return l;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("--layout: ") + e.what());
  }
}

Status PinToCpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return Status::InvalidArgument("CPU " + std::to_string(cpu) + ": out of range");
    CPU_SET(cpu, &set);
  }
  if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
    return Status::IOError("CPUs " + CpuList(cpus), "sched_setaffinity", errno);
  }
  return Status::OK();
}

}  // namespace granary
