// A rank's part in the run's checkpoints (the files: trainer/checkpoint/checkpoint.h),
// a hook of every rank: after every --checkpoint-every steps (inside an
// epoch) and after every epoch. At a checkpoint every rank's epoch-so-far
// loss is gathered (a collective: every rank saves at the same step), then
// rank 0 writes in the background, so its peers never wait for its disk. One
// due while the one before is still being written is skipped, with a note;
// the run's last is kept and written after the run's last collective
// (AfterRun). A stop signal (stop_signal.h) noted by any rank stops them all
// after the same step (within about a fifth of a second), whose checkpoint is the
// run's last. Training thread only.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <optional>
#include <string>

#include "base/status.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/comm/compress.h"
#include "trainer/comm/gradient_sync.h"
#include "trainer/config/config.h"
#include "trainer/features/feature.h"
#include "trainer/loop/hook.h"
#include "trainer/report/observer.h"

namespace granary {

class Comm;

// The feature: its directory checked with every output before any rank
// starts, and the checkpointer below on every rank (real data only).
std::unique_ptr<Feature> MakeCheckpointsFeature();

class RunCheckpointer : public RunHook {
 public:
  // Everything passed must outlive the checkpointer. `run`: the id of the run
  // that owns config.checkpoint.dir (rank 0 names its files with it).
  RunCheckpointer(const TrainConfig& config, std::string db_content_hash, std::string run, int rank, Comm& comm,
                  const torch::nn::Module& net, const torch::optim::Optimizer& optimizer, RunObserver& observer);
  RunCheckpointer(const RunCheckpointer&) = delete;
  RunCheckpointer& operator=(const RunCheckpointer&) = delete;

  // A checkpoint when one is due inside an epoch; the error of a finished
  // background write.
  StatusOr<Flow> AfterStep(RankState& state, const StepEvent& step) override;
  // The epoch's end; the run's last epoch is kept for AfterRun.
  StatusOr<Flow> AfterEpoch(RankState& state, const EpochEvent& epoch, EpochReport* report) override;
  // Finish: no collective may follow.
  Status AfterRun(RankState& state, std::vector<EpochReport>* reports) override;

 private:
  // Whether any rank has been asked to stop (a collective, after each
  // epoch, and after every `agree_every_` steps): then SetAgreedStop has the
  // signal. `step_s`: rank 0's mean step time, which the ranks then agree
  // on too, or 0.
  StatusOr<bool> AgreeOnStop(double step_s = 0);
  // After a step: whether the ranks agree on a stop now. Every step at first;
  // from kCalibrateTo steps on, once every agree_every_ steps (rank 0's step
  // time from kCalibrateFrom to kCalibrateTo, agreed: the same count on
  // every rank), about every kAgreeEvery_s: a tiny collective after every
  // step of a small model (the CSV's MLP: 4 ms a step) cost 8% of its
  // speed, and every 8 steps still 4%. A stop then waits at most that long,
  // well inside the 1 s mpirun leaves its ranks between SIGTERM and SIGKILL.
  StatusOr<bool> StopAgreedAfterStep();
  // The checkpoint of position `at` (its world and losses filled in here):
  // this rank's epoch-so-far `loss_sum` and `samples`, and its gradient
  // compression's state (every rank's goes to rank 0). `final`: the run's
  // last, written by Finish.
  Status Save(RunPosition at, double loss_sum, double samples, const CompressionState& compression,
              bool final = false);
  // The error of a background write that has finished, so a failed
  // checkpoint is reported at the next step, not the next checkpoint; OK
  // while a write runs (and on ranks other than 0).
  Status Failed();
  // Rank 0: waits for its disk (beating its heart, so the launcher does not
  // take a slow disk for a hang) and writes the run's last checkpoint. No
  // collective may follow. The error of any background write.
  Status Finish();

  const TrainConfig& config_;
  const std::string db_content_hash_, run_;
  const int rank_;
  Comm& comm_;
  const torch::nn::Module& net_;
  const torch::optim::Optimizer& optimizer_;
  RunObserver& observer_;
  CheckpointWriter writer_;
  std::optional<CheckpointHeader> final_;
  SavedCompression final_compression_;
  static constexpr int64_t kCalibrateFrom = 5, kCalibrateTo = 25, kMaxAgreeEvery = 1000;
  static constexpr double kAgreeEvery_s = 0.2;
  int64_t steps_ = 0;  // steps this process has taken
  int64_t agree_every_ = 1;
  std::chrono::steady_clock::time_point calibration_start_;
};

}  // namespace granary
