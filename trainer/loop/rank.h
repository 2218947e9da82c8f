// One rank's run: a Loader feeds this rank's part of each epoch, each
// optimizer step is a Step (loop/step.h) whose gradients GradientSync
// averages over ranks, and the ranks evaluate a share each after each epoch.
// With data.probe_s (train --tune's measurement) it trains only long enough
// to time the steady state and returns one report of that window. RunRank
// blocks for the whole run; call it once per process (launch/launch.h starts
// the processes).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/db.h"
#include "store/status.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/config/workload.h"
#include "trainer/report/observer.h"

namespace granary {

// A run as this process resolved it, once: its config (validated, with the
// db's choices filled in: input field, model, eval split), the db opened,
// and what the db feeds the model.
struct ResolvedRun {
  TrainConfig config;
  std::shared_ptr<const DbReader> db;
  Workload workload;
};

// Opens config.data.db and resolves the workload (ResolveWorkload) into the
// config; the db's error naming it otherwise.
StatusOr<ResolvedRun> ResolveRun(TrainConfig config);

// Runs rank `rank` of `run` (its rendezvous set when ranks > 1), telling
// `observer` as it goes. `resumed`: the checkpoint
// config.checkpoint.resume names, already read and checked (ResolveResume);
// read here if not given.
StatusOr<std::vector<EpochReport>> RunRank(const ResolvedRun& run, int rank, RunObserver& observer,
                                           std::optional<Checkpoint> resumed = std::nullopt);

}  // namespace granary
