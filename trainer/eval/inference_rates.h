// How fast models infer, timed against each other on the calling thread.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "trainer/eval/forward.h"

namespace granary {

// Inference samples/s of each of `models` on `batch`: one warm-up forward
// each (oneDNN builds its kernels on the first call), then five forwards
// each, the models alternated (a noisy machine slows them alike), the
// median of each. Exceptions from the models propagate.
std::vector<double> InferenceRates(const std::vector<ForwardFn>& models, const torch::Tensor& batch);

}  // namespace granary
