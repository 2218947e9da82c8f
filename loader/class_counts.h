// How many samples of each class a split holds: one pass over its label
// field (every record read and checked); and the weights `train
// --class-weights balanced` and granary.class_weights weigh the loss by:
// each class by the inverse of its share, as scikit-learn's
// class_weight="balanced" does, so that a class of 5% of the samples counts
// in the loss as much as one of 95%.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/db.h"

namespace granary {

// The samples of each class 0..classes-1 in `split` of `db`, read from its
// label field `label`. Errors name the record (a corrupt one, unless
// `skip_corrupt`: then it is not counted; a label outside 0..classes-1).
StatusOr<std::vector<uint64_t>> ClassCounts(const DbReader& db, const std::string& split, const std::string& label,
                                            int64_t classes, bool skip_corrupt);

// Weights from `counts`: samples / (classes with samples x count); 0 for a
// class without samples (it never appears in the loss).
std::vector<float> BalancedWeights(const std::vector<uint64_t>& counts);

}  // namespace granary
