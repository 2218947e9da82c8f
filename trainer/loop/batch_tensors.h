// A loader's Batch as tensors, for training, evaluation and calibration.
#pragma once

#include <torch/torch.h>

#include "loader/loader.h"

namespace granary {

// Wraps a Batch's buffers as tensors without copying; valid while the Batch
// is untouched. A channels-last batch (N x H x W x C in memory) comes back as
// an N x C x H x W tensor with channels-last strides.
torch::Tensor InputTensor(Batch& batch, bool channels_last = false);
torch::Tensor TargetTensor(Batch& batch);

}  // namespace granary
