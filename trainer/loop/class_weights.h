// --class-weights balanced: the training loss weighs each class by the
// inverse of its share of the train split, as scikit-learn's
// class_weight="balanced" does (samples / (classes x the class's samples)),
// so that a class of 5% of the samples counts in the loss as much as one of
// 95%. The counts come from one pass over the split's labels.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/db.h"

namespace granary {

// The samples of each class 0..classes-1 in `split` of `db`, read from its
// label field `label`. Errors name the record (a corrupt one, unless
// `skip_corrupt`: then it is not counted; a label out of range).
StatusOr<std::vector<uint64_t>> ClassCounts(const DbReader& db, const std::string& split, const std::string& label,
                                            int64_t classes, bool skip_corrupt);

// float32 weights from `counts`: samples / (classes with samples x count);
// 0 for a class without samples (it never appears in the loss).
torch::Tensor BalancedClassWeights(const std::vector<uint64_t>& counts);

}  // namespace granary
