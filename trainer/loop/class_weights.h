// --class-weights balanced: the training loss weighs each class by the
// inverse of its share of the train split, as scikit-learn's
// class_weight="balanced" does (samples / (classes x the class's samples)),
// so that a class of 5% of the samples counts in the loss as much as one of
// 95%. The counts come from one pass over the split's labels (ClassCounts).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "loader/class_counts.h"

namespace granary {

// float32 weights from `counts`: samples / (classes with samples x count);
// 0 for a class without samples (it never appears in the loss).
torch::Tensor BalancedClassWeights(const std::vector<uint64_t>& counts);

}  // namespace granary
