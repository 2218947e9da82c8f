// The transports behind Comm (comm.h): Gloo over TCP (gloo_comm.cc) and MPI
// (mpi_comm.cc, where the build has it). Comm packs tensors, short-cuts a
// world of one and checks its calls; a backend only moves contiguous
// buffers. Internal to trainer/comm: nothing outside includes it. Calls come
// from the training thread, in the same order on every rank.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/comm/comm.h"

namespace granary {

class CommBackend {
 public:
  virtual ~CommBackend() = default;
  // In place, over every rank: the sum of a contiguous tensor (float32,
  // float64, int64, float16; bfloat16 on MPI).
  virtual Status AllReduceSum(torch::Tensor& tensor) = 0;
  virtual StatusOr<std::unique_ptr<PendingCollective>> AllReduceSumAsync(const torch::Tensor& tensor) = 0;
  // Every rank's contiguous `input` into (*outputs)[rank], allocated here.
  virtual StatusOr<std::unique_ptr<PendingCollective>> AllGatherAsync(const torch::Tensor& input,
                                                                      std::vector<torch::Tensor>* outputs) = 0;
  // Rank 0's values of a contiguous tensor, in place on every rank.
  virtual Status Broadcast(torch::Tensor& tensor) = 0;
  virtual Status Barrier() = 0;
};

// Gloo: a TCPStore (or FileStore) rendezvous, then ProcessGroupGloo.
StatusOr<std::unique_ptr<CommBackend>> CreateGlooBackend(const CommOptions& options);
// MPI: this process must have been started by mpirun or srun as rank
// options.rank of options.world; FailedPrecondition if the build has no
// MPI (CommHasMpi) or the job's shape differs.
StatusOr<std::unique_ptr<CommBackend>> CreateMpiBackend(const CommOptions& options);

// Why rank `rank`'s recipe `mine` and rank 0's `first` (RecipeJson objects)
// are not the same run: the first member that differs with both values, as
// one line; "" if they agree.
std::string RecipeDifference(const std::string& mine, const std::string& first, const CommOptions& options);
// "rank 2 (node 1)": the node named where options.ranks_per_node tells it.
std::string RankName(int rank, const CommOptions& options);

}  // namespace granary
