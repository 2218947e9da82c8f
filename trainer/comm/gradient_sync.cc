#include "trainer/comm/gradient_sync.h"

#include <algorithm>

#include "trainer/comm/after_backward_sync.h"
#include "trainer/comm/bucketed_sync.h"

namespace granary {
namespace {

// DDP's small first bucket: the last layer's gradients go out at once.
constexpr size_t kFirstBucketBytes = size_t{1} << 20;

}  // namespace

StatusOr<std::unique_ptr<GradientSync>> CreateGradientSync(SyncMethod method, size_t bucket_bytes, Comm& comm,
                                                           const GradientCompressionOptions& compress) {
  if (compress.method != Compression::kNone && method != SyncMethod::kBucketed) {
    return Status::InvalidArgument(std::string("--sync-compress ") + NameOf(compress.method) +
                                   " needs --sync bucketed");
  }
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<BucketCompression> compression, CreateBucketCompression(compress, comm));
  switch (method) {
    case SyncMethod::kBucketed:
      return std::unique_ptr<GradientSync>(std::make_unique<BucketedSync>(
          comm, bucket_bytes, std::min(kFirstBucketBytes, bucket_bytes), std::move(compression)));
    case SyncMethod::kAfterBackward:
      return std::unique_ptr<GradientSync>(std::make_unique<AfterBackwardSync>(comm));
  }
  return Status::InvalidArgument("--sync: no such method");  // not reached: the switch names every one
}

}  // namespace granary
