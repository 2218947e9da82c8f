// --report: one self-contained HTML page of a finished run (inline SVG charts,
// no scripts, nothing fetched): loss, accuracy, samples/s, where the time
// went (compute, sync wait, data stall) and the learning rate per epoch, with
// the run's configuration and layout.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/launch/layout.h"
#include "trainer/report/observer.h"

namespace granary {

// `steps`: rank 0's logged steps (every --log-every), drawn as the fine
// training-loss curve under the per-epoch one.
std::string RenderHtmlReport(const TrainConfig& config, const Layout& layout, const std::vector<EpochReport>& epochs,
                             const std::vector<StepReport>& steps);

}  // namespace granary
