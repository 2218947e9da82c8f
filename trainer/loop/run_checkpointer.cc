#include "trainer/loop/run_checkpointer.h"

#include <chrono>
#include <thread>
#include <utility>

#include "trainer/dist/comm.h"
#include "trainer/launch/heartbeat.h"

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

Status RunCheckpointer::Save(RunPosition at, double loss_sum, double samples, bool final) {
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
  if (rank_ != 0) return Status::OK();
  CheckpointHeader header{config_, db_content_hash_, at, run_};
  if (final) {
    final_ = header;
    return Status::OK();
  }
  if (writer_.Busy()) {
    observer_.Note("checkpoint of step " + std::to_string(at.global_step) +
                   " skipped: the one before is still being written (a slow disk? a larger --checkpoint-every)");
    return Status::OK();
  }
  return writer_.Write(config_.checkpoint.dir, header, net_, optimizer_, config_.checkpoint.keep);
}

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
    GRANARY_RETURN_IF_ERROR(writer_.Write(config_.checkpoint.dir, *final_, net_, optimizer_, config_.checkpoint.keep));
  }
  return wait_for_disk();
}

}  // namespace granary
