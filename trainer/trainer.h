// Data-parallel training of one rank: a Loader feeds this rank's part of each
// epoch, gradients are averaged over ranks through Comm, and rank 0 evaluates.
// RunRank blocks for the whole run; call it once per process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "loader/augment.h"
#include "loader/sampler.h"
#include "store/status.h"

namespace granary {

struct TrainOptions {
  std::string db;
  std::string train_split = "train";
  std::string eval_split = "test";  // "" to skip evaluation
  int rank = 0;
  int world = 2;  // rank processes
  std::string host = "127.0.0.1";
  int port = 0;
  int epochs = 5;
  size_t batch_size = 64;  // global: each rank takes batch_size / world
  double lr = 1e-3;        // Adam
  double dropout = 0.4;
  uint64_t seed = 0;
  int threads = 0;  // intra-op threads of this rank; 0: cores / world
  int loader_threads = 1;
  int prefetch = 4;
  ShuffleMode shuffle = ShuffleMode::kFull;  // of the training split; kBlock for dbs larger than RAM
  bool drop_last = false;      // drop the epoch's tail instead of padding it to equal ranks
  bool skip_corrupt = false;   // skip and count corrupt records (training and evaluation)
  AugmentOptions augment;      // training batches only
  float mean = 0.0f;  // input normalisation after scaling to [0, 1]
  float stddev = 1.0f;
};

struct EpochReport {
  int epoch = 0;  // 1-based
  double train_loss = 0;      // mean over all ranks' samples
  double seconds = 0;         // training part of the epoch
  double samples_per_s = 0;   // over all ranks
  double stall_fraction = 0;  // rank 0's time waiting for data / epoch time
  double comm_fraction = 0;   // rank 0's time in gradient all-reduce / epoch time
  double queue_depth = 0;     // rank 0's mean number of ready batches at each step
  bool evaluated = false;
  double eval_loss = 0;
  double eval_accuracy = 0;
  uint64_t eval_samples = 0;
};

// What every rank reads per epoch, known before training starts.
struct EpochPlanReport {
  uint64_t samples_per_rank = 0;
  uint64_t padded = 0;   // samples read twice per epoch so ranks are equal
  uint64_t dropped = 0;  // samples not read per epoch (drop_last)
};

// Runs the training of one rank. `on_start` is called once before the first
// epoch, `on_epoch` after each epoch (with evaluation figures on rank 0 only).
StatusOr<std::vector<EpochReport>> RunRank(const TrainOptions& options,
                                           const std::function<void(const EpochPlanReport&)>& on_start,
                                           const std::function<void(const EpochReport&)>& on_epoch);

// Threads per rank when options.threads is 0.
int DefaultThreadsPerRank(int world);

}  // namespace granary
