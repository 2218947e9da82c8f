#include "trainer/features/tune_probe/probe_window.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "trainer/clock.h"
#include "trainer/comm/comm.h"
#include "trainer/loop/data_parallel.h"
#include "trainer/loop/epoch_figures.h"

namespace granary {
namespace {

class ProbeWindow : public RunHook {
 public:
  explicit ProbeWindow(double seconds) : seconds_(seconds) {}

  bool EndsTheRun() const override { return true; }

  // A collective at the end of calibration and at the close; kStop once the
  // window is closed.
  StatusOr<Flow> AfterStep(RankState& state, const StepEvent&) override {
    Comm& comm = *state.dp.comm;
    ++steps_;
    if (steps_ < kProbeWarmupSteps) return Flow::kGoOn;
    if (steps_ == kProbeWarmupSteps) {
      start_ = ReadCounters(state);
      return Flow::kGoOn;
    }
    if (steps_ == kProbeWarmupSteps + kProbeCalibrationSteps) {
      torch::Tensor elapsed = torch::tensor({SecondsSince(start_.at)}, torch::kFloat64);
      GRANARY_RETURN_IF_ERROR(comm.AllReduceSum(elapsed));
      const double per_step = elapsed.item<double>() / comm.world() / kProbeCalibrationSteps;
      last_step_ = steps_ + static_cast<int64_t>(std::max(
                                0.0, std::round((seconds_ - per_step * kProbeCalibrationSteps) /
                                                std::max(per_step, 1e-6))));
    }
    if (last_step_ == 0 || steps_ < last_step_) return Flow::kGoOn;
    GRANARY_RETURN_IF_ERROR(WindowFigures(start_, ReadCounters(state), comm, &report_));
    return Flow::kStop;
  }

  // The run's reports become the window's one.
  Status AfterRun(RankState&, std::vector<EpochReport>* reports) override {
    *reports = {report_};
    return Status::OK();
  }

 private:
  const double seconds_;
  int64_t steps_ = 0, last_step_ = 0;  // last_step_: 0 until calibrated
  RankCounters start_;
  EpochReport report_;
};

class TuneProbeFeature : public Feature {
 public:
  bool InMeasurement() const override { return true; }
  StatusOr<std::unique_ptr<RunHook>> Hook(RankState& state) const override {
    const double seconds = state.run.config.data.probe_s;
    if (seconds <= 0) return std::unique_ptr<RunHook>();
    return std::unique_ptr<RunHook>(std::make_unique<ProbeWindow>(seconds));
  }
};

}  // namespace

std::unique_ptr<Feature> MakeTuneProbeFeature() { return std::make_unique<TuneProbeFeature>(); }

}  // namespace granary
