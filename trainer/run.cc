#include "trainer/run.h"

#include <sys/mman.h>
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

#include "store/db.h"
#include "store/json_text.h"
#include "store/output_path.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/workload.h"
#include "trainer/dist/comm.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/launch/launch.h"
#include "trainer/launch/layout.h"
#include "trainer/loop/int8_report.h"
#include "trainer/loop/rank.h"
#include "trainer/loop/rank_model.h"
#include "trainer/models/precision.h"
#include "trainer/models/registry.h"
#include "trainer/report/report.h"
#include "trainer/tune/tune.h"

namespace granary {
namespace {

// One line on stderr; "rank R: " first for ranks above 0, and for rank 0
// too once training runs on several ranks (`name_rank`), so a failure in a
// collective says where it was seen.
int Fail(const Status& s, int rank, bool name_rank = false) {
  if (rank > 0 || (rank == 0 && name_rank)) {
    std::fprintf(stderr, "train: rank %d: %s\n", rank, Printable(s.message()).c_str());
  } else {
    std::fprintf(stderr, "train: %s\n", Printable(s.message()).c_str());
  }
  return 1;
}

// How the launcher starts the ranks of `config` laid out as `layout`, each
// with `argv`.
LaunchOptions RankLaunch(const TrainConfig& config, const Layout& layout, const std::vector<std::string>& argv) {
  LaunchOptions launch;
  launch.args = argv;
  launch.args.insert(launch.args.end(), {"--layout", layout.ToJson()});
  launch.ranks = config.dist.ranks;
  launch.first_rank = config.dist.node_rank * config.dist.ranks;
  launch.node_rank = config.dist.node_rank;
  launch.nnodes = config.dist.nnodes;
  launch.port = config.dist.port;  // 0 (one machine, no port named): a FileStore, no port opened
  launch.cpus = layout.cpus;
  launch.env = layout.ThreadEnvironment();
  launch.timeout_s = config.World() > 1 ? config.dist.timeout_s : 0;  // one rank waits for nobody
  if (config.dist.backend == "mpi") launch.mpirun = MpirunPath();
  // c10d logs through glog to stderr what the rank's own line says again (a
  // rendezvous that timed out, ...); a GLOG_minloglevel of the user's wins.
  if (std::getenv("GLOG_minloglevel") == nullptr) launch.env.push_back("GLOG_minloglevel=3");
  return launch;
}

// The launcher's part: exit status of the run.
int Launch(const TrainConfig& config, const Layout& layout, const std::vector<std::string>& argv) {
  StatusOr<LaunchOutcome> outcome = LaunchRanks(RankLaunch(config, layout, argv));
  if (!outcome.ok()) return Fail(outcome.status(), 0);
  if (!outcome->failure.empty()) std::fprintf(stderr, "train: %s\n", outcome->failure.c_str());
  return outcome->exit_code;
}

// Every output may be written where it goes, before any rank starts
// (store/output_path.h): a finished run is not lost to a bad path, and no
// output replaces a db's file, an input or another output.
Status CheckOutputPaths(const TrainConfig& config) {
  std::vector<OutputPath> outputs = {{"--save", config.output.save, OutputKind::kModel},
                                     {"--quantize int8",
                                      config.compress.quantize == "int8" ? Int8Path(config.output.save) : "",
                                      OutputKind::kModel},
                                     {"--metrics", config.output.metrics, OutputKind::kJsonLines},
                                     {"--report", config.output.report, OutputKind::kHtml},
                                     {"--checkpoint-dir", config.checkpoint.dir, OutputKind::kDirectory}};
  if (std::optional<OutputPath> out = RedirectedStdout()) outputs.push_back(*out);
  std::vector<FlagPath> inputs = {{"--db", config.data.db}, {"--resume", config.checkpoint.resume}};
  if (IsModelFile(config.model.name)) inputs.push_back({"--model", config.model.name});
  return CheckOutputs(outputs, inputs);
}

// --quantize int8 is checked before any rank starts (CheckQuantizable); the
// layers that will stay fp32 are named then, one line each.
Status AnnounceQuantization(const ResolvedRun& run) {
  StatusOr<std::vector<std::string>> fp32 =
      CheckQuantizable(run.config, run.workload, run.db->manifest().num_classes);
  if (!fp32.ok()) return fp32.status();
  for (const std::string& layer : fp32.value()) {
    std::fprintf(stderr, "train: --quantize int8: will stay fp32: %s\n", Printable(layer).c_str());
  }
  return Status::OK();
}

// Claims --checkpoint-dir for this run (trainer/checkpoint/checkpoint.h) while `lock` lives.
Status ClaimCheckpoints(const TrainConfig& config, const std::optional<Checkpoint>& resumed, DirectoryLock* lock) {
  if (config.checkpoint.dir.empty()) return Status::OK();
  return ClaimCheckpointDir(config.checkpoint.dir, resumed ? &*resumed : nullptr, lock).status();
}

// An environment variable as a number; -1 if it is not set or not a number.
int EnvNumber(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return -1;
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  return *end == '\0' && v >= 0 && v <= INT32_MAX ? static_cast<int>(v) : -1;
}

// Started by mpirun or srun (StartedByMpiLauncher; no --rank) with
// --backend mpi or auto: this process is that rank of the MPI job, whose
// shape (rank, size, ranks per node: OMPI_COMM_WORLD_* or SLURM_*) is the
// run's; ranks must be numbered node by node (mpirun's and srun's default
// block mapping). Pinning is the MPI launcher's. False if not in an MPI job.
StatusOr<bool> FromMpiJob(TrainConfig* config, int* rank) {
  if (config->dist.backend == "gloo" || !StartedByMpiLauncher()) return false;
  int global = EnvNumber("OMPI_COMM_WORLD_RANK"), world = EnvNumber("OMPI_COMM_WORLD_SIZE");
  int local = EnvNumber("OMPI_COMM_WORLD_LOCAL_RANK"), local_world = EnvNumber("OMPI_COMM_WORLD_LOCAL_SIZE");
  const char* where = "mpirun's OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE";
  if (world < 0) {  // srun
    global = EnvNumber("SLURM_PROCID"), world = EnvNumber("SLURM_NTASKS"), local = EnvNumber("SLURM_LOCALID");
    const int nodes = EnvNumber("SLURM_NNODES");
    local_world = nodes > 0 && world > 0 && world % nodes == 0 ? world / nodes : -1;
    where = "srun's SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NNODES (the same tasks on every node)";
  }
  if (global < 0 || world < 1 || local < 0 || local_world < 1 || world % local_world != 0 || global >= world ||
      local != global % local_world) {
    return Status::InvalidArgument(std::string("MPI job: ") + where +
                                   " do not give a rank of equal nodes numbered node by node (--map-by slot)");
  }
  config->dist.backend = "mpi";
  config->dist.ranks = local_world;
  config->dist.nnodes = world / local_world;
  config->dist.node_rank = global / local_world;
  config->dist.pin = false;  // the MPI launcher places its processes
  *rank = global;
  return true;
}

// --backend auto: in an MPI job (mpirun, srun) MPI; in a rank, what its
// launcher started it with (mpirun, or a fork); in the launcher Gloo. (MPI
// is faster on one machine, docs/BENCHMARKS.md "Backends", but OpenMPI
// 4.1's mpirun listens on every interface for PMIx tools, which a
// one-machine run over Gloo never does: so it is asked for, not chosen.)
// --backend mpi in a build without it is refused.
Status ResolveBackend(TrainConfig* config, bool is_rank) {
  std::string& backend = config->dist.backend;
  if (backend == "auto") backend = is_rank && StartedByMpiLauncher() ? "mpi" : "gloo";
  if (backend == "mpi" && !CommHasMpi()) {
    return Status::InvalidArgument(
        "--backend mpi: this build of train has no MPI (install libopenmpi-dev, e.g. with tools/setup, and rebuild)");
  }
  return Status::OK();
}

// Started by torchrun (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set, no --rank): this process is that rank; the run's shape
// comes from the environment. False if not under torchrun.
StatusOr<bool> FromTorchrun(TrainConfig* config, int* rank) {
  const char* names[] = {"RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  std::vector<std::string> v;
  for (const char* name : names) {
    const char* value = std::getenv(name);
    if (value == nullptr) return false;
    v.emplace_back(value);
  }
  int global = -1, world = 0, local_world = 0, port = 0;
  try {
    global = std::stoi(v[0]), world = std::stoi(v[1]), local_world = std::stoi(v[2]), port = std::stoi(v[4]);
  } catch (const std::exception&) {
    return Status::InvalidArgument(
        "torchrun environment: RANK, WORLD_SIZE, LOCAL_WORLD_SIZE or MASTER_PORT is not a number");
  }
  if (local_world < 1 || world < local_world || world % local_world != 0 || global < 0 || global >= world) {
    return Status::InvalidArgument("torchrun environment: RANK " + v[0] + ", WORLD_SIZE " + v[1] +
                                   ", LOCAL_WORLD_SIZE " + v[2] + " do not fit together");
  }
  config->dist.ranks = local_world;
  config->dist.nnodes = world / local_world;
  config->dist.node_rank = global / local_world;
  config->dist.host = v[3];
  config->dist.port = port;
  config->dist.pin = false;  // torchrun places its processes
  *rank = global;
  return true;
}

// A memfd holding what a probe's ranks print.
class Capture {
 public:
  Capture() : fd_(::memfd_create("granary-probe", MFD_CLOEXEC)) {}
  ~Capture() {
    if (fd_ >= 0) ::close(fd_);
  }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  int fd() const { return fd_; }
  std::string Text() const {
    std::string text;
    char buffer[1 << 16];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(fd_, buffer, sizeof(buffer), at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return text;
      text.append(buffer, static_cast<size_t>(n));
      at += n;
    }
  }

 private:
  int fd_;
};

// One --tune probe: the ranks of `config` (started by this process, as a
// run's launcher starts them), each with `args`; what rank 0 printed.
StatusOr<ProbeOutput> RunProbe(const TrainConfig& config, const std::vector<std::string>& args) {
  Capture out, err;
  if (out.fd() < 0 || err.fd() < 0) return Status::IOError("memfd", "capture a probe's output", errno);
  const Layout layout = PlanLayout(config, UsableCpus());
  LaunchOptions launch = RankLaunch(config, layout, args);
  launch.stdout_fd = out.fd();
  launch.stderr_fd = err.fd();
  StatusOr<LaunchOutcome> outcome = LaunchRanks(launch);
  if (!outcome.ok()) return outcome.status();
  if (outcome->stopped_by != 0) {
    return Status::FailedPrecondition(std::string("stopped by ") + ::strsignal(outcome->stopped_by));
  }
  ProbeOutput p;
  p.exit_code = outcome->exit_code;
  p.out = out.Text();
  p.err = outcome->failure.empty() ? err.Text() : outcome->failure;
  return p;
}

// train --tune: measures the candidates (trainer/tune/tune.h), prints the table,
// then (unless --tune-only) becomes the run in the chosen layout.
// `backend_asked`: --backend was gloo or mpi, not auto (the tuner's to choose).
int Tune(const TrainConfig& config, const Workload& workload, const TuneRequest& request, bool backend_asked,
         bool json) {
  TuneOptions options;
  options.cores = static_cast<int>(UsableCpus().size());
  if (Status bounded = CheckTuneSeconds(request.seconds); !bounded.ok()) return Fail(bounded, 0);
  TrainConfig probing = config;  // what every probe runs with, less its layout
  probing.data.probe_s = request.seconds;
  if (Status valid = probing.Validate(options.cores); !valid.ok()) return Fail(valid, 0);
  if (config.dist.nnodes > 1) return Fail(Status::InvalidArgument("--tune runs on one node (not with --nnodes)"), 0);
  options.numerics = request.numerics;
  options.image_input = workload.kind == InputKind::kImage;
  options.bf16_native = CpuHasNativeBf16();
  options.seconds = request.seconds;
  options.mpi = !backend_asked && CommHasMpi() && ::access(MpirunPath().c_str(), X_OK) == 0;
  // A candidate names its backend: the user's "--backend auto" would be a second one.
  const std::vector<std::string> run_args =
      options.mpi ? WithoutOptions(request.args, {"--backend"}, {}) : request.args;
  // Probes leave nothing behind: no checkpoint, model, metrics or report.
  const std::vector<std::string> probe_args =
      WithoutOptions(run_args,
                     {"--save", "--metrics", "--report", "--log-every", "--checkpoint-dir", "--checkpoint-every",
                      "--keep", "--resume"},
                     {"--json"});
  options.run_probe = [&](const TrainConfig& probe, const TuneCandidate& candidate) {
    std::vector<std::string> args = ArgsFor(probe_args, candidate);
    args.insert(args.end(), {"--tune-probe", std::to_string(probe.data.probe_s), "--json"});
    return RunProbe(probe, args);
  };
  std::fprintf(stderr, "train: --tune: measuring layouts on %d cores, about %g s each\n", options.cores,
               request.seconds);
  StatusOr<TuneTable> table = RunTune(config, options);
  if (!table.ok()) return Fail(table.status(), 0);
  const TuneCandidate& chosen = table->Chosen()->candidate;
  std::fprintf(stderr, "%strain: tuned in %.1f s: %s\n", table->ToText().c_str(), table->seconds,
               chosen.Describe().c_str());
  if (request.only) {
    if (json) std::printf("%s\n", DumpJson(nlohmann::json{{"tune", ParseJson(table->ToJson())}}).c_str());
    return 0;
  }
  std::vector<std::string> args = ArgsFor(run_args, chosen);
  args.insert(args.end(), {"--tune-table", table->ToJson()});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execv("/proc/self/exe", argv.data());
  return Fail(Status::IOError("/proc/self/exe", "run the tuned layout", errno), 0);
}

}  // namespace

int RunTrain(TrainConfig config, int rank, bool json, const std::vector<std::string>& argv,
             const std::string& layout_json, const TuneRequest& tune) {
  if (rank >= 0) {  // started by our launcher: tell it how we fare (heartbeat.h)
    if (Status attached = AttachHeartbeat(); !attached.ok()) return Fail(attached, rank);
  }
  // The launcher plans the layout over the CPUs it may use; a rank, pinned to
  // its own, is told it (and checks the config against the launcher's cores).
  bool under_torchrun = false;  // or an MPI launcher: no launcher of ours
  const bool from_launcher = rank >= 0;
  if (rank < 0) {
    StatusOr<bool> torchrun = FromTorchrun(&config, &rank);
    if (!torchrun.ok()) return Fail(torchrun.status(), 0);
    under_torchrun = torchrun.value();
    if (!under_torchrun) {
      StatusOr<bool> mpi_job = FromMpiJob(&config, &rank);
      if (!mpi_job.ok()) return Fail(mpi_job.status(), 0);
      under_torchrun = mpi_job.value();
    } else if (config.dist.backend == "auto") {
      config.dist.backend = "gloo";  // torchrun's environment is a Gloo rendezvous
    }
  }
  const bool backend_asked = config.dist.backend != "auto";  // else --tune may choose it
  if (Status backend = ResolveBackend(&config, rank >= 0); !backend.ok()) return Fail(backend, std::max(rank, 0));
  StatusOr<Layout> layout = Status::FailedPrecondition("no layout");
  if (rank >= 0 && !layout_json.empty()) {
    layout = Layout::FromJson(layout_json);
    if (!layout.ok()) return Fail(layout.status(), rank);
  } else {
    layout = PlanLayout(config, UsableCpus());
  }
  config.ResolveDefaults();
  if (Status valid = config.Validate(layout->cores); !valid.ok()) return Fail(valid, rank);
  config.dist.threads = layout->threads;  // what runs is what is printed
  // The db decides the input, the evaluated split and `--model auto`, the
  // same way in every process; a rank trains on what its process resolved.
  StatusOr<ResolvedRun> resolved = ResolveRun(std::move(config));
  if (!resolved.ok()) return Fail(resolved.status(), std::max(rank, 0));
  ResolvedRun run = std::move(resolved).value();
  const Manifest& manifest = run.db->manifest();
  if (Status splits = CheckSplits(manifest, run.config.data.db, run.config.data, SplitUse::kTrain); !splits.ok()) {
    return Fail(splits, std::max(rank, 0));
  }
  std::optional<Checkpoint> resumed;  // read once per process
  if (!run.config.checkpoint.resume.empty()) {  // every process finds the same file: none is written before all start
    StatusOr<Checkpoint> from = ResolveResume(manifest.content_hash, &run.config);
    if (!from.ok()) return Fail(from.status(), std::max(rank, 0));
    resumed = std::move(from).value();
  }
  DirectoryLock checkpoint_lock;  // held while this process lives: the checkpoint directory is this run's
  if (rank < 0) {
    if (Status fits = CheckModelFits(run.config, run.workload, manifest.num_classes, ModelUse::kTrain); !fits.ok()) {
      // A model past --timeout still runs on a thread: exit without running
      // LibTorch's static destructors under it (that crashed 1 exit in 3).
      Fail(fits, 0);
      std::fflush(nullptr);
      std::_Exit(1);
    }
    if (Status quantizable = AnnounceQuantization(run); !quantizable.ok()) return Fail(quantizable, 0);
    if (Status writable = CheckOutputPaths(run.config); !writable.ok()) return Fail(writable, 0);
    if (run.config.model.precision == "bf16" && !CpuHasNativeBf16()) {
      std::fprintf(stderr,
                   "train: warning: this CPU has no native bf16 (AVX512-BF16 or AMX): bf16 runs emulated, "
                   "likely slower than fp32\n");
    }
    if (tune.tune || tune.only) {
      resumed.reset();  // not held by a launcher: the tuned run reads it
      return Tune(run.config, run.workload, tune, backend_asked, json);
    }
    if (run.config.dist.node_rank == 0) {  // rank 0's node keeps the checkpoints
      Status claimed = ClaimCheckpoints(run.config, resumed, &checkpoint_lock);
      if (!claimed.ok()) return Fail(claimed, 0);
    }
    if (run.config.World() > 1) {
      resumed.reset();  // not held by a launcher: its ranks read it, and open the db
      run.db.reset();
      return Launch(run.config, layout.value(), argv);
    }
    rank = 0;  // one rank: this process, pinned before its thread pools start
    if (!layout->cpus.empty()) {
      if (Status pinned = PinToCpus(layout->cpus[0]); !pinned.ok()) return Fail(pinned, 0);
    }
  }
  if (under_torchrun && rank == 0) {  // no launcher: rank 0 checks the run's outputs and the quantization
    if (Status writable = CheckOutputPaths(run.config); !writable.ok()) return Fail(writable, 0);
    if (Status quantizable = AnnounceQuantization(run); !quantizable.ok()) return Fail(quantizable, 0);
    Status claimed = ClaimCheckpoints(run.config, resumed, &checkpoint_lock);
    if (!claimed.ok()) return Fail(claimed, 0);
  }
  if (from_launcher && run.config.dist.backend == "mpi" && !layout->cpus.empty()) {
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
  return 0;
}

}  // namespace granary
