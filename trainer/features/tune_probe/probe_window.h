// train --tune's measurement window (data.probe_s > 0), a hook of every
// rank after every optimizer step: the first kWarmupSteps steps are not
// timed (first-touch allocation, oneDNN's kernel choice); the next
// kCalibrationSteps are, and the ranks agree (their mean) how many more
// steps fill probe_s; then the window closes, on every rank at the same
// step, training stops, and the run's one report is the window's, measured
// as an epoch is (loop/epoch_figures.h). A probe run trains until then
// (however many epochs) and runs only the features that measure
// (Feature::InMeasurement): no evaluation, checkpoint or saved model.
// Training thread only.
#pragma once

#include <cstdint>
#include <memory>

#include "trainer/features/feature.h"

namespace granary {

inline constexpr int64_t kProbeWarmupSteps = 2, kProbeCalibrationSteps = 3;

std::unique_ptr<Feature> MakeTuneProbeFeature();

}  // namespace granary
