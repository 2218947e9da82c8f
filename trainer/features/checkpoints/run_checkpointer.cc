#include "trainer/features/checkpoints/run_checkpointer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

#include "base/file.h"
#include "loader/loader.h"
#include "trainer/comm/comm.h"
#include "trainer/features/checkpoints/stop_signal.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/loop/data_parallel.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"
#include "trainer/optim/optimizer.h"

namespace granary {

RunCheckpointer::RunCheckpointer(const TrainConfig& config, std::string db_content_hash, std::string run, int rank,
                                 Comm& comm, const torch::nn::Module& net, const torch::optim::Optimizer& optimizer,
                                 RunObserver& observer)
    : config_(config),
      db_content_hash_(std::move(db_content_hash)),
      run_(std::move(run)),
      rank_(rank),
      comm_(comm),
      net_(net),
      optimizer_(optimizer),
      observer_(observer) {
  CatchStopSignals();
}

namespace {

// Every rank's `state` on rank 0: the shared tensors as they are, each
// rank's own stacked (a collective: the ranks' states have the same names and
// shapes, as their buckets are the same).
StatusOr<SavedCompression> GatherCompression(const CompressionState& state, Comm& comm) {
  SavedCompression saved;
  saved.shared = state.shared;
  for (const auto& [name, tensor] : state.own) {
    std::vector<torch::Tensor> all;
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> gather, comm.AllGatherAsync(tensor, &all));
    GRANARY_RETURN_IF_ERROR(gather->Wait());
    saved.ranks[name] = torch::stack(all);
  }
  return saved;
}

}  // namespace

Status RunCheckpointer::Save(RunPosition at, double loss_sum, double samples, const CompressionState& compression,
                             bool final) {
  // Every rank's row: a sum where only row `rank` is not zero is exact.
  const int world = config_.World();
  torch::Tensor rows = torch::zeros({world, 2}, torch::kFloat64);
  rows[rank_][0] = loss_sum;
  rows[rank_][1] = samples;
  GRANARY_RETURN_IF_ERROR(comm_.AllReduceSum(rows));
  at.world = world;
  for (int r = 0; r < world; ++r) {
    at.loss_sums.push_back(rows[r][0].item<double>());
    at.sample_counts.push_back(rows[r][1].item<double>());
  }
  GRANARY_ASSIGN_OR_RETURN(SavedCompression gathered, GatherCompression(compression, comm_));
  if (rank_ != 0) return Status::OK();
  CheckpointHeader header{config_, db_content_hash_, at, run_};
  if (final) {
    final_ = header;
    final_compression_ = std::move(gathered);
    return Status::OK();
  }
  if (writer_.Busy()) {
    observer_.Note("checkpoint of step " + std::to_string(at.global_step) +
                   " skipped: the one before is still being written (a slow disk? a larger --checkpoint-every)");
    return Status::OK();
  }
  return writer_.Write(config_.checkpoint.dir, header, net_, optimizer_, config_.checkpoint.keep, gathered);
}

StatusOr<Flow> RunCheckpointer::AfterStep(RankState& state, const StepEvent& step) {
  bool stop = false;  // at an epoch's end, the epoch's checkpoint and a stop follow (AfterEpoch)
  if (!step.epoch_end) {
    GRANARY_ASSIGN_OR_RETURN(stop, StopAgreedAfterStep());
  }
  const int every = config_.checkpoint.every;
  if (!step.epoch_end && (stop || (every > 0 && state.global_step % every == 0))) {
    RunPosition at;
    at.global_step = state.global_step;
    at.epoch = static_cast<uint64_t>(step.epoch);
    at.position = state.train.state().position;
    GRANARY_RETURN_IF_ERROR(
        Save(at, step.tally->loss_sum, step.tally->samples, state.dp.sync->SaveState(), /*final=*/stop));
  }
  GRANARY_RETURN_IF_ERROR(Failed());
  return stop ? Flow::kStop : Flow::kGoOn;
}

