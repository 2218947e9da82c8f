#include "trainer/clock.h"
#include "trainer/loop/probe_window.h"

#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "loader/loader.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/gradient_sync.h"
#include "trainer/loop/data_parallel.h"

namespace granary {

double PeakRssMb() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024;  // KiB on Linux
}

StatusOr<Flow> ProbeWindow::AfterStep(RankState& state, const StepEvent& step) {
  const Loader& loader = state.train;
  const GradientSync& sync = *state.dp.sync;
  Comm& comm = *state.dp.comm;
  ++steps_;
  if (steps_ == kWarmupSteps) {
    start_ = std::chrono::steady_clock::now();
    wait_at_start_ = loader.stats().wait_seconds;
    sync_at_start_ = sync.blocked_seconds();
    return Flow::kGoOn;
  }
  if (steps_ < kWarmupSteps) return Flow::kGoOn;
  samples_ += step.result.samples;
  if (steps_ == kWarmupSteps + kCalibrationSteps) {
    torch::Tensor elapsed = torch::tensor({SecondsSince(start_)}, torch::kFloat64);
    GRANARY_RETURN_IF_ERROR(comm.AllReduceSum(elapsed));
    const double per_step = elapsed.item<double>() / comm.world() / kCalibrationSteps;
    last_step_ = steps_ + static_cast<int64_t>(std::max(
                              0.0, std::round((seconds_ - per_step * kCalibrationSteps) / std::max(per_step, 1e-6))));
  }
  if (last_step_ == 0 || steps_ < last_step_) return Flow::kGoOn;
  report_.seconds = SecondsSince(start_);
  report_.samples_per_s = samples_ * comm.world() / report_.seconds;
  report_.stall_fraction = (loader.stats().wait_seconds - wait_at_start_) / report_.seconds;
  report_.comm_fraction = (sync.blocked_seconds() - sync_at_start_) / report_.seconds;
  report_.compute_fraction = std::max(0.0, 1 - report_.stall_fraction - report_.comm_fraction);
  torch::Tensor rss = torch::tensor({PeakRssMb()}, torch::kFloat64);
  GRANARY_RETURN_IF_ERROR(comm.AllReduceSum(rss));
  report_.peak_rss_mb = rss.item<double>();
  return Flow::kStop;
}

Status ProbeWindow::AfterRun(RankState&, std::vector<EpochReport>* reports) {
  *reports = {report_};
  return Status::OK();
}

}  // namespace granary
