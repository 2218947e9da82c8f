// A whole `train` run from its TrainConfig: as the launcher (rank < 0) it
// checks the config and the db, then runs the ranks (trainer/launch.h) and
// waits; as a rank it trains (trainer/trainer.h) and reports
// (trainer/report.h). Errors are printed as one line; returns the exit status.
#pragma once

#include <string>
#include <vector>

#include "trainer/config.h"

namespace granary {

// `argv`: the command line the ranks are started with (plus "--rank R
// --port P --layout JSON"). `json`: rank 0 prints one JSON object instead of
// text. `layout_json`: a rank's layout, as the launcher planned it ("" in the
// launcher, which plans it).
int RunTrain(TrainConfig config, int rank, bool json, const std::vector<std::string>& argv,
             const std::string& layout_json);

}  // namespace granary
