// Whole passes over a split besides training: evaluation of a model (mean
// loss and accuracy), and the per-feature statistics a feature-vector model
// standardises with. Run on the calling thread, each with its own loader.
#pragma once

#include <cstdint>

#include "loader/loader.h"
#include "trainer/models/registry.h"
#include "trainer/precision.h"

namespace granary {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  uint64_t samples = 0;
};

// Reads `options.split` in order (options' sampler and augmentation are
// overridden: every sample once, none augmented). Errors from the loader or
// LibTorch come back as Status.
StatusOr<EvalResult> Evaluate(const DbReader& db, LoaderOptions options, Classifier& model, const Precision& precision);

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