StatusOr<Flow> RunCheckpointer::AfterEpoch(RankState& state, const EpochEvent& epoch, EpochReport*) {
  GRANARY_ASSIGN_OR_RETURN(const bool stop, AgreeOnStop());
  RunPosition at;
  at.global_step = state.global_step;
  at.epoch = static_cast<uint64_t>(epoch.epoch) + 1;
  GRANARY_RETURN_IF_ERROR(Save(at, 0, 0, state.dp.sync->SaveState(), /*final=*/epoch.last || stop));
  return stop && !epoch.last ? Flow::kStop : Flow::kGoOn;
}

StatusOr<bool> RunCheckpointer::StopAgreedAfterStep() {
  ++steps_;  // counted alike on every rank: each takes every step
  if (steps_ == kCalibrateFrom) calibration_start_ = std::chrono::steady_clock::now();
  if (steps_ != kCalibrateTo) return steps_ % agree_every_ == 0 ? AgreeOnStop() : StatusOr<bool>(false);
  const std::chrono::duration<double> measured = std::chrono::steady_clock::now() - calibration_start_;
  return AgreeOnStop(rank_ == 0 ? measured.count() / static_cast<double>(kCalibrateTo - kCalibrateFrom) : 0);
}

StatusOr<bool> RunCheckpointer::AgreeOnStop(double step_s) {
  // How many ranks were asked, and the sum of their signals: a sum over
  // ranks, so every rank stops at this step if any was asked (each may have
  // had the signal a step apart). Rank 0's step time, where given, comes
  // back as it was (the others add 0), so every rank computes one count.
  torch::Tensor asked = torch::zeros({3}, torch::kFloat64);
  if (const int sig = StopSignal(); sig != 0) {
    asked[0] = 1;
    asked[1] = sig;
  }
  asked[2] = step_s;
  GRANARY_RETURN_IF_ERROR(comm_.AllReduceSum(asked));
  if (const double agreed_s = asked[2].item<double>(); agreed_s > 0) {
    agree_every_ = std::clamp<int64_t>(static_cast<int64_t>(kAgreeEvery_s / agreed_s), 1, kMaxAgreeEvery);
  }
  const double ranks = asked[0].item<double>();
  if (ranks == 0) return false;
  SetAgreedStop(static_cast<int>(asked[1].item<double>() / ranks + 0.5));  // the ranks' one signal, as a rule
  return true;
}

Status RunCheckpointer::AfterRun(RankState&, std::vector<EpochReport>*) { return Finish(); }

Status RunCheckpointer::Failed() {
  if (writer_.Busy()) return Status::OK();
  return writer_.Wait();  // the finished write's outcome, once
}

