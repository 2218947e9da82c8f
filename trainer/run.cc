#include "trainer/run.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "base/cli.h"
#include "base/json_text.h"
#include "store/db.h"
#include "store/output_path.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/comm/comm.h"
#include "trainer/config/workload.h"
#include "trainer/features/checkpoints/stop_signal.h"
#include "trainer/features/features.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/launch/job_place.h"
#include "trainer/launch/launch.h"
#include "trainer/launch/held_cpus.h"
#include "trainer/launch/layout.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"
#include "trainer/models/precision.h"
#include "trainer/models/registry.h"
#include "trainer/number_text.h"
#include "trainer/report/report.h"
#include "trainer/run_rank.h"
#include "trainer/tune_run.h"

namespace granary {
namespace {

// One line on stderr; "rank R: " first for ranks above 0, and for rank 0
// too once training runs on several ranks (`name_rank`), so a failure in a
// collective says where it was seen.
int Fail(const Status& s, int rank, bool name_rank = false) {
  const bool named = rank > 0 || (rank == 0 && name_rank);
  return PrintFailure("train", s, named ? "rank " + std::to_string(rank) : std::string());
}

// The newest checkpoint in `dir` and when it was written (ns), or {"", 0}:
// compared before and after the ranks run, it tells whether they saved.
std::pair<std::string, int64_t> NewestCheckpoint(const std::string& dir) {
  StatusOr<std::string> path = LatestCheckpoint(dir);
  struct stat st;
  if (!path.ok() || ::stat(path->c_str(), &st) != 0) return {"", 0};
  return {path.value(), int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
}

// The launcher's part: exit status of the run. A stop signal's end is said
// here, for rank 0 (under mpirun its own line would be lost: mpirun,
// interrupted by the same Ctrl-C, stops passing on the ranks' output).
int Launch(const TrainConfig& config, const Layout& layout, const std::vector<std::string>& argv,
           const Environment& env) {
  const std::string& dir = config.checkpoint.dir;
  const bool keeps = !dir.empty() && config.dist.node_rank == 0;  // rank 0's node: rank 0 saves
  const std::pair<std::string, int64_t> before = keeps ? NewestCheckpoint(dir) : std::pair<std::string, int64_t>();
  StatusOr<LaunchOutcome> outcome = LaunchRanks(RankLaunchOptions(config, layout, argv, MpirunPath(), env));
  if (!outcome.ok()) return Fail(outcome.status(), 0);
  if (!outcome->failure.empty()) std::fprintf(stderr, "train: %s\n", outcome->failure.c_str());
  if (const int sig = outcome->stopped_by; sig != 0 && dir.empty()) {
    std::fputs(NothingKeptLine(sig).c_str(), stderr);
  } else if (sig != 0 && keeps) {
    const std::pair<std::string, int64_t> after = NewestCheckpoint(dir);
    std::fputs(after.first.empty() || after == before ? NotSavedLine(sig, before.first).c_str()
                                                       : SavedLine(sig, after.first).c_str(),
               stderr);
  }
  return outcome->exit_code;
}

// A rank's exit status once the ranks stopped on a stop signal (stop_signal.h):
// 128 + the signal, as if it had ended the process. Rank 0 says where the
// run was saved where no launcher of train's started it (Launch says it then).
int StoppedBySignal(const TrainConfig& config, int rank, bool launched) {
  const int sig = AgreedStop();
  if (rank == 0 && !launched) {
    const StatusOr<std::string> saved = LatestCheckpoint(config.checkpoint.dir);
    std::fputs(SavedLine(sig, saved.ok() ? saved.value() : config.checkpoint.dir).c_str(), stderr);
  }
  return 128 + sig;
}

// Every output may be written where it goes, before any rank starts
// (store/output_path.h): a finished run is not lost to a bad path, and no
// output replaces a db's file, an input or another output.
Status CheckOutputPaths(const TrainConfig& config) {
  std::vector<OutputPath> outputs;  // an output is refused naming the one before it that it repeats
  for (const std::unique_ptr<Feature>& feature : AllFeatures()) feature->Outputs(config, &outputs);
  outputs.insert(outputs.end(), {{"--metrics", config.output.metrics, OutputKind::kJsonLines},
                                 {"--report", config.output.report, OutputKind::kHtml}});
  if (std::optional<OutputPath> out = RedirectedStdout()) outputs.push_back(*out);
  std::vector<FlagPath> inputs = {{"--db", config.data.db}, {"--resume", config.checkpoint.resume}};
  if (IsModelFile(config.model.name)) inputs.push_back({"--model", config.model.name});
  return CheckOutputs(outputs, inputs);
}

// The checks a run passes before any rank trains, made once by the process
// that answers for it (the launcher, or rank 0 of a job started by torchrun,
// mpirun or srun): the model fits the db (a dry forward, bounded by
// --timeout), every output can be written, each feature's own checks
// (features/feature.h: the room on disk its files need among them); an
// evaluation of the split it trains on, and bf16 on a CPU that only
// emulates it, are warned of.
Status Preflight(const ResolvedRun& run) {
  const TrainConfig& c = run.config;
  // (A model past --timeout still runs on a thread: main then exits at once, DryForwardLeftRunning.)
  ModelBytes model_bytes;
  GRANARY_RETURN_IF_ERROR(CheckModelFits(c, run.workload, ModelUse::kTrain, &model_bytes));
  WarnOfSavedInputShape(c, run.workload);
  if (run.workload.regression && run.config.optim.label_smoothing > 0) {
    return Status::InvalidArgument("--label-smoothing: smooths class labels; the db's target '" +
                                   run.workload.target_field + "' is a number to predict");
  }
  if (run.workload.regression && run.config.optim.class_weights != "none") {
    return Status::InvalidArgument("--class-weights: weighs classes; the db's target '" + run.workload.target_field +
                                   "' is a number to predict");
  }
  GRANARY_RETURN_IF_ERROR(CheckOutputPaths(c));  // first: a disk's room matters only where a file can be written
  for (const std::unique_ptr<Feature>& feature : AllFeatures()) {
    GRANARY_RETURN_IF_ERROR(feature->Preflight(run, model_bytes));
  }
  if (!c.data.eval_split.empty() && c.data.eval_split == c.data.train_split) {
    std::fprintf(stderr,
                 "train: warning: --eval-split %s is the split it trains on: its test_loss and test_acc say how well "
                 "the model fits the samples it learns from, not how it does on samples it has not seen (a held-out "
                 "split, test or val, does: prep build --val-fraction F makes one)\n",
                 c.data.eval_split.c_str());
  }
  if (c.model.precision == ComputeType::kBf16 && !CpuHasNativeBf16()) {
    std::fprintf(stderr,
                 "train: warning: this CPU has no native bf16 (AVX512-BF16 or AMX): bf16 runs emulated, "
                 "likely slower than fp32\n");
  }
  return Status::OK();
}

// A job's shape (checked by the caller) as the run's: `local_world` ranks
// on each of world / local_world nodes, this process rank `global`; the
// job's launcher places the processes, so train pins none.
void FillJobShape(int global, int world, int local_world, TrainConfig* config, int* rank) {
  config->dist.ranks = local_world;
  config->dist.nnodes = world / local_world;
  config->dist.node_rank = global / local_world;
  config->dist.pin = false;
  *rank = global;
}

// A task of srun without PMI (srun --mpi=none, Slurm's MpiDefault): MPI
// cannot join its tasks into one job, so its ranks meet over Gloo, rank 0
// serving the rendezvous on --master-port, MASTER_PORT or the port the job's
// id gives, at 127.0.0.1 on one node; across nodes at --master-addr,
// MASTER_ADDR or the step's first node (JobMasterAddr).
Status FromSrunWithoutPmi(const Environment& env, const MpiJobPlace& place, bool master_addr_given,
                          TrainConfig* config, int* rank) {
  const std::string job = "srun without PMI (a job of " + std::to_string(place.world) + " tasks)";
  if (config->dist.backend == Backend::kMpi) {
    return Status::InvalidArgument("--backend mpi under " + job + ": MPI cannot make one job of its tasks; start "
                                   "them with srun --mpi=pmix (srun --mpi=list names this cluster's plugins), "
                                   "or leave --backend out to meet over Gloo");
  }
  FillJobShape(place.global, place.world, place.local_world, config, rank);
  config->dist.backend = Backend::kGloo;
  if (config->dist.nnodes > 1 && !master_addr_given) {
    std::string from;
    config->dist.host = JobMasterAddr(env, &from);
    if (config->dist.host.empty()) {
      return Status::InvalidArgument("--master-addr is needed under " + job + " across " +
                                     std::to_string(config->dist.nnodes) + " nodes: the address of rank 0's node, " +
                                     "which neither MASTER_ADDR nor SLURM_STEP_NODELIST gives (or srun --mpi=pmix "
                                     "and --backend mpi)");
    }
  }
  if (config->dist.port == 0) {
    GRANARY_ASSIGN_OR_RETURN(config->dist.port, JobMasterPort(env));
  }
  return Status::OK();
}

// Started by mpirun or srun (StartedAsJobRank; no --rank): this process is
// that rank of the job, whose shape (rank, size, ranks per node:
// OMPI_COMM_WORLD_* or SLURM_*) is the run's; ranks must be numbered node by
// node (mpirun's and srun's default block mapping). Pinning is the job
// launcher's. *launcher: "mpirun" or "srun"; *where: the variables read.
Status FromMpiJob(const Environment& env, bool master_addr_given, TrainConfig* config, int* rank,
                  std::string* launcher, std::string* where) {
  GRANARY_ASSIGN_OR_RETURN(const MpiJobPlace place, ReadMpiJobPlace(env));
  *launcher = place.launcher;
  *where = place.where;
  const int global = place.global, world = place.world, local_world = place.local_world;
  if (!StartedByMpiLauncher(env)) return FromSrunWithoutPmi(env, place, master_addr_given, config, rank);
  if (config->dist.backend == Backend::kGloo) {
    return Status::InvalidArgument(
        "--backend gloo under " + *launcher + " (a job of " + std::to_string(world) +
        " processes): each process is one rank of that MPI job, whose ranks meet over MPI; use --backend mpi "
        "(or auto), or start train without " + *launcher + " to run its ranks over Gloo");
  }
  config->dist.backend = Backend::kMpi;
  FillJobShape(global, world, local_world, config, rank);  // the MPI launcher places its processes
  return Status::OK();
}

// --backend auto: in an MPI job (mpirun, srun) MPI; in a rank, what its
// launcher started it with (mpirun, or a fork); in the launcher Gloo. (MPI
// is faster on one machine, docs/BENCHMARKS.md "Backends", but OpenMPI
// 4.1's mpirun listens on every interface for PMIx tools, which a
// one-machine run over Gloo never does: so it is asked for, not chosen.)
// --backend mpi where MPI cannot be loaded is refused, saying why.
Status ResolveBackend(const Environment& env, TrainConfig* config, bool is_rank) {
  Backend& backend = config->dist.backend;
  if (backend == Backend::kAuto) backend = is_rank && StartedByMpiLauncher(env) ? Backend::kMpi : Backend::kGloo;
  if (backend == Backend::kMpi && !CommHasMpi()) return Status::InvalidArgument(CommMpiUnavailable());
  return Status::OK();
}

// Whether torchrun's variables are in the environment (RANK and WORLD_SIZE;
// the rest are then required).
bool TorchrunVariablesSet(const Environment& env) { return env.Has("RANK") && env.Has("WORLD_SIZE"); }

// Started by torchrun (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set, no --rank): this process is that rank; the run's shape
// comes from the environment.
Status FromTorchrun(const Environment& env, TrainConfig* config, int* rank) {
  const char* names[] = {"RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  std::vector<std::string> v;
  for (const char* name : names) {
    if (!env.Has(name)) {
      return Status::InvalidArgument("torchrun environment: RANK and WORLD_SIZE are set but " + std::string(name) +
                                     " is not (torchrun sets RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, "
                                     "MASTER_PORT)");
    }
    v.push_back(env.Get(name));
  }
  const int global = env.Number("RANK"), world = env.Number("WORLD_SIZE"), local_world = env.Number("LOCAL_WORLD_SIZE");
  const int port = env.Number("MASTER_PORT");
  if (global < 0 || world < 0 || local_world < 0 || port < 0) {
    return Status::InvalidArgument("torchrun environment: RANK " + v[0] + ", WORLD_SIZE " + v[1] +
                                   ", LOCAL_WORLD_SIZE " + v[2] + ", MASTER_PORT " + v[4] +
                                   ": each must be a non-negative integer");
  }
  if (local_world < 1 || world < local_world || world % local_world != 0 || global >= world || port < 1 ||
      port > 65535) {
    return Status::InvalidArgument("torchrun environment: RANK " + v[0] + ", WORLD_SIZE " + v[1] +
                                   ", LOCAL_WORLD_SIZE " + v[2] + ", MASTER_PORT " + v[4] +
                                   " do not fit together (RANK < WORLD_SIZE, a multiple of LOCAL_WORLD_SIZE; "
                                   "a port in 1..65535)");
  }
  FillJobShape(global, world, local_world, config, rank);  // torchrun places its processes
  config->dist.host = v[3];
  config->dist.port = port;
  if (config->dist.backend == Backend::kAuto) config->dist.backend = Backend::kGloo;  // torchrun's is a Gloo rendezvous
  return Status::OK();
}

// Started by torchrun, mpirun or srun (no --rank): the run's shape from that
// job (FromTorchrun, FromMpiJob) and this process's rank; returns the
// launcher's name ("torchrun", "mpirun", "srun"), or "" if neither.
// Refused, before anything starts: two launchers' variables at once, flags
// that contradict the job's shape (given: the flags on the command line),
// and --tune, which starts processes of its own.
StatusOr<std::string> FromJob(const Environment& env, TrainConfig* config, const std::vector<std::string>& given,
                              const TuneRequest& tune, int* rank) {
  // torchrun started inside a task of srun without PMI is the nearer launcher (srun -N 2 torchrun ...).
  const bool torchrun = TorchrunVariablesSet(env);
  const bool mpi = StartedByMpiLauncher(env) || (StartedBySrun(env) && !torchrun);
  if (!torchrun && !mpi) return std::string();
  if (torchrun && mpi) {
    return Status::InvalidArgument("both torchrun's variables (RANK " + env.Get("RANK") +
                                   ", WORLD_SIZE " + env.Get("WORLD_SIZE") +
                                   ") and an MPI launcher's (OMPI_COMM_WORLD_* or PMI_RANK) are set: which job is "
                                   "this process a rank of? Unset one (mpirun -x RANK passes torchrun's on)");
  }
  const TrainConfig asked = *config;
  auto given_flag = [&](const char* flag) { return std::find(given.begin(), given.end(), flag) != given.end(); };
  std::string launcher = "torchrun", where = "torchrun's RANK, WORLD_SIZE, LOCAL_WORLD_SIZE";
  GRANARY_RETURN_IF_ERROR(torchrun ? FromTorchrun(env, config, rank)
                                   : FromMpiJob(env, given_flag("--master-addr"), config, rank, &launcher, &where));
  const std::pair<const char*, std::pair<int, int>> shape[] = {
      {"--ranks", {asked.dist.ranks, config->dist.ranks}},
      {"--nnodes", {asked.dist.nnodes, config->dist.nnodes}},
      {"--node-rank", {asked.dist.node_rank, config->dist.node_rank}}};
  for (const auto& [flag, values] : shape) {
    if (given_flag(flag) && values.first != values.second) {
      return Status::InvalidArgument(std::string(flag) + " " + std::to_string(values.first) + ": " + launcher +
                                     "'s job says " + std::to_string(values.second) + " (from " + where +
                                     "); leave " + flag + " out under " + launcher);
    }
  }
  if (tune.tune || tune.only) {
    return Status::InvalidArgument(std::string(tune.only ? "--tune-only" : "--tune") + " under " + launcher +
                                   ": it measures layouts by starting ranks itself; run train --tune without " +
                                   launcher + " (it measures Gloo and MPI), then start the job with the layout "
                                   "it chose");
  }
  return launcher;
}

// A rank of a job whose launcher bound it to CPUs of its own (mpirun's
// default --bind-to core, srun's --cpu-bind): its threads are checked against
// those CPUs, not the node's; the layout says so. A rank not bound shares the
// node's CPUs with the node's other ranks, as train's own ranks would.
StatusOr<Layout> JobRankLayout(const Environment& env, TrainConfig* config, const std::string& launcher) {
  const std::vector<int> mine = UsableCpus();
  const int own = std::max<int>(1, static_cast<int>(mine.size()));
  const bool bound = BoundByJobLauncher(env, own);
  const std::string cpus_text = (own == 1 ? "CPU " : "CPUs ") + Layout::CpuListText(mine);
  if (!bound) {
    const int64_t used = int64_t{config->dist.ranks} * config->ThreadsPerRank(own);
    if (used > own && !config->dist.oversubscribe) {
      return Status::InvalidArgument(launcher + "'s job runs " + std::to_string(config->dist.ranks) +
                                     " ranks on this node x " + std::to_string(config->ThreadsPerRank(own)) +
                                     " thread(s) = " + std::to_string(used) + " threads on its " +
                                     std::to_string(own) + " " + cpus_text +
                                     ": pass --oversubscribe to train to run it anyway");
    }
    Layout layout = PlanLayout(*config, mine);
    layout.not_pinned = PlacedByJobLauncher(launcher, config->dist.ranks);
    return layout;
  }
  if (config->dist.threads > own && !config->dist.oversubscribe) {
    return Status::InvalidArgument("--threads " + std::to_string(config->dist.threads) + ": " + launcher +
                                   " bound this rank to " + cpus_text + "; pass --threads " + std::to_string(own) +
                                   ", or give each rank more (mpirun --map-by slot:PE=N, or --bind-to none)");
  }
  // Each of the node's ranks is taken to have as many CPUs as this one.
  std::vector<int> node(static_cast<size_t>(own) * static_cast<size_t>(config->dist.ranks));
  for (size_t i = 0; i < node.size(); ++i) node[i] = static_cast<int>(i);
  Layout layout = PlanLayout(*config, node);
  layout.not_pinned = "bound by " + launcher + ": this rank to " + cpus_text;
  return layout;
}

// --ranks's default, 2, where this process may use 1 CPU (a 1-vCPU machine,
// `docker run --cpus 1`, taskset): 1 rank, said, instead of the refusal a
// given --ranks 2 gets. Every node of a run must run the same ranks, so a
// run of several nodes is left to the refusal.
void FitDefaultRanks(const std::vector<std::string>& given, TrainConfig* config) {
  const int cpus = std::max<int>(1, static_cast<int>(UsableCpus().size()));
  const bool ranks_given = std::find(given.begin(), given.end(), "--ranks") != given.end();
  if (ranks_given || config->dist.nnodes > 1 || config->dist.oversubscribe || config->dist.ranks <= cpus) return;
  std::fprintf(stderr, "train: %d rank%s: the default, --ranks %d, is more ranks than the %d CPU%s this process may "
               "use (--ranks %d --oversubscribe runs them anyway)\n", cpus, cpus == 1 ? "" : "s", config->dist.ranks,
               cpus, cpus == 1 ? "" : "s", config->dist.ranks);
  config->dist.ranks = cpus;
}

// --resume auto, a job's one command line for its first start and its
// requeues: the newest checkpoint in --checkpoint-dir where there is one (as
// --resume latest), else a new run, said where `says` (the process that
// answers for the run).
void ResolveAutoResume(TrainConfig* config, bool says) {
  std::string& resume = config->checkpoint.resume;
  if (resume != "auto") return;
  resume = LatestCheckpoint(config->checkpoint.dir).ok() ? "latest" : "";
  if (resume.empty() && says) {
    std::fprintf(stderr, "train: --resume auto: no checkpoint in %s yet: a new run\n", config->checkpoint.dir.c_str());
  }
}

// This process's rank in the job its environment describes (OpenMPI's,
// srun's or torchrun's variable), or -1: known even where the rest of the
// environment is refused, to name the rank that says why.
int RankFromEnvironment(const Environment& env) {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"}) {
    if (env.Has(name)) return env.Number(name);
  }
  return -1;
}

// Which part of a run this process plays.
enum class Role {
  kLauncher,      // the user's train: checks the run, then starts its ranks, or trains as its one rank
  kLaunchedRank,  // a rank the launcher started (--rank), telling it how it fares (heartbeat.h)
  kJobRank,       // a rank of a job torchrun, mpirun or srun started: no launcher of ours
};

}  // namespace

int RunTrain(TrainConfig config, int rank, bool json, const std::vector<std::string>& argv,
             const std::string& layout_json, const TuneRequest& tune, const std::vector<std::string>& given,
             const Environment& env) {
  Role role = rank >= 0 ? Role::kLaunchedRank : Role::kLauncher;
  std::string job_launcher;  // torchrun, mpirun or srun for a job's rank
  if (role == Role::kLaunchedRank) {
    if (Status attached = AttachHeartbeat(env); !attached.ok()) return Fail(attached, rank);
  } else {
    StatusOr<std::string> job = FromJob(env, &config, given, tune, &rank);
    if (!job.ok()) return Fail(job.status(), RankFromEnvironment(env));
    if (!job->empty()) role = Role::kJobRank;
    job_launcher = std::move(job).value();
    if (role == Role::kJobRank && job_launcher != "torchrun") {
      // No launcher of ours watches these ranks: those on this machine watch each other.
      if (StatusOr<MpiJobPlace> place = ReadMpiJobPlace(env); place.ok()) {
        JoinPeerBoard(MpiJobId(env), place->global, place->local, place->local_world);
      }
    }
  }
  if (role == Role::kLauncher && config.dist.backend == Backend::kMpi && config.dist.nnodes > 1) {
    return Fail(Status::InvalidArgument(
                    "--backend mpi --nnodes " + std::to_string(config.dist.nnodes) +
                    ": train starts MPI jobs on this machine only; across machines start it with mpirun or srun "
                    "(e.g. mpirun -np 4 -H a:2,b:2 train --db DB --backend mpi), or use --backend gloo"),
                0);
  }
  const int named_rank = std::max(rank, 0);  // the launcher's failures are said as rank 0's
  const bool backend_asked = config.dist.backend != Backend::kAuto;  // else --tune may choose it
  if (Status backend = ResolveBackend(env, &config, role != Role::kLauncher); !backend.ok()) {
    return Fail(backend, named_rank);
  }
  if (role == Role::kLauncher) FitDefaultRanks(given, &config);
  // The launcher plans the layout over the CPUs it may use; a rank, pinned to
  // its own, is told it (and checks the config against the launcher's cores).
  StatusOr<Layout> layout = role == Role::kLaunchedRank && !layout_json.empty() ? Layout::FromJson(layout_json)
                            : role == Role::kJobRank ? JobRankLayout(env, &config, job_launcher)
                                                     : StatusOr<Layout>(PlanLayoutFreeFirst(config, UsableCpus()));
  if (!layout.ok()) return Fail(layout.status(), named_rank);
  config.ResolveDefaults();
  if (Status valid = ValidateRun(config, layout->cores); !valid.ok()) return Fail(valid, named_rank);
  config.dist.threads = layout->threads;  // what runs is what is printed
  // The db decides the input, the evaluated split and `--model auto`, the
  // same way in every process; a rank trains on what its process resolved.
  StatusOr<ResolvedRun> resolved = ResolveRun(std::move(config), env);
  if (!resolved.ok()) return Fail(resolved.status(), named_rank);
  ResolvedRun run = std::move(resolved).value();
  const Manifest& manifest = run.db->manifest();
  if (Status splits = CheckSplits(manifest, run.config.data.db, run.config.data, SplitUse::kTrain); !splits.ok()) {
    return Fail(splits, named_rank);
  }
  std::optional<Checkpoint> resumed;  // read once per process
  ResolveAutoResume(&run.config, role != Role::kLaunchedRank && rank <= 0);
  if (!run.config.checkpoint.resume.empty()) {  // every process finds the same file: none is written before all start
    StatusOr<Checkpoint> from = ResolveResume(manifest.content_hash, &run.config);
    if (!from.ok()) return Fail(from.status(), named_rank);
    resumed = std::move(from).value();
  }
  const bool answers = role == Role::kLauncher || (role == Role::kJobRank && rank == 0);
  if (answers) {
    if (Status checked = Preflight(run); !checked.ok()) return Fail(checked, 0);
  }
  if (role == Role::kLauncher && (tune.tune || tune.only)) {
    resumed.reset();  // not held by a launcher: the tuned run reads it
    return RunTune(run.config, run.workload, tune, backend_asked, json, env);
  }
  DirectoryLock checkpoint_lock;  // held while this process lives: the checkpoint directory is this run's
  if (answers && run.config.dist.node_rank == 0 && !run.config.checkpoint.dir.empty()) {  // rank 0's node keeps them
    StatusOr<std::string> claimed =
        ClaimCheckpointDir(run.config.checkpoint.dir, resumed ? &*resumed : nullptr, &checkpoint_lock);
    if (!claimed.ok()) return Fail(claimed.status(), 0);
  }
  if (role == Role::kLauncher) {
    if (run.config.World() > 1) {
      resumed.reset();  // not held by a launcher: its ranks read it, and open the db
      run.db.reset();
      return Launch(run.config, layout.value(), argv, env);
    }
    rank = 0;  // one rank: the launcher trains, pinned before its thread pools start
    if (run.config.checkpoint.dir.empty()) SayStopsEndTheRun();
    if (!layout->cpus.empty()) {
      if (Status pinned = PinToCpus(layout->cpus[0]); !pinned.ok()) return Fail(pinned, 0);
    }
  }
  if (role == Role::kLaunchedRank && run.config.dist.backend == Backend::kMpi && !layout->cpus.empty()) {
    // Started through mpirun, which does not pin: each rank pins itself, as planned.
    const size_t local = static_cast<size_t>(rank - run.config.dist.node_rank * run.config.dist.ranks);
    if (local < layout->cpus.size() && !layout->cpus[local].empty()) {
      if (Status pinned = PinToCpus(layout->cpus[local]); !pinned.ok()) return Fail(pinned, rank);
    }
  }
  RunReport report(run.config, layout.value(), rank, json);
  report.SetTuneTable(tune.table_json);
  const bool many = run.config.World() > 1;
  if (Status started = report.Start(); !started.ok()) return Fail(started, rank, many);
  StatusOr<std::vector<EpochReport>> reports = RunRank(run, rank, report, std::move(resumed));
  if (!reports.ok()) return Fail(reports.status(), rank, many);
  if (Status finished = report.Finish(reports.value()); !finished.ok()) return Fail(finished, rank, many);
  return AgreedStop() != 0 ? StoppedBySignal(run.config, rank, role == Role::kLaunchedRank) : 0;
}

}  // namespace granary
