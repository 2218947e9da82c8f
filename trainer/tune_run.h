// train --tune as processes: each candidate's probe started as a run's ranks
// are (launch/launch.h) with its output captured, the table printed, then
// this process replaced by the run in the chosen layout. The measuring and
// choosing is the tuner's (tune/tune.h).
#pragma once

#include "base/environment.h"
#include "trainer/config/config.h"
#include "trainer/config/workload.h"
#include "trainer/run.h"

namespace granary {

// `backend_asked`: --backend was gloo or mpi, not auto (the tuner's to
// choose). Returns an exit status (after --tune-only, or if the tuned run
// could not start); otherwise does not return.
int RunTune(const TrainConfig& config, const Workload& workload, const TuneRequest& request, bool backend_asked,
            bool json, const Environment& env);

}  // namespace granary
