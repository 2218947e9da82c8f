// Whole passes over a split besides training: evaluation of a model (mean
// loss and accuracy), and the per-feature statistics a feature-vector model
// standardises with. Run on the calling thread, each with its own loader.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/script.h>

#include "loader/loader.h"
#include "trainer/config/config.h"
#include "trainer/config/workload.h"
#include "trainer/loop/loader_options.h"
#include "trainer/models/precision.h"
#include "trainer/models/registry.h"

namespace granary {

struct EvalResult {
  double loss_sum = 0;  // summed over the samples
  uint64_t correct = 0;
  uint64_t samples = 0;
};

// Logits (N x classes) of an input batch.
using ForwardFn = std::function<torch::Tensor(const torch::Tensor& input)>;

// Evaluate, of any forward: a TorchScript module, an INT8 one. The caller
// holds the grad mode and the model's eval mode.
StatusOr<EvalResult> EvaluateForward(const DbReader& db, LoaderOptions options, const ForwardFn& forward, int rank = 0,
                                     int world = 1);

// Evaluates rank `rank`'s share of `options.split` (of `world` ranks: every
// sample is evaluated by exactly one rank, in order, unaugmented; options'
// sampler and augmentation are overridden). Sum the ranks' results for the
// split's. Errors from the loader or LibTorch come back as Status.
StatusOr<EvalResult> Evaluate(const DbReader& db, LoaderOptions options, Classifier& model, const Precision& precision,
                              int rank = 0, int world = 1);

// A TorchScript classifier's forward; `module` must outlive it.
ForwardFn ModuleForward(torch::jit::Module& module);

// `module` on all of `data.eval_split`, in batches of kEvalBatchSize, the
// caller holding the grad mode; `*first` (if not null and undefined) becomes
// a copy of the first input batch (what InferenceRates times).
StatusOr<EvalResult> EvaluateModule(const DbReader& db, const DataConfig& data, const Workload& workload,
                                    torch::jit::Module& module, torch::Tensor* first = nullptr);

// Inference samples/s of each of `models` on `batch`: one warm-up forward
// each (oneDNN builds its kernels on the first call), then five forwards
// each, the models alternated (a noisy machine slows them alike), the
// median of each. Exceptions from the models propagate.
std::vector<double> InferenceRates(const std::vector<ForwardFn>& models, const torch::Tensor& batch);

struct InputStatistics {
  torch::Tensor mean, stddev;  // float64, one value per input element
};

// Mean and (population) standard deviation of each input element over
// `options.split`, read in order, unaugmented. A constant element gets
// stddev 1, so standardising leaves it at 0. InvalidArgument for an empty split.
StatusOr<InputStatistics> ComputeInputStatistics(const DbReader& db, LoaderOptions options);

// Wraps a Batch's buffers as tensors without copying; valid while the Batch
// is untouched. A channels-last batch (N x H x W x C in memory) comes back as
// an N x C x H x W tensor with channels-last strides.
torch::Tensor InputTensor(Batch& batch, bool channels_last = false);
torch::Tensor TargetTensor(Batch& batch);

}  // namespace granary
