// --stop-at-accuracy A: the run stops after the first evaluation whose test
// accuracy is at or above A, and that epoch's report says how long it took
// (seconds_to_target). A hook of every rank after the evaluation's: the
// accuracy is the ranks' sum, so every rank stops at the same epoch. Rank 0
// notes it, notes a run that ends without reaching it, and gives --json its
// "stop_at_accuracy" result. Refused before any rank starts when the run has
// no eval split. Training thread only.
#pragma once

#include <memory>

#include "trainer/features/feature.h"

namespace granary {

std::unique_ptr<Feature> MakeStopAtAccuracyFeature();

}  // namespace granary
