// The epoch's evaluation, a hook of every rank after every epoch (a
// collective): each rank evaluates its share of the eval split, in order,
// and the ranks' sums give the report's test loss and accuracy. Used when
// the run names an eval split and trains on real data. Training thread only.
#pragma once

#include <memory>

#include "trainer/features/feature.h"

namespace granary {

std::unique_ptr<Feature> MakeEvaluationFeature();

}  // namespace granary
