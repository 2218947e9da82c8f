#include "trainer/eval/evaluate.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "trainer/launch/heartbeat.h"
#include "trainer/loop/batch_tensors.h"
#include "trainer/loop/loader_options.h"
#include "trainer/torch_guard.h"

namespace granary {
namespace {

// Adds how many of `values` (class indices below `classes`) are each class to `counts`.
void AddCounts(const torch::Tensor& values, int64_t classes, std::vector<uint64_t>* counts) {
  counts->resize(static_cast<size_t>(classes));
  const torch::Tensor bins = torch::bincount(values.to(torch::kLong), {}, classes).to(torch::kLong).contiguous();
  const int64_t* n = bins.data_ptr<int64_t>();
  for (int64_t c = 0; c < std::min<int64_t>(classes, bins.numel()); ++c) (*counts)[c] += static_cast<uint64_t>(n[c]);
}

}  // namespace

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
      const torch::Tensor answered = logits.argmax(1), right = answered.eq(target);
      out.correct += static_cast<uint64_t>(right.sum().item<int64_t>());
      const int64_t classes = logits.size(1);
      AddCounts(target, classes, &out.class_samples);
      AddCounts(answered, classes, &out.class_predicted);
      AddCounts(target.masked_select(right), classes, &out.class_correct);
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

ClassFigures ClassFiguresOf(const EvalResult& sums) {
  ClassFigures f;
  const size_t classes = sums.class_samples.size();
  uint64_t total = 0, answers = 0, smallest = 0;
  int present = 0;
  double recalls = 0;
  for (size_t c = 0; c < classes; ++c) {
    const uint64_t n = sums.class_samples[c];
    const uint64_t answered = c < sums.class_predicted.size() ? sums.class_predicted[c] : 0;
    total += n;
    answers += answered;
    if (f.most_answered < 0 || answered > sums.class_predicted[f.most_answered]) f.most_answered = c;
    if (n == 0) {
      f.recall.push_back(std::nan(""));
      continue;
    }
    f.recall.push_back(static_cast<double>(sums.class_correct[c]) / static_cast<double>(n));
    recalls += f.recall.back();
    ++present;
    if (f.largest < 0 || n > sums.class_samples[f.largest]) f.largest = c;
    smallest = smallest == 0 ? n : std::min(smallest, n);
  }
  if (present == 0) return f;
  f.balanced_accuracy = recalls / present;
  f.imbalanced = present >= 2 && sums.class_samples[f.largest] >= 2 * smallest;
  f.largest_share = static_cast<double>(sums.class_samples[f.largest]) / static_cast<double>(total);
  f.most_answered_share =
      answers == 0 ? 0 : static_cast<double>(sums.class_predicted[f.most_answered]) / static_cast<double>(answers);
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
