// GradientSync: how a rank's gradients become the mean over all ranks. The
// rank loop (loop/data_parallel.h's DataParallel, loop/step.cc) decides *when*
// (after backward, before the optimiser step); an implementation decides
// *how* (buckets all-reduced while backward runs, or one flat all-reduce
// after it), over Comm. One per rank, used from the training thread only.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/comm/compress.h"
#include "trainer/config/choices.h"

namespace granary {

class Comm;

class GradientSync {
 public:
  virtual ~GradientSync() = default;

  // Called once, before the first step, with the parameters whose gradients
  // are synchronised (an implementation may register autograd hooks on them).
  virtual Status Attach(const std::vector<torch::Tensor>& params) = 0;
  // Called before each backward pass.
  virtual void BeginStep() {}
  // Called after backward: returns when every attached parameter's .grad
  // holds the mean over ranks.
  virtual Status FinishStep() = 0;
  // Seconds this rank spent blocked in synchronisation since Attach.
  virtual double blocked_seconds() const = 0;
  // The gradient compression's state between steps (trainer/comm/compress.h),
  // for checkpoints; LoadState before the first step.
  virtual CompressionState SaveState() const { return {}; }
  virtual Status LoadState(const CompressionState& state) {
    if (state.empty()) return Status::OK();
    return Status::InvalidArgument("the checkpoint has gradient compression state; this sync keeps none");
  }
};

// `method` over `comm`, which must outlive it; `bucket_bytes` for the
// methods that bucket gradients, and how each bucket is compressed
// (trainer/comm/compress.h; bucketed only). InvalidArgument for compression
// without buckets.
StatusOr<std::unique_ptr<GradientSync>> CreateGradientSync(
    SyncMethod method, size_t bucket_bytes, Comm& comm,
    const GradientCompressionOptions& compress = GradientCompressionOptions{});

}  // namespace granary
