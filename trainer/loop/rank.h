// The engine of one rank's run: the process set up for it (its thread
// pools, its allocator) and the loop that trains its epochs, calling the
// run's hooks (loop/hook.h). It knows no feature. A rank's run is assembled
// by run_rank.h; launch/launch.h starts the processes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/environment.h"
#include "base/status.h"
#include "store/db.h"
#include "trainer/config/config.h"
#include "trainer/config/workload.h"
#include "trainer/report/observer.h"

namespace granary {

// A run as this process resolved it, once: its config (validated, with the
// db's choices filled in: input field, model, eval split), the db opened,
// and what the db feeds the model.
struct ResolvedRun {
  TrainConfig config;
  Environment env;  // the process's, read once at start (main)
  std::shared_ptr<const DbReader> db;
  Workload workload;
};

// Opens config.data.db and resolves the workload (ResolveWorkload) into the
// config; the db's error naming it otherwise.
StatusOr<ResolvedRun> ResolveRun(TrainConfig config, Environment env);

// This process as a rank needs it: `config`'s threads per rank in its
// LibTorch pools, and freed memory kept for the next step (unless `env`
// sets glibc's MALLOC_* thresholds).
void SetUpRankProcess(const TrainConfig& config, const Environment& env);

class TrainBatches;
struct RankState;
class RunHook;

// Trains `state`'s epochs from state.start on `batches`, calling `hooks` in
// order at each point (loop/hook.h); blocks for the whole run. The epochs'
// reports, as the hooks left them.
StatusOr<std::vector<EpochReport>> TrainRank(RankState& state, TrainBatches& batches,
                                             std::vector<std::unique_ptr<RunHook>> hooks);

}  // namespace granary
