// --resume as one unit: the checkpoint a run continues, read and parsed
// once, restores everything a rank resumes with: the model's weights (a
// pruned model's shapes too), the optimizer's state, the gradient
// compression's state, and where the rank starts (RankStart: the epoch, the
// loader's position in it, the step, this rank's share of the epoch's loss
// so far). The rule for another world size lives here alone: each rank its
// own state when the world is the same; otherwise the compression's state
// averaged and the epoch's loss so far all on rank 0. Training thread only.
#pragma once

#include <memory>

#include "base/status.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/comm/gradient_sync.h"
#include "trainer/config/config.h"
#include "trainer/loop/hook.h"
#include "trainer/models/registry.h"
#include "trainer/report/observer.h"

namespace granary {

class ResumePoint {
 public:
  // `from`, already read and checked (ResolveResume), its payload parsed;
  // Corruption naming the file otherwise.
  static StatusOr<ResumePoint> Open(Checkpoint from);

  // The saved weights into `net`, just built at full size; its layers follow
  // the saved shapes (a pruned model's).
  Status RestoreModel(Classifier& net) const;
  Status RestoreOptimizer(torch::optim::Optimizer& optimizer) const;
  // The gradient compression continues from the saved state: this rank's
  // own, or on another world size the mean of the saved ranks' (the error
  // the ranks still owe the mean gradient is then the same); rank 0 notes
  // that.
  Status RestoreCompression(int rank, int world, GradientSync& sync, RunObserver& observer) const;
  // Where rank `rank` of `world` starts.
  RankStart StartOf(int rank, int world) const;
  // Rank 0's notes before the first step: where the run continues and what
  // changed since the checkpoint (the world's size, an epoch count already
  // reached).
  void Tell(const TrainConfig& now, RunObserver& observer) const;

 private:
  ResumePoint(Checkpoint from, CheckpointArchive archive) : from_(std::move(from)), archive_(std::move(archive)) {}

  Checkpoint from_;
  CheckpointArchive archive_;
};

}  // namespace granary
