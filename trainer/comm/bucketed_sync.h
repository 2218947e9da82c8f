// GradientSync as PyTorch's DDP does it: parameters are grouped into buckets
// in reverse registration order (about the order backward produces their
// gradients), a small first bucket and then `bucket_bytes` each; as soon as
// every gradient of a bucket has been accumulated during backward (an autograd
// post hook on each parameter's gradient accumulator), the bucket's
// all-reduce starts on Gloo's threads while backward goes on. Gradients live
// in the buckets (Attach points each .grad at its slice), so nothing is
// copied; FinishStep waits for the buckets, which the compression leaves
// holding the means (trainer/comm/compress.h).
// Buckets are launched in bucket order on every rank, so the collectives
// match. Results equal AfterBackwardSync's exactly (the same sums of the same
// values), and without compression.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "base/status.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/gradient_sync.h"

namespace granary {

class BucketedSync : public GradientSync {
 public:
  // `compression` (null: plain float32 all-reduces) says how a bucket
  // crosses the network (trainer/comm/compress.h).
  BucketedSync(Comm& comm, size_t bucket_bytes, size_t first_bucket_bytes,
               std::unique_ptr<BucketCompression> compression = nullptr);
  ~BucketedSync() override;
  Status Attach(const std::vector<torch::Tensor>& params) override;
  void BeginStep() override;
  Status FinishStep() override;
  double blocked_seconds() const override { return blocked_seconds_; }
  CompressionState SaveState() const override { return compression_->SaveState(); }
  Status LoadState(const CompressionState& state) override { return compression_->LoadState(state); }

  // Parameters of each bucket (indices into Attach's list), in launch order.
  std::vector<std::vector<size_t>> bucket_params() const;

 private:
  struct Bucket;
  bool InBucket(size_t param) const;  // its .grad is still its bucket slice
  void GradientReady(size_t param);   // from the autograd hook
  void LaunchReadyBuckets();

  Comm& comm_;
  std::unique_ptr<BucketCompression> compression_;
  size_t bucket_bytes_;
  size_t first_bucket_bytes_;
  std::vector<torch::Tensor> params_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<size_t> bucket_of_;       // per parameter
  std::vector<int64_t> offset_of_;      // per parameter, in its bucket's flat buffer
  std::vector<torch::Tensor> views_;    // per parameter, its slice of the bucket
  // Each parameter's gradient accumulator (kept alive: the hooks live on
  // them) and its hook's key, removed on destruction.
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;
  size_t next_launch_ = 0;
  Status hook_status_;  // the first failure inside a hook
  double blocked_seconds_ = 0;
};

}  // namespace granary
