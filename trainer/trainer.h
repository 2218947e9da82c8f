// The step loop of one rank: a Loader feeds this rank's part of each epoch,
// the model (trainer/models) makes a step, GradientSync averages gradients
// over ranks, and rank 0 evaluates after each epoch. RunRank blocks for the
// whole run; call it once per process (trainer/launch.h starts the processes).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "store/status.h"
#include "trainer/config.h"
#include "trainer/workload.h"

namespace granary {

struct EpochReport {
  int epoch = 0;  // 1-based
  double train_loss = 0;      // mean over all ranks' samples
  double lr = 0;              // the learning rate of the epoch's last step
  double seconds = 0;         // training part of the epoch
  double samples_per_s = 0;   // over all ranks
  double stall_fraction = 0;  // rank 0's time waiting for data / epoch time
  double comm_fraction = 0;     // rank 0's time blocked waiting for the gradient sync / epoch time
  double compute_fraction = 0;  // rank 0's forward, backward and optimizer step (sync wait excluded) / epoch time
  double queue_depth = 0;     // rank 0's mean number of ready batches at each step
  bool evaluated = false;     // rank 0 only, when the config names an eval split
  double test_loss = 0;
  double test_accuracy = 0;
  uint64_t test_samples = 0;
};

// What every rank reads per epoch, known before training starts.
struct EpochPlanReport {
  uint64_t samples_per_rank = 0;
  uint64_t padded = 0;   // samples read twice per epoch so ranks are equal
  uint64_t dropped = 0;  // samples not read per epoch (drop_last)
  int threads_per_rank = 0;
  std::string model;        // resolved name
  uint64_t parameters = 0;  // trainable values
  double peak_lr = 0;       // after --lr-scaling
};

// OK if `config.model` can be built for `workload` (the launcher checks this
// before starting ranks); else InvalidArgument naming the db, the model and
// the shapes.
Status CheckModelFits(const TrainConfig& config, const Workload& workload, int64_t classes);

// Runs rank `rank` of the run `config` (validated by the caller, with
// config.dist.port set when ranks > 1). `on_start` is called once before the
// first epoch, `on_epoch` after each epoch.
StatusOr<std::vector<EpochReport>> RunRank(const TrainConfig& config, int rank,
                                           const std::function<void(const EpochPlanReport&)>& on_start,
                                           const std::function<void(const EpochReport&)>& on_epoch);

}  // namespace granary
