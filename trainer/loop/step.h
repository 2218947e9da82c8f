// One optimizer step of one rank: an accumulation group of micro-batches,
// forward and backward each, the gradient sync around the group's last
// backward, then the optimizer step. The rank's loop (loop/rank.cc) decides
// which batches and when, and what follows a step (reports, checkpoints, the
// tune probe); tests call Step itself. Training thread only.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"

namespace granary {

class Classifier;
class Comm;
class GradientSync;
class Precision;

// What a batch's loss is: cross-entropy over classes, with label smoothing
// as PyTorch's CrossEntropyLoss has it ((1 - e) x NLL + e x the mean over
// classes of -log p); or, for a regression target (target_std > 0), the mean
// squared error in units of the target's std (the model's one output is in
// the target's units: a loss of 1 is what predicting the mean scores).
struct Objective {
  double label_smoothing = 0;
  torch::Tensor class_weights;  // per class (--class-weights balanced); undefined: every class weighs 1
  double target_std = 0;
};

// What a step works on; every pointer outlives the step.
struct StepParts {
  Classifier* net = nullptr;
  const Precision* precision = nullptr;
  torch::optim::Optimizer* optimizer = nullptr;
  // Data parallelism; both null when the ranks train apart (--synthetic).
  GradientSync* sync = nullptr;        // the gradients' mean over ranks, after the group's last backward
  Comm* comm = nullptr;                // broadcasts rank 0's `buffers` before each group (DDP's rule)
  std::vector<torch::Tensor> buffers;  // BatchNorm statistics and the like
  Objective objective;
  uint64_t seed = 0;  // with `rank` and the step, dropout's random stream (StepSeed)
  int rank = 0;
};

struct MicroBatch {
  torch::Tensor input, target;
};

// Fills *batch with the next micro-batch (valid until the next call); false
// when there is none.
using NextMicroBatch = std::function<StatusOr<bool>(MicroBatch* batch)>;

struct StepResult {
  double loss_sum = 0;         // training loss x samples, summed over the micro-batches
  double samples = 0;
  double compute_seconds = 0;  // the step's own time: waiting for data and for the sync left out
};

// Optimizer step `step` (0-based over the run) at learning rate `lr`, over
// the next `micro_batches` micro-batches of `next`: gradients zeroed, the
// buffers broadcast, dropout seeded from (seed, rank, step), each
// micro-batch's loss / micro_batches backpropagated (the sync begun before
// the last backward and finished after it), then the optimizer step.
// FailedPrecondition if a loss is not finite (the run diverged, naming the
// step) or `next` ends inside the group; a LibTorch or sync error as Status.
StatusOr<StepResult> Step(const StepParts& parts, int64_t step, int micro_batches, double lr,
                          const NextMicroBatch& next);

// The seed of rank `rank`'s random stream (dropout) at optimizer step `step`:
// SplitMix64's mix of the three, so a resumed run draws what an
// uninterrupted one would have. Non-negative as an int64 (manual_seed).
uint64_t StepSeed(uint64_t seed, int rank, int64_t step);

// The batch's loss (Objective) of the model's `output`.
torch::Tensor TrainingLoss(const torch::Tensor& output, const torch::Tensor& target, const Objective& objective);

}  // namespace granary
