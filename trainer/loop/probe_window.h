// train --tune's measurement window (data.probe_s > 0), a hook of every
// rank after every optimizer step: the first kWarmupSteps steps are not
// timed (first-touch allocation, oneDNN's kernel choice); the next
// kCalibrationSteps are, and the ranks agree (their mean) how many more
// steps fill probe_s; then the window closes, on every rank at the same
// step, training stops, and the run's one report is the window's. A probe
// run trains until then (however many epochs) and has no evaluation,
// checkpoint or saved model (loop/hooks.cc). Training thread only.
#pragma once

#include <chrono>
#include <cstdint>

#include <vector>

#include "store/status.h"
#include "trainer/loop/hook.h"
#include "trainer/report/observer.h"

namespace granary {

class ProbeWindow : public RunHook {
 public:
  static constexpr int64_t kWarmupSteps = 2, kCalibrationSteps = 3;
  explicit ProbeWindow(double seconds) : seconds_(seconds) {}

  // A collective at the end of calibration and at the close; kStop once the
  // window is closed.
  StatusOr<Flow> AfterStep(RankState& state, const StepEvent& step) override;
  // The run's reports become the window's one.
  Status AfterRun(RankState& state, std::vector<EpochReport>* reports) override;

 private:
  double seconds_;
  int64_t steps_ = 0, last_step_ = 0;  // last_step_: 0 until calibrated
  double samples_ = 0;                 // this rank's, in the window
  std::chrono::steady_clock::time_point start_;
  double wait_at_start_ = 0, sync_at_start_ = 0;
  EpochReport report_;
};

// This process's peak resident memory, MiB.
double PeakRssMb();

}  // namespace granary
