// Where a run's threads go on this machine, decided by the launcher before
// any rank starts (a rank is handed it; under torchrun each rank plans its
// own) and printed: how many intra-op threads each rank
// runs, the CPUs each rank is pinned to (its loader workers and Gloo threads
// share them, so no rank takes another's cores), and the thread caps its
// environment gets (OpenMP, OpenBLAS, MKL) so no library starts a pool wider
// than the rank's share. Plain data; ranks receive it as JSON.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/config/config.h"

namespace granary {

struct Layout {
  int cores = 1;  // CPUs the launcher may use
  int ranks = 1;
  int threads = 1;                     // intra-op threads per rank
  int loader_threads = 1;              // loader workers per rank, on the rank's CPUs
  std::vector<std::vector<int>> cpus;  // per rank; empty when not pinned
  std::string not_pinned;              // why not, when `cpus` is empty
  std::string held;                    // CPUs busy pinned processes of others hold (held_cpus.h), if any
  std::string quota;                   // a CPU quota that leaves fewer CPUs than affinity does (CpuQuotaNote)

  // "OMP_NUM_THREADS=T" and its kin, for each rank's environment.
  std::vector<std::string> ThreadEnvironment() const;
  // One line, e.g. "2 ranks x 1 thread (+1 loader worker each) on 2 CPUs,
  // pinned: rank 0 CPU 0, rank 1 CPU 1".
  std::string Describe() const;
  // CPUs as a list of ranges: "0-3,8".
  static std::string CpuListText(const std::vector<int>& cpus);
  std::string ToJson() const;
  static StatusOr<Layout> FromJson(const std::string& json);
};

// The CPUs this process may run on, one CPU of each physical core first and
// their SMT siblings after, so that consecutive CPUs are distinct cores;
// the first CpuQuotaCpus() of them where a CPU quota grants fewer.
std::vector<int> UsableCpus();

// "a CPU quota (cgroup) grants 1.5 CPUs of the 8 this process may run on:
// planned for 1", where a quota leaves fewer CPUs than affinity does; "" where not.
std::string CpuQuotaNote();

// The layout of `config` (validated, defaults resolved) over `cpus`
// (UsableCpus order): rank r gets the r-th run of `threads` CPUs, unless
// config.dist.pin is off or ranks x threads oversubscribe the CPUs.
Layout PlanLayout(const TrainConfig& config, const std::vector<int>& cpus);

// Pins the calling thread, and the threads it starts afterwards, to `cpus`.
Status PinToCpus(const std::vector<int>& cpus);

}  // namespace granary
