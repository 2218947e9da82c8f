#include "trainer/launch/job_place.h"

#include <cstdint>

namespace granary {

bool StartedByMpiLauncher(const Environment& env) {
  // mpirun (ORTE) sets OMPI_COMM_WORLD_*; srun's PMI and PMIx plugins set
  // PMI_RANK or PMIX_RANK in each task (SLURM_PROCID alone is also set in a
  // batch script, which is no MPI job).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (env.Has(name)) return true;
  }
  return false;
}

bool StartedBySrun(const Environment& env) {
  return env.Has("SLURM_PROCID") && env.Number("SLURM_STEP_NUM_TASKS") > 1;
}

StatusOr<MpiJobPlace> ReadMpiJobPlace(const Environment& env) {
  MpiJobPlace p;
  p.launcher = "mpirun";
  p.global = env.Number("OMPI_COMM_WORLD_RANK"), p.world = env.Number("OMPI_COMM_WORLD_SIZE");
  p.local = env.Number("OMPI_COMM_WORLD_LOCAL_RANK"), p.local_world = env.Number("OMPI_COMM_WORLD_LOCAL_SIZE");
  p.where = "mpirun's OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE";
  if (p.world < 0) {  // srun
    p.global = env.Number("SLURM_PROCID"), p.world = env.Number("SLURM_NTASKS"), p.local = env.Number("SLURM_LOCALID");
    const int nodes = env.Number("SLURM_NNODES");
    p.local_world = nodes > 0 && p.world > 0 && p.world % nodes == 0 ? p.world / nodes : -1;
    p.launcher = "srun";
    p.where = "srun's SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NNODES (the same tasks on every node)";
  }
  if (p.global < 0 || p.world < 1 || p.local < 0 || p.local_world < 1 || p.world % p.local_world != 0 ||
      p.global >= p.world || p.local != p.global % p.local_world) {
    return Status::InvalidArgument("MPI job: " + p.where +
                                   " do not give a rank of equal nodes numbered node by node (--map-by slot)");
  }
  return p;
}

std::string MpiJobId(const Environment& env) {
  if (env.Has("PMIX_NAMESPACE")) return env.Get("PMIX_NAMESPACE");
  if (env.Has("OMPI_MCA_ess_base_jobid")) return env.Get("OMPI_MCA_ess_base_jobid");
  if (env.Has("SLURM_JOB_ID")) return env.Get("SLURM_JOB_ID") + "." + env.Get("SLURM_STEP_ID");
  return "";
}

bool BoundByJobLauncher(const Environment& env, int usable_cpus) {
  if (env.Number("OMPI_MCA_orte_bound_at_launch") == 1) return true;
  const std::string bind = env.Get("SLURM_CPU_BIND_TYPE");
  const int node_cpus = env.Number("SLURM_CPUS_ON_NODE");
  return !bind.empty() && bind.find("none") == std::string::npos && (node_cpus <= 0 || usable_cpus < node_cpus);
}

std::string PlacedByJobLauncher(const std::string& launcher, int node_ranks) {
  return "placed by " + launcher +
         (node_ranks > 1 ? ", sharing the node's CPUs with its " + std::to_string(node_ranks) + " ranks" : "");
}

int PortFromJobId(const Environment& env) {
  std::string id;
  for (const char* name : {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "SLURM_JOB_ID"}) {
    if (env.Has(name)) {
      id = std::string(name) + "=" + env.Get(name) + "." + env.Get("SLURM_STEP_ID");
      break;
    }
  }
  if (id.empty()) return 0;
  uint64_t hash = 1469598103934665603ull;  // FNV-1a: the same on every node, whatever its library
  for (unsigned char c : id) hash = (hash ^ c) * 1099511628211ull;
  return 20000 + static_cast<int>(hash % 40000);
}

std::string FirstHostOf(const std::string& hostlist) {
  std::string host;
  for (size_t i = 0; i < hostlist.size() && hostlist[i] != ','; ++i) {
    if (hostlist[i] != '[') {
      host += hostlist[i];
      continue;
    }
    // A bracket's first range or number ("03-05,9" -> "03", zero padding kept).
    const size_t close = hostlist.find(']', i);
    if (close == std::string::npos) return "";
    const size_t first_end = hostlist.find_first_of("-,]", i + 1);
    if (first_end == i + 1) return "";
    host += hostlist.substr(i + 1, first_end - i - 1);
    i = close;
  }
  return host;
}

std::string JobMasterAddr(const Environment& env, std::string* from) {
  if (!env.Get("MASTER_ADDR").empty()) {
    *from = "MASTER_ADDR";
    return env.Get("MASTER_ADDR");
  }
  if (!StartedBySrun(env)) return "";
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    const std::string host = FirstHostOf(env.Get(name));
    if (!host.empty()) {
      *from = std::string("the first node of ") + name;
      return host;
    }
  }
  return "";
}

StatusOr<int> JobMasterPort(const Environment& env) {
  if (!env.Has("MASTER_PORT")) return PortFromJobId(env);
  const int port = env.Number("MASTER_PORT");
  if (port < 1 || port > 65535) {
    return Status::InvalidArgument("MASTER_PORT=" + env.Get("MASTER_PORT") + ": not a port (1..65535)");
  }
  return port;
}

}  // namespace granary
