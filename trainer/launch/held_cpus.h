// CPUs that busy processes of others are pinned to: another train or launch
// run, a pinned benchmark, a virtual machine's vCPU threads. Two runs that
// both pin their first rank to CPU 0 share it at half speed while other
// CPUs idle; the launcher places its ranks on the free CPUs first.
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/launch/layout.h"

namespace granary {

struct HeldCpus {
  std::set<int> cpus;       // of those asked about
  int processes = 0;        // that hold them
  pid_t first_pid = 0;      // the first such process, for the layout's line
  std::string first_name;   // its command ("train")
};

// The CPUs among `cpus` that other processes hold: user processes (not the
// kernel's per-CPU threads, not this process, not zombies) whose affinity
// is narrower than the machine's online CPUs and that have used at least a
// quarter of a CPU on average since they started.
HeldCpus FindHeldCpus(const std::vector<int>& cpus);

// `cpus` with the held ones after the free ones, each group in its order.
std::vector<int> FreeCpusFirst(const std::vector<int>& cpus, const HeldCpus& held);

// What the held CPUs mean for a layout pinned to `pinned`: "CPU 0 is busy
// with process 1234 (train), pinned to it: left to it", or "CPUs 0-7 are
// busy with 2 processes, 1234 (train) the first, pinned to them: shared
// with them on 0-3 (...)"; "" where none is held.
std::string HeldCpusNote(const std::vector<int>& pinned, const HeldCpus& held);

// PlanLayout over `cpus` (UsableCpus order) with those others hold taken
// last, the layout's `held` saying so; as PlanLayout where it pins nothing.
Layout PlanLayoutFreeFirst(const TrainConfig& config, const std::vector<int>& cpus);

}  // namespace granary
