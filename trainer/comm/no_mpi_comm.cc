// A build without MPI (CMake found none): --backend mpi is refused.
#include "trainer/comm/comm_backend.h"

namespace granary {

bool CommHasMpi() { return false; }
std::string CommMpiUnavailable() {
  return "--backend mpi: this build of train has no MPI (install libopenmpi-dev, e.g. with tools/setup, and rebuild)";
}
std::string MpirunPath() { return ""; }

StatusOr<std::unique_ptr<CommBackend>> CreateMpiBackend(const CommOptions&) {
  return Status::FailedPrecondition("--backend mpi: this build has no MPI (train refuses it before: ResolveBackend)");
}

}  // namespace granary
