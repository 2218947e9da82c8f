// The step loop of one rank: a Loader feeds this rank's part of each epoch,
// the model (trainer/models) makes a step, GradientSync averages gradients
// over ranks, and the ranks evaluate a share each after each epoch. With
// data.probe_s (train --tune's measurement) it trains only long enough to
// time the steady state and returns one report of that window. RunRank blocks for the
// whole run; call it once per process (trainer/launch.h starts the processes).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/db.h"
#include "store/status.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/observer.h"
#include "trainer/workload.h"

namespace granary {

// OK if `config.model` can be built for `workload` (the launcher checks this
// before starting ranks); else InvalidArgument naming the db, the model and
// the shapes.
Status CheckModelFits(const TrainConfig& config, const Workload& workload, int64_t classes);

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
