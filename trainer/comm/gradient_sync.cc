#include "trainer/comm/gradient_sync.h"

#include <algorithm>

#include "trainer/comm/after_backward_sync.h"
#include "trainer/comm/bucketed_sync.h"
#include "trainer/named_table.h"

namespace granary {
namespace {

struct SyncMethod {
  const char* name;
  std::unique_ptr<GradientSync> (*create)(Comm& comm, size_t bucket_bytes,
                                          std::unique_ptr<BucketCompression> compression);
};

// DDP's small first bucket: the last layer's gradients go out at once.
constexpr size_t kFirstBucketBytes = size_t{1} << 20;

// Every method, in the order --help lists them.
const SyncMethod kSyncMethods[] = {
    {"bucketed",
     [](Comm& comm, size_t bucket_bytes, std::unique_ptr<BucketCompression> compression)
         -> std::unique_ptr<GradientSync> {
       return std::make_unique<BucketedSync>(comm, bucket_bytes, std::min(kFirstBucketBytes, bucket_bytes),
                                             std::move(compression));
     }},
    {"after-backward",
     [](Comm& comm, size_t, std::unique_ptr<BucketCompression>) -> std::unique_ptr<GradientSync> {
       return std::make_unique<AfterBackwardSync>(comm);
     }},
};

}  // namespace

StatusOr<std::unique_ptr<GradientSync>> CreateGradientSync(const std::string& method, size_t bucket_bytes,
                                                           Comm& comm, const GradientCompressionOptions& compress) {
  const SyncMethod* m = FindByName(kSyncMethods, method);
  if (m == nullptr) {
    return Status::InvalidArgument("--sync " + method + ": unknown (known: " + KnownGradientSyncNames() + ")");
  }
  if (compress.method != "none" && method != "bucketed") {
    return Status::InvalidArgument("--sync-compress " + compress.method + " needs --sync bucketed");
  }
  GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<BucketCompression> compression, CreateBucketCompression(compress, comm));
  return m->create(comm, bucket_bytes, std::move(compression));
}

bool IsKnownGradientSync(const std::string& method) { return FindByName(kSyncMethods, method) != nullptr; }

std::string KnownGradientSyncNames() { return JoinNames(kSyncMethods); }

}  // namespace granary
