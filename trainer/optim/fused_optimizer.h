// LibTorch's SGD, Adam and AdamW with the step done in one pass per
// parameter. LibTorch 1.13's C++ step runs several whole-tensor operations per
// parameter (Adam: seven, each a pass over memory, some allocating); these
// read and write each element once, split over the intra-op threads. Same
// options, same per-parameter state objects (so saving and loading work as
// LibTorch's), same results to float rounding (tests/trainer/optimizer_test.cc).
// Parameters must be dense float32 tensors; their gradients may have any
// strides. Not thread-safe, like any torch::optim::Optimizer.
#pragma once

#include <torch/torch.h>

namespace granary {

class FusedSGD : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace granary
