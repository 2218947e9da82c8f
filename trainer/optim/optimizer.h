// The optimizers `train --optimizer` offers, built from an OptimConfig over a
// model's parameters: LibTorch's SGD (momentum, Nesterov), Adam and AdamW,
// with one-pass steps (trainer/optim/fused_optimizer.h).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/config/choices.h"
#include "trainer/config/config.h"

namespace granary {

// InvalidArgument for an unknown name; `config` resolved (no defaults left).
StatusOr<std::unique_ptr<torch::optim::Optimizer>> CreateOptimizer(const OptimConfig& config,
                                                                   const std::vector<torch::Tensor>& params);

// Tensors of a parameter's size the optimizer keeps for each parameter (its
// state in a checkpoint): Adam's and AdamW's two moments, SGD's momentum.
int OptimizerStateSlots(const OptimConfig& config);

}  // namespace granary
