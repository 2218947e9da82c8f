// The per-feature statistics a feature-vector model standardises its input
// with, from one pass over the training split on the calling thread.
#pragma once

#include <torch/torch.h>

#include "base/status.h"
#include "loader/loader.h"

namespace granary {

struct InputStatistics {
  torch::Tensor mean, stddev;  // float64, one value per input element
  torch::Tensor missing;       // int64, per element: the samples where it is NaN
};

// Mean and (population) standard deviation of each input element over
// `options.split`, read in order, unaugmented, over the values present: a
// NaN (a CSV value prep stored with --missing nan) is left out, and counted.
// A constant element (or one never present) gets stddev 1, so standardising
// leaves it at 0. InvalidArgument for an empty split.
StatusOr<InputStatistics> ComputeInputStatistics(const DbReader& db, LoaderOptions options);

// The same figures from the statistics the build recorded in the manifest
// for `options.split`'s input field (as their mean, deviation and missing
// counts), without a pass; ComputeInputStatistics where it recorded none.
StatusOr<InputStatistics> InputStatisticsOf(const DbReader& db, const LoaderOptions& options);

}  // namespace granary