Status RunCheckpointer::Finish() {
  auto wait_for_disk = [&] {
    while (writer_.Busy()) {
      HeartbeatBeat();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return writer_.Wait();
  };
  if (final_) {
    GRANARY_RETURN_IF_ERROR(wait_for_disk());
    GRANARY_RETURN_IF_ERROR(
        writer_.Write(config_.checkpoint.dir, *final_, net_, optimizer_, config_.checkpoint.keep, final_compression_));
  }
  return wait_for_disk();
}

namespace {

// The disk of --checkpoint-dir: with no room for one checkpoint (the model,
// and the optimizer's state) the run would end at its first: refused; short
// of room for --keep of them and the next: warned of.
Status CheckCheckpointRoom(const TrainConfig& c, const ModelBytes& model) {
  if (c.checkpoint.dir.empty() || c.data.synthetic) return Status::OK();
  // Each parameter, and as many again for each tensor the optimizer keeps of it.
  const uint64_t checkpoint_bytes =
      model.parameters * (1 + static_cast<uint64_t>(OptimizerStateSlots(c.optim))) + model.buffers;
  const int64_t free_bytes = FreeDiskBytes(c.checkpoint.dir);
  if (free_bytes < 0) return Status::OK();
  const uint64_t needed = CheckpointRoomNeeded(c.checkpoint.dir, checkpoint_bytes, c.checkpoint.keep);
  const std::string has = "--checkpoint-dir " + c.checkpoint.dir + ": its disk has " +
                          ApproxBytes(static_cast<double>(free_bytes)) + " free";
  const std::string each =
      "about " + ApproxBytes(static_cast<double>(checkpoint_bytes)) + " (the model and the optimizer's state)";
  if (static_cast<uint64_t>(free_bytes) < checkpoint_bytes) {
    return Status::FailedPrecondition(has + ", less than a checkpoint of this run takes, " + each +
                                      ": the run would end at its first checkpoint; make room, or choose another "
                                      "--checkpoint-dir");
  }
  if (static_cast<uint64_t>(free_bytes) < needed) {
    std::fprintf(stderr,
                 "train: warning: %s, and its checkpoints, %s each, need %s (--keep %d and the next, written before "
                 "the oldest is removed): the run will end at the first that does not fit; make room, or pass a "
                 "smaller --keep or another --checkpoint-dir\n",
                 has.c_str(), each.c_str(), ApproxBytes(static_cast<double>(needed)).c_str(), c.checkpoint.keep);
  }
  return Status::OK();
}

// --checkpoint-every's and --keep's bounds.
constexpr int64_t kMaxCheckpointEvery = int64_t{1} << 40;
constexpr int kMaxKeep = 1000;

class CheckpointsFeature : public Feature {
 public:
  Status Validate(const TrainConfig& c) const override {
    const CheckpointConfig& checkpoint = c.checkpoint;
    if (checkpoint.every < 0 || checkpoint.every > kMaxCheckpointEvery) {
      return OutOfRange("--checkpoint-every", std::to_string(checkpoint.every), Range(0, kMaxCheckpointEvery));
    }
    if (checkpoint.keep < 1 || checkpoint.keep > kMaxKeep) {
      return OutOfRange("--keep", std::to_string(checkpoint.keep), Range(1, kMaxKeep));
    }
    if (checkpoint.dir.empty() && checkpoint.every > 0) {
      return Status::InvalidArgument("--checkpoint-every needs --checkpoint-dir");
    }
    if ((checkpoint.resume == "latest" || checkpoint.resume == "auto") && checkpoint.dir.empty()) {
      const std::string flag = checkpoint.resume == "auto" ? "--resume auto" : "--resume without a file";
      return Status::InvalidArgument(flag + " needs --checkpoint-dir to find the latest in");
    }
    if (checkpoint.dir.empty() && checkpoint.keep != CheckpointConfig{}.keep) {
      return OnlyUsedWith("--keep", std::to_string(checkpoint.keep), "--checkpoint-dir");
    }
    return Status::OK();
  }

  Status Preflight(const ResolvedRun& run, const ModelBytes& model) const override {
    return CheckCheckpointRoom(run.config, model);
  }

  void Outputs(const TrainConfig& c, std::vector<OutputPath>* outputs) const override {
    outputs->push_back({"--checkpoint-dir", c.checkpoint.dir, OutputKind::kDirectory});
  }

  StatusOr<std::unique_ptr<RunHook>> Hook(RankState& state) const override {
    const TrainConfig& c = state.run.config;
    if (c.data.synthetic || c.checkpoint.dir.empty()) return std::unique_ptr<RunHook>();
    std::string run;  // rank 0's checkpoints name the run that claimed --checkpoint-dir
    if (state.rank == 0) {
      StatusOr<std::string> owner = CheckpointDirRun(c.checkpoint.dir);
      if (!owner.ok()) return owner.status().WithContext("--checkpoint-dir");
      run = owner.value();
    }
    return std::unique_ptr<RunHook>(std::make_unique<RunCheckpointer>(
        c, state.run.db->manifest().content_hash, std::move(run), state.rank, *state.dp.comm, *state.model.net,
        state.optimizer, state.observer));
  }
};

}  // namespace

std::unique_ptr<Feature> MakeCheckpointsFeature() { return std::make_unique<CheckpointsFeature>(); }

}  // namespace granary
