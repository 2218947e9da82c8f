// train --tune's measurement window (data.probe_s > 0), a hook the rank's
// loop calls after every optimizer step: the first kWarmupSteps steps are
// not timed (first-touch allocation, oneDNN's kernel choice); the next
// kCalibrationSteps are, and the ranks agree (their mean) how many more
// steps fill probe_s; then the window closes, on every rank at the same
// step, and Report() tells what it saw. Training thread only.
#pragma once

#include <chrono>
#include <cstdint>

#include "store/status.h"
#include "trainer/report/observer.h"

namespace granary {

class Comm;
class GradientSync;
class Loader;

class ProbeWindow {
 public:
  static constexpr int64_t kWarmupSteps = 2, kCalibrationSteps = 3;
  // `loader`, `sync` and `comm` must outlive the window.
  ProbeWindow(double seconds, const Loader& loader, const GradientSync& sync, Comm& comm)
      : seconds_(seconds), loader_(loader), sync_(sync), comm_(comm) {}

  // After every optimizer step, with this rank's samples of the step (a
  // collective at the end of calibration and at the close); true once the
  // window is closed: training stops.
  StatusOr<bool> AfterStep(double samples);
  EpochReport Report() const { return report_; }

 private:
  double seconds_;
  const Loader& loader_;
  const GradientSync& sync_;
  Comm& comm_;
  int64_t steps_ = 0, last_step_ = 0;  // last_step_: 0 until calibrated
  double samples_ = 0;                 // this rank's, in the window
  std::chrono::steady_clock::time_point start_;
  double wait_at_start_ = 0, sync_at_start_ = 0;
  EpochReport report_;
};

// This process's peak resident memory, MiB.
double PeakRssMb();

}  // namespace granary
