#include "trainer/loop/input_statistics.h"

#include <memory>

#include "trainer/loop/batch_tensors.h"
#include "trainer/loop/loader_options.h"
#include "trainer/torch_guard.h"

namespace granary {

StatusOr<InputStatistics> ComputeInputStatistics(const DbReader& db, LoaderOptions options) {
  options = WholeSplitPass(options);
  options.channels_last = false;
  StatusOr<std::unique_ptr<Loader>> loader = Loader::Create(db, options);
  if (!loader.ok()) return loader.status().WithContext("input statistics");
  loader.value()->StartEpoch(0);
  torch::Tensor sum, sum_sq;
  double count = 0;
  Batch batch;
  for (;;) {
    StatusOr<bool> more = loader.value()->Next(&batch);
    if (!more.ok()) return more.status();
    if (!more.value()) break;
    GRANARY_RETURN_IF_ERROR(CatchTorch("input statistics", [&] {
      torch::Tensor x = InputTensor(batch).to(torch::kFloat64).flatten(1);
      if (!sum.defined()) {
        sum = torch::zeros({x.size(1)}, torch::kFloat64);
        sum_sq = torch::zeros({x.size(1)}, torch::kFloat64);
      }
      sum += x.sum(0);
      sum_sq += (x * x).sum(0);
    }));
    count += static_cast<double>(batch.size);
  }
  if (count == 0) return Status::InvalidArgument(db.path() + ": split '" + options.split + "' is empty");
  InputStatistics s;
  s.mean = sum / count;
  torch::Tensor variance = (sum_sq / count - s.mean * s.mean).clamp_min(0);
  s.stddev = torch::where(variance > 1e-12, variance.sqrt(), torch::ones_like(variance));
  return s;
}

}  // namespace granary
