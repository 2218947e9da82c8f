// Evaluation of a model over a whole split: mean loss and accuracy. Runs on
// the calling thread (with its own loader), in eval mode and without grad.
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

// Wraps a Batch's buffers as tensors without copying; valid while the Batch
// is untouched. A channels-last batch (N x H x W x C in memory) comes back as
// an N x C x H x W tensor with channels-last strides.
torch::Tensor InputTensor(Batch& batch, bool channels_last = false);
torch::Tensor TargetTensor(Batch& batch);

}  // namespace granary
