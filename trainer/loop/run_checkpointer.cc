#include "trainer/loop/run_checkpointer.h"

#include <chrono>
#include <thread>
#include <utility>

#include "loader/loader.h"
#include "trainer/comm/comm.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/loop/data_parallel.h"
#include "trainer/loop/rank.h"
#include "trainer/number_text.h"

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
      observer_(observer) {}

namespace {

// Every rank's `state` on rank 0: the shared tensors as they are, each
// rank's own stacked (a collective: the ranks' states have the same names and
// shapes, as their buckets are the same).
StatusOr<SavedCompression> GatherCompression(const CompressionState& state, Comm& comm) {
  SavedCompression saved;
  saved.shared = state.shared;
  for (const auto& [name, tensor] : state.own) {
    std::vector<torch::Tensor> all;
    StatusOr<std::unique_ptr<PendingCollective>> gather = comm.AllGatherAsync(tensor, &all);
    if (!gather.ok()) return gather.status();
    GRANARY_RETURN_IF_ERROR(gather.value()->Wait());
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
  StatusOr<SavedCompression> gathered = GatherCompression(compression, comm_);
  if (!gathered.ok()) return gathered.status();
  if (rank_ != 0) return Status::OK();
  CheckpointHeader header{config_, db_content_hash_, at, run_};
  if (final) {
    final_ = header;
    final_compression_ = std::move(gathered).value();
    return Status::OK();
  }
  if (writer_.Busy()) {
    observer_.Note("checkpoint of step " + std::to_string(at.global_step) +
                   " skipped: the one before is still being written (a slow disk? a larger --checkpoint-every)");
    return Status::OK();
  }
  return writer_.Write(config_.checkpoint.dir, header, net_, optimizer_, config_.checkpoint.keep, gathered.value());
}

StatusOr<Flow> RunCheckpointer::AfterStep(RankState& state, const StepEvent& step) {
  const int every = config_.checkpoint.every;
  if (every > 0 && state.global_step % every == 0 && !step.epoch_end) {
    RunPosition at;
    at.global_step = state.global_step;
    at.epoch = static_cast<uint64_t>(step.epoch);
    at.position = state.train.state().position;
    GRANARY_RETURN_IF_ERROR(Save(at, step.tally->loss_sum, step.tally->samples, state.dp.sync->SaveState()));
  }
  GRANARY_RETURN_IF_ERROR(Failed());
  return Flow::kGoOn;
}

StatusOr<Flow> RunCheckpointer::AfterEpoch(RankState& state, const EpochEvent& epoch, EpochReport*) {
  RunPosition at;
  at.global_step = state.global_step;
  at.epoch = static_cast<uint64_t>(epoch.epoch) + 1;
  GRANARY_RETURN_IF_ERROR(Save(at, 0, 0, state.dp.sync->SaveState(), /*final=*/epoch.last));
  return Flow::kGoOn;
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

Status ResumeNotes::BeforeRun(RankState& state) {
  if (state.rank != 0) return Status::OK();
  const TrainConfig& now = state.run.config;
  RunObserver& observer = state.observer;
  const RunPosition& at = from_.header.at;
  observer.Note("resuming from " + from_.path + ": epoch " + std::to_string(at.epoch + 1) + ", step " +
                std::to_string(at.global_step) + ", " + std::to_string(at.position) + " samples of the epoch done");
  if (static_cast<int64_t>(at.epoch) >= now.optim.epochs) {
    observer.Note("resume: the checkpoint is at the end of epoch " + std::to_string(at.epoch) + " of " +
                  std::to_string(now.optim.epochs) + ": nothing left to train (raise --epochs to go on)");
  }
  if (at.world != now.World()) {
    const int64_t batch = now.optim.batch_size;
    observer.Note("resume: " + std::to_string(at.world) + " ranks -> " + std::to_string(now.World()) +
                  ": per-rank batch " + std::to_string(batch / at.world) + " -> " +
                  std::to_string(batch / now.World()) + "; global batch " + std::to_string(batch) +
                  " and the learning rate (" + NumberText(from_.header.config.optim.lr) + ") unchanged");
  }
  return Status::OK();
}

Status ResumeCompression(const Checkpoint& from, const SavedCompression& saved, int rank, int world,
                         GradientSync& sync, RunObserver& observer) {
  CompressionState state;
  state.shared = saved.shared;
  const bool same_world = from.header.at.world == world;
  for (const auto& [name, ranks] : saved.ranks) {
    if (ranks.dim() == 0 || ranks.size(0) != from.header.at.world) {
      return Status::Corruption(from.path + ": gradient compression state " + name + " has " +
                                std::to_string(ranks.dim() == 0 ? 0 : ranks.size(0)) + " rows, not one per rank (" +
                                std::to_string(from.header.at.world) + ")");
    }
    state.own[name] = same_world ? ranks[rank].clone() : ranks.mean(0);
  }
  if (!same_world && !state.own.empty() && rank == 0) {
    observer.Note("resume: " + from.header.config.sync.compress + "'s error feedback of " +
                  std::to_string(from.header.at.world) + (from.header.at.world == 1 ? " rank" : " ranks") +
                  " averaged for " + std::to_string(world));
  }
  return sync.LoadState(state).WithContext("--resume " + from.path);
}

}  // namespace granary
