// The step loop of one rank: a Loader feeds this rank's part of each epoch,
// the model (trainer/models) makes a step, GradientSync averages gradients
// over ranks, and the ranks evaluate a share each after each epoch. With
// data.probe_s (train --tune's measurement) it trains only long enough to
// time the steady state and returns one report of that window. RunRank blocks for the
// whole run; call it once per process (trainer/launch.h starts the processes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/status.h"
#include "trainer/checkpoint.h"
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
  double peak_rss_mb = 0;     // the ranks' peak resident memory so far, summed (MiB)
  bool evaluated = false;     // when the config names an eval split (every rank a share)
  double test_loss = 0;
  double test_accuracy = 0;
  uint64_t test_samples = 0;
  std::string weights_hash;   // rank 0: XXH64 over every parameter's values, "xxh64:..."
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

// Rank 0's view of the step just taken: for progress lines and metrics.
struct StepReport {
  int epoch = 0;               // 1-based
  uint64_t step = 0;           // optimizer steps so far in the epoch
  uint64_t steps = 0;          // optimizer steps in the epoch
  int64_t global_step = 0;     // optimizer steps so far in the run
  double loss = 0;             // rank 0's training loss of this step
  double epoch_loss = 0;       // rank 0's training loss, mean over the epoch so far
  double lr = 0;               // the rate of this step
  double samples_per_s = 0;    // over all ranks, the epoch so far (rank 0's rate x ranks)
  double seconds = 0;          // since the epoch started
};

// What a run tells as it goes. RunRank calls it on the training thread;
// Step is called on rank 0 only, after every optimizer step.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void Plan(const EpochPlanReport& plan) = 0;  // once, before the first epoch
  virtual void Step(const StepReport& step) = 0;
  virtual void Epoch(const EpochReport& epoch) = 0;
};

// OK if `config.model` can be built for `workload` (the launcher checks this
// before starting ranks); else InvalidArgument naming the db, the model and
// the shapes.
Status CheckModelFits(const TrainConfig& config, const Workload& workload, int64_t classes);

// Runs rank `rank` of the run `config` (validated by the caller, with its
// rendezvous set when ranks > 1), telling `observer` as it goes. `resumed`:
// the checkpoint config.checkpoint.resume names, already read and checked
// (ResolveResume); read here if not given.
StatusOr<std::vector<EpochReport>> RunRank(const TrainConfig& config, int rank, RunObserver& observer,
                                           std::optional<Checkpoint> resumed = std::nullopt);

}  // namespace granary
