// How a bucket of gradients crosses the network, as DDP's communication hooks
// decide it (trainer/comm/bucketed_sync.h starts one per bucket while
// backward goes on, and waits for them all after it):
//   none      the bucket all-reduced in float32;
//   fp16      cast to float16, all-reduced (Gloo sums float16), cast back;
//   bf16      cast to bfloat16 and all-gathered (Gloo 1.13 has no bfloat16
//             sum), the ranks' copies summed in float32 on each rank;
//   powersgd  Vogels et al. 2019, as PyTorch's powerSGD_hook: after
//             `warmup_steps` plain all-reduces, each matrix M (a parameter
//             of 2 or more dimensions, n x m, where r x (n + m) < n x m for r = matrix_rank)
//             is sent as two thin factors, P = M Q (all-reduced with the
//             bucket's vectors, then orthogonalised) and Q = M^T P
//             (all-reduced): r x (n + m) floats instead of n x m. Q is kept for the next step (warm
//             start); what the approximation missed is added to the next
//             step's gradient (error feedback). Vectors go uncompressed.
// The result is the mean over ranks (exact for none, rounded for fp16 and
// bf16, approximated for powersgd), divided out where a method writes the
// result anyway (one pass less over the bucket).
// Every rank must start the same buckets in the same order. Training
// thread only. What a method carries from step to step (powersgd's step
// counts, Q and error buffers) goes into checkpoints (SaveState, LoadState),
// so a resumed run continues it exactly.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/comm/comm.h"
#include "trainer/config/choices.h"

namespace granary {

struct GradientCompressionOptions {
  Compression method = Compression::kNone;
  int matrix_rank = 4;    // powersgd: columns of P and Q (the approximation's rank, not a process)
  int warmup_steps = 10;  // powersgd: plain all-reduces first
  uint64_t seed = 0;      // powersgd: Q's initial values (the same on every rank)
};

// A method's state between steps, as tensors by name: `shared` is the same
// on every rank (powersgd's step counts and Q), `own` is this rank's alone
// (powersgd's error feedback). Empty for the stateless methods.
struct CompressionState {
  std::map<std::string, torch::Tensor> shared, own;
  bool empty() const { return shared.empty() && own.empty(); }
};

class BucketCompression {
 public:
  virtual ~BucketCompression() = default;
  // Starts averaging `flat` (bucket `bucket`: the gradients of parameters of
  // `shapes`, end to end) over the ranks; `flat` holds the mean once the
  // returned reduce's Wait() has returned, and must not be touched before.
  virtual StatusOr<std::unique_ptr<PendingCollective>> Start(size_t bucket, const torch::Tensor& flat,
                                                             const std::vector<std::vector<int64_t>>& shapes) = 0;
  // The state after the last Wait(), copied.
  virtual CompressionState SaveState() const { return {}; }
  // Before the first Start: continue from `state`, SaveState's of a run with
  // the same method, options and buckets. InvalidArgument here if the method
  // keeps no state and `state` is not empty; whether each bucket's state
  // fits is checked as the bucket first needs it: that Start returns
  // FailedPrecondition naming the bucket and the part that does not fit.
  virtual Status LoadState(const CompressionState& state);
};

StatusOr<std::unique_ptr<BucketCompression>> CreateBucketCompression(const GradientCompressionOptions& options,
                                                                     Comm& comm);

}  // namespace granary
