#include "trainer/launch/held_cpus.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "trainer/launch/rank_processes.h"

namespace granary {
namespace {

double UptimeSeconds() {
  std::ifstream in("/proc/uptime");
  double up = 0;
  in >> up;
  return up;
}

}  // namespace

HeldCpus FindHeldCpus(const std::vector<int>& cpus) {
  HeldCpus held;
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double uptime = UptimeSeconds();
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr || online < 2 || tick <= 0) {
    if (proc != nullptr) ::closedir(proc);
    return held;
  }
  const pid_t self = ::getpid();
  while (const dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
    if (pid <= 0 || pid == self) continue;
    cpu_set_t set;
    if (::sched_getaffinity(pid, sizeof(set), &set) != 0 || CPU_COUNT(&set) >= online) continue;
    // Not a kernel thread (kthreadd's children, per CPU), not gone.
    const ProcState t = ReadProcState(pid);
    if (t.state == 0 || t.state == 'Z' || t.state == 'X' || t.parent == 2 || pid == 2) continue;
    const double age = uptime - t.start_ticks / tick;
    if (age <= 0 || t.cpu_ticks / tick < 0.25 * age) continue;  // idle, or pinned and waiting
    bool any = false;
    for (int cpu : cpus) {
      if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &set)) {
        held.cpus.insert(cpu);
        any = true;
      }
    }
    if (!any) continue;
    if (held.processes++ == 0) {
      held.first_pid = pid;
      held.first_name = t.name;
    }
  }
  ::closedir(proc);
  return held;
}

std::vector<int> FreeCpusFirst(const std::vector<int>& cpus, const HeldCpus& held) {
  std::vector<int> out = cpus;
  std::stable_partition(out.begin(), out.end(), [&](int cpu) { return held.cpus.count(cpu) == 0; });
  return out;
}

std::string HeldCpusNote(const std::vector<int>& pinned, const HeldCpus& held) {
  if (held.cpus.empty()) return "";
  std::vector<int> shared;
  for (int cpu : pinned) {
    if (held.cpus.count(cpu) > 0) shared.push_back(cpu);
  }
  const std::vector<int> all(held.cpus.begin(), held.cpus.end());
  const std::string it = all.size() == 1 ? "it" : "them", them = held.processes == 1 ? "it" : "them";
  const std::string who = std::to_string(held.first_pid) + " (" + held.first_name + ")";
  const std::string busy = held.processes == 1 ? "process " + who + ","
                                               : std::to_string(held.processes) + " processes, " + who + " the first,";
  return (all.size() == 1 ? "CPU " : "CPUs ") + Layout::CpuListText(all) + (all.size() == 1 ? " is" : " are") +
         " busy with " + busy + " pinned to " + it + ": " +
         (shared.empty() ? "left to " + them
                         : "shared with " + them + " on " + Layout::CpuListText(shared) +
                               " (fewer ranks or threads would leave " + it + " free)");
}

Layout PlanLayoutFreeFirst(const TrainConfig& config, const std::vector<int>& cpus) {
  const HeldCpus held = config.dist.pin ? FindHeldCpus(cpus) : HeldCpus{};
  Layout layout = PlanLayout(config, FreeCpusFirst(cpus, held));
  layout.quota = CpuQuotaNote();
  if (layout.cpus.empty()) return layout;
  std::vector<int> pinned;
  for (const std::vector<int>& rank : layout.cpus) pinned.insert(pinned.end(), rank.begin(), rank.end());
  layout.held = HeldCpusNote(pinned, held);
  return layout;
}

}  // namespace granary
