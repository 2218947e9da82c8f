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

// Whether srun started the process as one of the tasks of a job step
// (SLURM_PROCID, and SLURM_STEP_NUM_TASKS above 1: a batch script has no
// step, and a step of one task, as `srun --pty bash`, holds a shell whose
// commands are each on their own), with PMI or without it (srun --mpi=none,
// Slurm's own MpiDefault): either way the process is one rank of that step.
bool StartedBySrun(const Environment& env);

// Whether the process is one rank of a job its launcher placed: started by
// an MPI launcher, or as a task of srun.
inline bool StartedAsJobRank(const Environment& env) { return StartedByMpiLauncher(env) || StartedBySrun(env); }

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

// Whether the job's launcher bound this process, which may use
// `usable_cpus` CPUs, to CPUs of its own (OpenMPI's default --bind-to core:
// OMPI_MCA_orte_bound_at_launch; srun's --cpu-bind: SLURM_CPU_BIND_TYPE
// other than none, and fewer CPUs than SLURM_CPUS_ON_NODE, since a cluster
// without Slurm's task/affinity plugin binds nothing it is asked to); an
// unbound rank shares its node's CPUs with the node's other ranks.
bool BoundByJobLauncher(const Environment& env, int usable_cpus);

// Why a rank of the job `launcher` ("mpirun", "srun") placed is not pinned
// by granary, for its layout line: "placed by srun", and, for a rank the
// launcher did not bind that shares its node with `node_ranks` > 1 ranks,
// ", sharing the node's CPUs with its N ranks".
std::string PlacedByJobLauncher(const std::string& launcher, int node_ranks);

// Under the user's mpirun or srun, a rendezvous port every process of the
// job derives alike from the job's id (OpenMPI's jobid, Slurm's job and
// step), in 20000-59999; 0 if the environment names no job.
int PortFromJobId(const Environment& env);

// The first host a Slurm hostlist names: "node[03-05,9],gpu1" -> "node03",
// "rack[2-3]-n[01-04]" -> "rack2-n01", "login1" -> "login1"; "" if it is
// empty or malformed (an unclosed bracket).
std::string FirstHostOf(const std::string& hostlist);

// Where rank 0 of a job across nodes serves the rendezvous when no
// --master-addr is given: MASTER_ADDR when the job's environment sets it (as
// batch scripts written for torchrun-style jobs export it), else under srun
// the first node of the step (SLURM_STEP_NODELIST, or SLURM_JOB_NODELIST),
// where srun's block and cyclic distributions both put task 0. *from names
// the variable; "" if none gives one.
std::string JobMasterAddr(const Environment& env, std::string* from);

// The rendezvous port when no --master-port is given: MASTER_PORT when the
// job's environment sets it (InvalidArgument if it is no port), else
// PortFromJobId (0 if that names none).
StatusOr<int> JobMasterPort(const Environment& env);

}  // namespace granary
