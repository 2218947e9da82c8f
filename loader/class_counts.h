// How many samples of each class a split holds: one pass over its label
// field (every record read and checked). What `train --class-weights
// balanced` and granary.class_weights weigh the loss by.
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

}  // namespace granary
