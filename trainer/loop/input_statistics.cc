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
  torch::Tensor sum, sum_sq, missing;
  double count = 0;
  Batch batch;
  for (;;) {
    GRANARY_ASSIGN_OR_RETURN(bool more, loader.value()->Next(&batch));
    if (!more) break;
    GRANARY_RETURN_IF_ERROR(CatchTorch("input statistics", [&] {
      torch::Tensor x = InputTensor(batch).to(torch::kFloat64).flatten(1);
      if (!sum.defined()) {
        sum = torch::zeros({x.size(1)}, torch::kFloat64);
        sum_sq = torch::zeros({x.size(1)}, torch::kFloat64);
        missing = torch::zeros({x.size(1)}, torch::kInt64);
      }
      const torch::Tensor absent = torch::isnan(x);
      x = x.masked_fill(absent, 0);
      sum += x.sum(0);
      sum_sq += (x * x).sum(0);
      missing += absent.sum(0);
    }));
    count += static_cast<double>(batch.size);
  }
  if (count == 0) return Status::InvalidArgument(db.path() + ": split '" + options.split + "' is empty");
  InputStatistics s;
  const torch::Tensor present = (count - missing.to(torch::kFloat64)).clamp_min(1);
  s.mean = sum / present;
  torch::Tensor variance = (sum_sq / present - s.mean * s.mean).clamp_min(0);
  s.stddev = torch::where(variance > 1e-12, variance.sqrt(), torch::ones_like(variance));
  s.missing = missing;
  return s;
}

StatusOr<InputStatistics> InputStatisticsOf(const DbReader& db, const LoaderOptions& options) {
  const auto& recorded = db.manifest().statistics;
  const auto split = recorded.find(options.split);
  if (split == recorded.end()) return ComputeInputStatistics(db, options);
  const auto field = split->second.find(options.input_field);
  if (field == split->second.end()) return ComputeInputStatistics(db, options);
  const FieldStatistics& f = field->second;
  if (f.samples == 0) return Status::InvalidArgument(db.path() + ": split '" + options.split + "' is empty");
  InputStatistics s;
  GRANARY_RETURN_IF_ERROR(CatchTorch("input statistics", [&] {
    const auto n = static_cast<int64_t>(f.mean.size());
    s.mean = torch::tensor(f.mean, torch::kFloat64).nan_to_num(0);  // NaN: no value present
    // As ComputeInputStatistics: a (near) constant element, or one never present, gets 1.
    const torch::Tensor stddev = torch::tensor(f.stddev, torch::kFloat64);
    s.stddev = torch::where(stddev * stddev > 1e-12, stddev, torch::ones({n}, torch::kFloat64));
    s.missing = torch::tensor(std::vector<int64_t>(f.missing.begin(), f.missing.end()), torch::kInt64);
  }));
  return s;
}

}  // namespace granary
