// The run's features (feature.h), registered in one list in the order their
// hooks run, and the hooks of one rank assembled from them.
#pragma once

#include "base/status.h"
#include "trainer/features/feature.h"
#include "trainer/loop/hook.h"

namespace granary {

// Every feature, in the order of its hook's every call.
const Features& AllFeatures();

// The config's bounds on a machine of `cores` cores (TrainConfig::Validate),
// then each feature's for its own flags (Feature::Validate): the first
// flag out of bounds, named.
Status ValidateRun(const TrainConfig& config, int cores);

// Each feature's hook on this rank (state.rank), in that order; in train
// --tune's measurement (data.probe_s > 0) only the features that measure.
StatusOr<RunHooks> AssembleHooks(RankState& state);

}  // namespace granary
