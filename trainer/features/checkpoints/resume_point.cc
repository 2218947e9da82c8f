#include "trainer/features/checkpoints/resume_point.h"

#include <utility>

#include "trainer/models/prune.h"
#include "trainer/number_text.h"

namespace granary {

StatusOr<ResumePoint> ResumePoint::Open(Checkpoint from) {
  GRANARY_ASSIGN_OR_RETURN(CheckpointArchive archive, CheckpointArchive::Parse(from));
  return ResumePoint(std::move(from), std::move(archive));
}

Status ResumePoint::RestoreModel(Classifier& net) const {
  GRANARY_RETURN_IF_ERROR(archive_.RestoreModel(net));
  MatchLayersToTensors(net);  // a pruned checkpoint's tensors are smaller
  return Status::OK();
}

Status ResumePoint::RestoreOptimizer(torch::optim::Optimizer& optimizer) const {
  return archive_.RestoreOptimizer(optimizer);
}

RankStart ResumePoint::StartOf(int rank, int world) const {
  const RunPosition& at = from_.header.at;
  RankStart start;
  start.resumed = true;
  start.epoch = at.epoch;
  start.position = at.position;
  start.global_step = at.global_step;
  // The epoch's loss so far: each rank its own, or all of it on rank 0 in
  // another world.
  const bool same_world = at.world == world;
  for (size_t r = 0; r < at.loss_sums.size() && r < at.sample_counts.size(); ++r) {
    if (same_world ? static_cast<int>(r) == rank : rank == 0) {
      start.loss_sum += at.loss_sums[r];
      start.samples += at.sample_counts[r];
    }
  }
  return start;
}

Status ResumePoint::RestoreCompression(int rank, int world, GradientSync& sync, RunObserver& observer) const {
  const Checkpoint& from = from_;
  GRANARY_ASSIGN_OR_RETURN(const SavedCompression saved, archive_.Compression());
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
    observer.Note(std::string("resume: ") + NameOf(from.header.config.sync.compress) + "'s error feedback of " +
                  std::to_string(from.header.at.world) + (from.header.at.world == 1 ? " rank" : " ranks") +
                  " averaged for " + std::to_string(world));
  }
  return sync.LoadState(state).WithContext("--resume " + from.path);
}

void ResumePoint::Tell(const TrainConfig& now, RunObserver& observer) const {
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
}

}  // namespace granary
