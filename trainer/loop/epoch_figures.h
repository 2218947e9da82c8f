// One definition of what a window of training (an epoch, train --tune's
// measurement) reports: both read a rank's counters at the window's start
// and end and turn the two into the same figures, so the epoch report and
// the layouts --tune ranks are measured alike.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "trainer/loop/hook.h"
#include "trainer/report/observer.h"

namespace granary {

class Comm;

// What a rank's time has gone to so far: totals that only grow.
struct RankCounters {
  std::chrono::steady_clock::time_point at;
  double samples = 0;          // trained by this run
  double compute_seconds = 0;  // forward, backward, optimizer step
  double wait_seconds = 0;     // waiting for the loader's next batch
  uint64_t batches = 0;        // batches the loader handed over
  uint64_t ready_sum = 0;      // ready batches seen at each hand-over, summed
  double blocked_seconds = 0;  // waiting for the gradient sync
};

// This rank's counters now.
RankCounters ReadCounters(const RankState& state);

// The window [before, after] into `r`: its seconds; samples/s over every
// rank (their samples summed); this rank's fractions of the window spent
// waiting for data (stall), blocked on the sync (comm) and computing
// (compute), each measured; its mean queue depth; the ranks' peak memory so
// far, summed. A collective: every rank calls it at the same point. `also`:
// more values summed over the ranks in the same all-reduce (null: none).
Status WindowFigures(const RankCounters& before, const RankCounters& after, Comm& comm, EpochReport* r,
                     std::vector<double>* also = nullptr);

// This process's peak resident memory, MiB.
double PeakRssMb();

}  // namespace granary
