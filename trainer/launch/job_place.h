// Where a process started by an MPI launcher (mpirun, srun) sits in its
// job, from the launcher's variables: read by train's ranks under mpirun
// and by `launch` under the user's mpirun, which gives a command torchrun's
// variables from it.
#pragma once

#include <string>

#include "base/environment.h"
#include "base/status.h"

namespace granary {

// Whether an MPI launcher (mpirun, or srun with PMI/PMIx) started the
// process whose environment `env` is, so that MPI_Init joins its job.
bool StartedByMpiLauncher(const Environment& env);

struct MpiJobPlace {
  int global = 0;       // this process's rank in the job
  int world = 1;        // processes in the job
  int local = 0;        // its rank on this node
  int local_world = 1;  // processes on each node
  std::string launcher;  // "mpirun" or "srun"
  std::string where;     // the variables read, for messages
};

// This process's place from OMPI_COMM_WORLD_* (mpirun) or SLURM_* (srun);
// refused unless the ranks are numbered node by node on equal nodes
// (mpirun's and srun's default block mapping).
StatusOr<MpiJobPlace> ReadMpiJobPlace(const Environment& env);

// The job's id, the same in each of its processes: PMIx's namespace,
// OpenMPI's job id, or srun's job and step; "" if none is set.
std::string MpiJobId(const Environment& env);

}  // namespace granary
