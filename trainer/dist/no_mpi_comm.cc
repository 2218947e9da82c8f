// A build without MPI (CMake found none): --backend mpi is refused.
#include "trainer/dist/comm_backend.h"

namespace granary {

bool HaveMpiBackend() { return false; }
std::string MpirunPath() { return ""; }

StatusOr<std::unique_ptr<CommBackend>> CreateMpiBackend(const CommOptions&) {
  return Status::FailedPrecondition(
      "--backend mpi: this build of train has no MPI (install libopenmpi-dev, e.g. with tools/setup, and rebuild)");
}

}  // namespace granary
