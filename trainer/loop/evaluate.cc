#include "trainer/loop/evaluate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "store/json_text.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/torch_guard.h"

namespace granary {

torch::Tensor InputTensor(Batch& b, bool channels_last) {
  torch::Tensor t = torch::from_blob(b.input.data(), b.input_shape, torch::kFloat32);
  return channels_last ? t.permute({0, 3, 1, 2}) : t;
}

torch::Tensor TargetTensor(Batch& b) {
  return torch::from_blob(b.target.data(), {static_cast<int64_t>(b.size)}, torch::kInt64);
}

namespace {

// `options` made to read its split once, in order, unaugmented.
LoaderOptions WholeSplit(LoaderOptions options) {
  options.sampler = SamplerOptions{};
  options.sampler.mode = ShuffleMode::kNone;
  options.augment = AugmentOptions{};
  return options;
}

}  // namespace

StatusOr<InputStatistics> ComputeInputStatistics(const DbReader& db, LoaderOptions options) {
  options = WholeSplit(options);
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

StatusOr<EvalResult> EvaluateForward(const DbReader& db, LoaderOptions options, const ForwardFn& forward, int rank,
                                     int world) {
  options = WholeSplit(options);
  options.sampler.rank = rank;
  options.sampler.world = world;
  StatusOr<std::unique_ptr<Loader>> loader = Loader::Create(db, options);
  if (!loader.ok()) return loader.status().WithContext("evaluation loader");
  loader.value()->StartEpoch(0);
  const uint64_t mine = loader.value()->sampler().unpadded_samples();  // padding is not counted
  EvalResult out;
  Batch batch;
  for (;;) {
    StatusOr<bool> more = loader.value()->Next(&batch);
    if (!more.ok()) return more.status();
    if (!more.value()) break;
    for (const std::string& reason : batch.skipped_reasons) {
      std::fprintf(stderr, "train: evaluation: skipped corrupt %s\n", Printable(reason).c_str());
    }
    const int64_t keep = static_cast<int64_t>(std::min<uint64_t>(batch.size, mine - std::min(mine, out.samples)));
    if (keep == 0) continue;
    Status evaluated = CatchTorch("evaluation", [&] {
      torch::Tensor logits = forward(InputTensor(batch, options.channels_last)).narrow(0, 0, keep);
      torch::Tensor target = TargetTensor(batch).narrow(0, 0, keep);
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

ForwardFn ModuleForward(torch::jit::Module& module) {
  return [&module](const torch::Tensor& x) { return module.forward({x}).toTensor(); };
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

std::vector<double> InferenceRates(const std::vector<ForwardFn>& models, const torch::Tensor& batch) {
  constexpr int kTimed = 5;
  torch::NoGradGuard no_grad;
  std::vector<std::vector<double>> seconds(models.size());
  for (int round = -1; round < kTimed; ++round) {  // round -1: the warm-up
    for (size_t m = 0; m < models.size(); ++m) {
      const auto start = std::chrono::steady_clock::now();
      models[m](batch);
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (round >= 0) seconds[m].push_back(took);
    }
    HeartbeatBeat();
  }
  std::vector<double> rates;
  for (std::vector<double>& s : seconds) {
    std::sort(s.begin(), s.end());
    rates.push_back(static_cast<double>(batch.size(0)) / std::max(s[s.size() / 2], 1e-9));
  }
  return rates;
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
