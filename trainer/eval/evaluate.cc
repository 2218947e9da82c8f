#include "trainer/eval/evaluate.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "trainer/launch/heartbeat.h"
#include "trainer/loop/batch_tensors.h"
#include "trainer/loop/loader_options.h"
#include "trainer/torch_guard.h"

namespace granary {

StatusOr<EvalResult> EvaluateForward(const DbReader& db, LoaderOptions options, const ForwardFn& forward, int rank,
                                     int world) {
  options = WholeSplitPass(options);
  options.sampler.rank = rank;
  options.sampler.world = world;
  StatusOr<std::unique_ptr<Loader>> loader = Loader::Create(db, options);
  if (!loader.ok()) return loader.status().WithContext("evaluation loader");
  loader.value()->StartEpoch(0);
  const uint64_t mine = loader.value()->sampler().unpadded_samples();  // padding is not counted
  EvalResult out;
  Batch batch;
  for (;;) {
    GRANARY_ASSIGN_OR_RETURN(bool more, loader.value()->Next(&batch));
    if (!more) break;
    out.skipped.insert(out.skipped.end(), batch.skipped_reasons.begin(), batch.skipped_reasons.end());
    const int64_t keep = static_cast<int64_t>(std::min<uint64_t>(batch.size, mine - std::min(mine, out.samples)));
    if (keep == 0) continue;
    Status evaluated = CatchTorch("evaluation", [&] {
      torch::Tensor logits = forward(InputTensor(batch, options.channels_last)).narrow(0, 0, keep);
      torch::Tensor target = TargetTensor(batch).narrow(0, 0, keep);
      if (batch.value_target) {
        target = target.to(torch::kFloat64);
        const torch::Tensor error = logits.reshape({-1}).to(torch::kFloat64) - target;
        out.squared_error_sum += (error * error).sum().item<double>();
        out.absolute_error_sum += error.abs().sum().item<double>();
        out.target_sum += target.sum().item<double>();
        out.target_squared_sum += (target * target).sum().item<double>();
        return;
      }
      out.loss_sum += torch::nll_loss(torch::log_softmax(logits, 1), target, {}, at::Reduction::Sum).item<double>();
      out.correct += static_cast<uint64_t>(logits.argmax(1).eq(target).sum().item<int64_t>());
    });
    if (!evaluated.ok()) {
      return evaluated.WithContext("split '" + options.split + "', a batch of " + std::to_string(batch.size));
    }
    out.samples += static_cast<uint64_t>(keep);
    HeartbeatBeat();  // a long evaluation is not a hang
  }
  return out;
}

RegressionFigures RegressionFiguresOf(const EvalResult& sums, double target_std) {
  RegressionFigures f;
  const double n = static_cast<double>(sums.samples);
  if (n <= 0) return f;
  f.loss = sums.squared_error_sum / n / (target_std * target_std);
  f.rmse = std::sqrt(sums.squared_error_sum / n);
  f.mae = sums.absolute_error_sum / n;
  const double deviations = sums.target_squared_sum - sums.target_sum * sums.target_sum / n;
  f.r2 = deviations > 1e-12 * std::max(1.0, sums.target_squared_sum) ? 1 - sums.squared_error_sum / deviations : 0;
  return f;
}

StatusOr<EvalResult> EvaluateModule(const DbReader& db, const DataConfig& data, const Workload& workload,
                                    torch::jit::Module& module, torch::Tensor* first) {
  const LoaderOptions options = EvalLoaderOptions(data, workload, /*channels_last=*/false);
  const ForwardFn forward = ModuleForward(module);
  return EvaluateForward(db, options, [&](const torch::Tensor& x) {
    if (first != nullptr && !first->defined()) *first = x.clone();
    return forward(x);
  });
}

StatusOr<EvalResult> Evaluate(const DbReader& db, LoaderOptions options, Classifier& model, const Precision& precision,
                              int rank, int world) {
  torch::NoGradGuard no_grad;
  model.eval();
  StatusOr<EvalResult> out = EvaluateForward(
      db, options, [&](const torch::Tensor& input) { return precision.Forward(model, input); }, rank, world);
  model.train();
  return out;
}

}  // namespace granary
