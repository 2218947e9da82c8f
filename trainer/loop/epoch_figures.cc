#include "trainer/loop/epoch_figures.h"

#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>

#include "loader/loader.h"
#include "trainer/clock.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/gradient_sync.h"
#include "trainer/loop/data_parallel.h"

namespace granary {

RankCounters ReadCounters(const RankState& state) {
  RankCounters c;
  c.at = std::chrono::steady_clock::now();
  c.samples = state.samples_trained;
  c.compute_seconds = state.compute_seconds;
  const LoaderStats loader = state.train.stats();
  c.wait_seconds = loader.wait_seconds;
  c.batches = loader.batches;
  c.ready_sum = loader.ready_sum;
  c.blocked_seconds = state.dp.sync->blocked_seconds();
  return c;
}

Status WindowFigures(const RankCounters& before, const RankCounters& after, Comm& comm, EpochReport* r,
                     std::vector<double>* also) {
  std::vector<double> values = {after.samples - before.samples, PeakRssMb()};
  if (also != nullptr) values.insert(values.end(), also->begin(), also->end());
  torch::Tensor sums = torch::tensor(values, torch::kFloat64);
  GRANARY_RETURN_IF_ERROR(comm.AllReduceSum(sums));
  const double seconds = std::max(1e-9, SecondsBetween(before.at, after.at));
  r->seconds = seconds;
  r->samples_per_s = sums[0].item<double>() / seconds;
  r->stall_fraction = (after.wait_seconds - before.wait_seconds) / seconds;
  r->comm_fraction = (after.blocked_seconds - before.blocked_seconds) / seconds;
  r->compute_fraction = (after.compute_seconds - before.compute_seconds) / seconds;
  r->queue_depth = after.batches > before.batches ? static_cast<double>(after.ready_sum - before.ready_sum) /
                                                        static_cast<double>(after.batches - before.batches)
                                                  : 0.0;
  r->peak_rss_mb = sums[1].item<double>();
  for (size_t i = 0; also != nullptr && i < also->size(); ++i) {
    (*also)[i] = sums[static_cast<int64_t>(i) + 2].item<double>();
  }
  return Status::OK();
}

double PeakRssMb() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024;  // KiB on Linux
}

}  // namespace granary
