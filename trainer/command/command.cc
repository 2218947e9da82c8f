#include "trainer/command/command.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/cli.h"
#include "base/json_text.h"
#include "trainer/clock.h"
#include "trainer/command/command_tune.h"
#include "trainer/command/programs.h"
#include "trainer/command/torchrun_env.h"
#include "trainer/config/config.h"
#include "trainer/launch/held_cpus.h"
#include "trainer/launch/job_place.h"
#include "trainer/launch/launch.h"
#include "trainer/launch/layout.h"

namespace granary {
namespace {

// launch's flag bounds.
constexpr int kMostRanks = 1024, kMostThreads = 4096, kMostNodes = 4096, kMostRestarts = 100;
constexpr int kLongestTimeout_s = 7 * 24 * 3600, kLongestGrace_s = 3600;
// A probe's command shows its first step within this long, or cannot be tuned.
constexpr double kFirstStepAllowance_s = 120;
// Per rank, at least this many steps in a probe's window (a slow step makes
// the window longer), and the window at most this many times --tune-seconds.
constexpr int64_t kLeastProbeSteps = 10;
constexpr double kLongestProbeFactor = 3;

// OK if `value` is in low..high, else its refusal naming `flag`.
Status Within(const std::string& flag, int64_t value, int64_t low, int64_t high) {
  return value >= low && value <= high ? Status::OK() : OutOfRange(flag, std::to_string(value), Range(low, high));
}

// Where the job's ranks are: all started here (one node of --nnodes), or,
// under the user's mpirun or srun, this process alone as one rank of it.
struct Placement {
  CommandJob job;
  int local_ranks = 1;     // started here
  std::string launcher;    // "mpirun" or "srun" when under one
  std::string master_addr_from;  // the variable that named the rendezvous's node, if one did
};

StatusOr<Placement> Place(const CommandConfig& c, const Environment& env) {
  Placement p;
  if (!StartedAsJobRank(env)) {
    p.local_ranks = c.ranks;
    p.job.local_world = c.ranks;
    p.job.nnodes = c.nnodes;
    p.job.node_rank = c.node_rank;
    p.job.world = c.ranks * c.nnodes;
    p.job.first_rank = c.node_rank * c.ranks;
    p.job.master_addr = c.master_addr.empty() ? "127.0.0.1" : c.master_addr;
    p.job.master_port = c.master_port;
    return p;
  }
  GRANARY_ASSIGN_OR_RETURN(const MpiJobPlace place, ReadMpiJobPlace(env));
  p.launcher = place.launcher;
  const std::string under = " under " + place.launcher + " (a job of " + std::to_string(place.world) +
                            " processes): each process is one rank of that job";
  if (c.ranks_given && c.ranks != 1) return Status::InvalidArgument("--ranks " + std::to_string(c.ranks) + under);
  if (c.nnodes != 1 || c.node_rank != 0) {
    return Status::InvalidArgument("--nnodes/--node-rank" + under + ", placed by " + place.launcher);
  }
  if (c.tune || c.tune_only) {
    return Status::InvalidArgument("--tune" + under + "; run launch --tune on one node without " + place.launcher +
                                   ", then start the job with the layout it chose");
  }
  p.job.world = place.world;
  p.job.local_world = place.local_world;
  p.job.nnodes = place.world / place.local_world;
  p.job.node_rank = place.global / place.local_world;
  p.job.first_rank = place.global;
  p.job.first_local = place.local;
  if (!c.master_addr.empty()) {
    p.job.master_addr = c.master_addr;
  } else if (p.job.nnodes == 1) {
    p.job.master_addr = "127.0.0.1";
  } else {
    p.job.master_addr = JobMasterAddr(env, &p.master_addr_from);
    if (p.job.master_addr.empty()) {
      return Status::InvalidArgument("--master-addr is needed under " + place.launcher + " across " +
                                     std::to_string(p.job.nnodes) + " nodes: the address of the node of rank 0 " +
                                     "(neither MASTER_ADDR nor srun's SLURM_STEP_NODELIST gives it)");
    }
  }
  if (c.master_port > 0) {
    p.job.master_port = c.master_port;
  } else {
    GRANARY_ASSIGN_OR_RETURN(p.job.master_port, JobMasterPort(env));
  }
  if (p.job.master_port == 0) {
    return Status::InvalidArgument("--master-port is needed: " + place.launcher + "'s environment names no job id "
                                   "to derive the rendezvous port from");
  }
  return p;
}

// train's layout of `ranks` x `threads` over this process's CPUs (threads 0:
// the CPUs / ranks, as TrainConfig::ThreadsPerRank says). Under the user's
// mpirun or srun (`launcher`), the job's launcher places this one rank: one
// it did not bind shares the node's CPUs with the node's `local_world` ranks.
Layout PlanCommandLayout(const CommandConfig& c, int ranks, int threads, bool pin, const std::string& launcher,
                         int local_world, const Environment& env) {
  TrainConfig t;
  t.dist.ranks = ranks;
  t.dist.threads = threads;
  t.dist.pin = pin && launcher.empty();
  t.data.loader_threads = c.loader_threads;
  const std::vector<int> cpus = UsableCpus();
  const bool shared =
      !launcher.empty() && !BoundByJobLauncher(env, static_cast<int>(cpus.size())) && local_world > 1;
  if (shared && threads == 0) t.dist.threads = std::max<int>(1, static_cast<int>(cpus.size()) / local_world);
  Layout layout = PlanLayoutFreeFirst(t, cpus);
  if (!launcher.empty()) layout.not_pinned = PlacedByJobLauncher(launcher, shared ? local_world : 1);
  return layout;
}

// One start of the job in `layout` with `allocator`.
LaunchOptions OptionsFor(const CommandConfig& c, const Placement& p, const Layout& layout,
                         Allocator allocator, const std::string& program, const Environment& env) {
  LaunchOptions o;
  o.kind = RankKind::kCommand;
  o.name = "launch";
  o.program = program;
  o.args = c.command;
  o.script = PythonScriptOf(c.command);
  o.ranks = p.local_ranks;
  o.first_rank = p.job.first_rank;
  o.node_rank = p.job.node_rank;
  o.nnodes = p.job.nnodes;
  o.cpus = layout.cpus;
  o.parent = env;
  o.grace_s = c.grace_s;
  o.timeout_s = c.timeout_s;
  o.env = layout.ThreadEnvironment();
  o.env.push_back("GRANARY_LOADER_THREADS=" + std::to_string(c.loader_threads));
  if (!c.iface.empty()) o.env.push_back("GLOO_SOCKET_IFNAME=" + c.iface);
  if (const std::string& site = StartupModuleDir(); !site.empty()) {
    const std::string old = env.Get("PYTHONPATH");
    o.env.push_back("PYTHONPATH=" + site + (old.empty() ? "" : ":" + old));
  }
  if (const std::string library = AllocatorLibrary(allocator); !library.empty()) {
    const std::string old = env.Get("LD_PRELOAD");
    o.env.push_back("LD_PRELOAD=" + library + (old.empty() ? "" : ":" + old));
  }
  // Rank 0 writes to a terminal itself (its progress bars and colours stay);
  // into a pipe or file, where a line split by another rank's would be read
  // wrong, every rank's output comes in whole lines. (Under mpirun, whose
  // pseudo-terminal is no user's, and which interleaves what the processes
  // write, every rank is relayed.)
  const bool terminal = ::isatty(STDOUT_FILENO) == 1 && p.launcher.empty();
  for (int i = 0; i < p.local_ranks; ++i) {
    o.rank_env.push_back(TorchrunVariables(p.job, i));
    const int rank = p.job.first_rank + i;
    const bool automatic = c.prefix == RankPrefix::kAuto;
    if (c.prefix == RankPrefix::kNone || (automatic && rank == 0 && (terminal || p.job.world == 1))) {
      o.rank_prefix.push_back(std::nullopt);
    } else {
      o.rank_prefix.push_back(automatic && rank == 0 ? "" : "[rank " + std::to_string(rank) + "] ");
    }
  }
  return o;
}

// The last non-empty line written to the file `fd` (at most its last 4 KiB read).
std::string LastLine(int fd) {
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size <= 0) return "";
  std::string tail(static_cast<size_t>(std::min<off_t>(size, 4096)), '\0');
  const ssize_t n = ::pread(fd, tail.data(), tail.size(), size - static_cast<off_t>(tail.size()));
  tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r' || tail.back() == ' ')) tail.pop_back();
  const size_t start = tail.find_last_of('\n');
  return start == std::string::npos ? tail : tail.substr(start + 1);
}

// What a probe counts on the board: the steps of the ranks, summed.
int64_t StepsOf(const HeartbeatBoard& board, int ranks, int64_t* fewest) {
  int64_t sum = 0;
  *fewest = INT64_MAX;
  for (int r = 0; r < ranks; ++r) {
    const int64_t steps = board.Read(r).step;
    sum += steps;
    *fewest = std::min(*fewest, steps);
  }
  return sum;
}

// Runs the job as a probe of `candidate`: from every rank's first step plus
// a second of warm-up, its steps over about --tune-seconds; then stopped.
StatusOr<CommandProbe> Probe(const CommandConfig& c, Placement p, const CommandCandidate& candidate,
                             const std::string& program, const Environment& env) {
  p.local_ranks = p.job.local_world = p.job.world = candidate.ranks;
  p.job.master_port = FreePort();
  const Layout layout = PlanCommandLayout(c, candidate.ranks, candidate.threads, candidate.pin, "", 1, env);
  LaunchOptions o = OptionsFor(c, p, layout, candidate.allocator, program, env);
  o.timeout_s = 0;  // the probe's own deadline below
  o.stdout_fd = o.stderr_fd = -1;
  o.rank_prefix.assign(candidate.ranks, std::nullopt);
  // The command's own output would drown the table: its stdout goes
  // nowhere, its stderr into memory, whose last line a failed probe names.
  FILE* null = std::fopen("/dev/null", "w");
  if (null != nullptr) o.stdout_fd = ::fileno(null);
  const int err_fd = ::memfd_create("granary-probe-stderr", MFD_CLOEXEC);
  o.stderr_fd = err_fd;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point started = Clock::now();
  Clock::time_point first_step, window_start;
  int64_t steps_at_start = 0;
  CommandProbe probe;
  enum { kStarting, kWarming, kMeasuring } phase = kStarting;
  o.enough = [&](const HeartbeatBoard& board) {
    int64_t fewest = 0;
    const int64_t steps = StepsOf(board, candidate.ranks, &fewest);
    const Clock::time_point now = Clock::now();
    if (phase == kStarting) {
      if (fewest > 0) {
        phase = kWarming;
        first_step = now;
      } else if (SecondsSince(started) > kFirstStepAllowance_s) {
        probe.error = "no training step in " + std::to_string(static_cast<int>(kFirstStepAllowance_s)) + " s";
        return true;
      }
      return false;
    }
    if (phase == kWarming) {
      if (std::chrono::duration<double>(now - first_step).count() < 1) return false;
      phase = kMeasuring;
      window_start = now;
      steps_at_start = steps;
      return false;
    }
    const double window = std::chrono::duration<double>(now - window_start).count();
    const bool long_enough = window >= c.tune_seconds && steps - steps_at_start >= kLeastProbeSteps * candidate.ranks;
    if (!long_enough && window < kLongestProbeFactor * c.tune_seconds) return false;
    probe.seconds = window;
    probe.steps_per_s = static_cast<double>(steps - steps_at_start) / window;
    return true;
  };
  StatusOr<LaunchOutcome> outcome = LaunchRanks(o);
  if (null != nullptr) std::fclose(null);
  const std::string said = err_fd >= 0 ? LastLine(err_fd) : "";
  if (err_fd >= 0) ::close(err_fd);
  if (!outcome.ok()) return outcome.status();
  if (outcome->stopped_by != 0) {
    return Status::FailedPrecondition("--tune: stopped by signal " + std::to_string(outcome->stopped_by));
  }
  if (!outcome->enough) {
    probe.steps_per_s = 0;
    probe.error = phase == kStarting
                      ? (outcome->exit_code == 0 ? "the command ended without a training step"
                                                 : "the command failed before its first step (exit status " +
                                                       std::to_string(outcome->exit_code) + ")")
                      : "the command ended before " + std::to_string(static_cast<int>(c.tune_seconds)) +
                            " s of steps were measured; give it more work or a shorter --tune-seconds";
    if (!outcome->failure.empty()) probe.error += ": " + outcome->failure;
    if (!said.empty()) probe.error += "; its stderr's last line: " + said;
  }
  if (phase == kStarting && (outcome->enough || outcome->exit_code == 0)) {  // it ran, but showed no step
    probe.error += " (--tune counts torch.optim steps through granary's startup module, which launch puts on "
                   "PYTHONPATH: COMMAND must be a Python program that trains with a torch.optim optimizer)";
  }
  return probe;
}

// --tune: measures the candidates on the command, prints the table (or puts
// it in *report), and sets c's layout and allocator to the fastest.
Status TuneInto(CommandConfig* c, const Placement& p, const std::string& program, const Environment& env, int cores,
                nlohmann::json* report) {
  if (StartupModuleDir().empty()) {
    return Status::FailedPrecondition("--tune: granary's startup module (launch_site/sitecustomize.py) is not "
                                      "beside this program; it counts the command's steps");
  }
  CommandTuneOptions t;
  t.cores = cores;
  t.ranks = c->ranks_given ? c->ranks : 0;
  if (c->allocator != Allocator::kAuto) {
    t.allocators = {c->allocator};
  } else {
    for (const Allocator allocator : {Allocator::kGlibc, Allocator::kJemalloc, Allocator::kTcmalloc}) {
      if (allocator == Allocator::kGlibc || !AllocatorLibrary(allocator).empty()) t.allocators.push_back(allocator);
    }
  }
  t.run_probe = [&](const CommandCandidate& candidate) {
    std::fprintf(stderr, "launch: --tune: measuring %s\n", candidate.Describe().c_str());
    return Probe(*c, p, candidate, program, env);
  };
  GRANARY_ASSIGN_OR_RETURN(const CommandTuneTable table, TuneCommand(t));
  const CommandCandidate& chosen = table.Chosen()->candidate;
  (*report)["tune"] = ParseJson(table.ToJson());
  if (!c->json) {
    std::fprintf(c->tune_only ? stdout : stderr, "launch: --tune on %d CPUs (%.0f s):\n%s", cores, table.seconds,
                 table.ToText().c_str());
  }
  if (table.ranks_varied && chosen.ranks > 1) {
    std::fprintf(stderr,
                 "launch: --tune chose %d ranks: each runs the script's own batch, so the global batch is %d x the "
                 "script's (scale the learning rate, or pass --ranks to keep one)\n",
                 chosen.ranks, chosen.ranks);
  }
  c->ranks = chosen.ranks;
  c->threads = chosen.threads;
  c->pin = chosen.pin;
  c->allocator = chosen.allocator;
  return Status::OK();
}

// The job started, and started again after a failure up to --max-restarts
// times, each cause said; the last start's outcome. Each start is an
// element of *attempts.
StatusOr<LaunchOutcome> RunWithRestarts(const CommandConfig& c, Placement run, const Layout& layout,
                                        Allocator allocator, const std::string& program,
                                        const Environment& env, nlohmann::json* attempts) {
  const bool own_port = run.launcher.empty() && c.master_port == 0;  // one node, no port named: a free one each time
  LaunchOutcome last;
  for (int restart = 0; restart <= c.max_restarts; ++restart) {
    run.job.restart = restart;
    run.job.max_restarts = c.max_restarts;
    if (own_port) run.job.master_port = FreePort();
    GRANARY_ASSIGN_OR_RETURN(last, LaunchRanks(OptionsFor(c, run, layout, allocator, program, env)));
    attempts->push_back({{"exit_code", last.exit_code}, {"failure", last.failure}});
    if (last.exit_code == 0 || last.stopped_by != 0) break;
    const std::string cause = last.failure.empty() ? "exit status " + std::to_string(last.exit_code) : last.failure;
    if (restart < c.max_restarts) {
      std::fprintf(stderr, "launch: %s; restarting the job (restart %d of %d)\n", cause.c_str(), restart + 1,
                   c.max_restarts);
    } else if (c.max_restarts > 0) {
      std::fprintf(stderr, "launch: %s (after %d restart%s)\n", cause.c_str(), c.max_restarts,
                   c.max_restarts == 1 ? "" : "s");
    } else {
      std::fprintf(stderr, "launch: %s\n", cause.c_str());
    }
  }
  return last;
}

}  // namespace

Status ValidateCommandConfig(const CommandConfig& c) {
  if (c.command.empty() && c.module.empty()) {
    return Status::InvalidArgument("no COMMAND: launch [flags] -- COMMAND [ARGS...]");
  }
  if (!c.module.empty() && c.no_python) return Status::InvalidArgument("-m MODULE with --no-python: give one");
  GRANARY_RETURN_IF_ERROR(Within("--ranks", c.ranks, 1, kMostRanks));
  GRANARY_RETURN_IF_ERROR(Within("--threads", c.threads, 0, kMostThreads));
  GRANARY_RETURN_IF_ERROR(Within("--loader-threads", c.loader_threads, 0, kMostThreads));
  GRANARY_RETURN_IF_ERROR(Within("--nnodes", c.nnodes, 1, kMostNodes));
  GRANARY_RETURN_IF_ERROR(Within("--node-rank", c.node_rank, 0, c.nnodes - 1));
  GRANARY_RETURN_IF_ERROR(Within("--master-port", c.master_port, 0, 65535));
  if (c.nnodes > 1 && (c.master_addr.empty() || c.master_port == 0)) {
    return Status::InvalidArgument("--nnodes " + std::to_string(c.nnodes) +
                                   " needs --master-addr and --master-port: where node 0's rank 0 serves the "
                                   "rendezvous, the same on every node");
  }
  GRANARY_RETURN_IF_ERROR(Within("--timeout", c.timeout_s, 0, kLongestTimeout_s));
  GRANARY_RETURN_IF_ERROR(Within("--grace", c.grace_s, 0, kLongestGrace_s));
  GRANARY_RETURN_IF_ERROR(Within("--max-restarts", c.max_restarts, 0, kMostRestarts));
  const bool preloaded = c.allocator == Allocator::kJemalloc || c.allocator == Allocator::kTcmalloc;
  if (preloaded && AllocatorLibrary(c.allocator).empty()) {
    return Status::InvalidArgument(std::string("--allocator ") + NameOf(c.allocator) + ": not installed (Debian's " +
                                   (c.allocator == Allocator::kJemalloc ? "libjemalloc2" : "libtcmalloc-minimal4") +
                                   ")");
  }
  if (!(c.tune_seconds >= 1 && c.tune_seconds <= 600)) {
    return Status::InvalidArgument("--tune-seconds " + std::to_string(c.tune_seconds) + ": must be in 1..600");
  }
  if ((c.tune || c.tune_only) && c.nnodes > 1) {
    return Status::InvalidArgument("--tune with --nnodes " + std::to_string(c.nnodes) +
                                   ": tune on one node, then start every node with the layout it chose");
  }
  return Status::OK();
}

int RunCommand(CommandConfig c, const Environment& env) {
  auto fail = [](const Status& s) { return PrintFailure("launch", s); };
  if (Status valid = ValidateCommandConfig(c); !valid.ok()) {
    PrintFailure("launch", valid);
    return 2;
  }
  StatusOr<Placement> placed = Place(c, env);
  if (!placed.ok()) return fail(placed.status());
  const std::vector<std::string> given = c.command;
  c.command = TorchrunCommand(c.command, c.module, c.no_python);
  const bool script = c.command.size() > given.size() && c.module.empty();
  if (script && ::access(given[0].c_str(), R_OK) != 0) {
    return fail(Status::NotFound("COMMAND " + given[0] + ": no such file"));
  }
  const std::string program = FindProgram(c.command[0], env);
  if (program.empty()) {
    const bool python = c.command[0] == "python" && !FindProgram("python3", env).empty();  // Debian's name
    return fail(Status::NotFound("COMMAND " + c.command[0] + ": no such program" +
                                 (c.command[0].find('/') == std::string::npos ? " on PATH" : "") +
                                 (python ? " (Debian names it python3: launch SCRIPT.py runs a script with it)" : "")));
  }
  // `python3 nothere.py`: said once here, not by every rank's interpreter.
  if (const std::string named = PythonScriptOf(c.command); !named.empty() && ::access(named.c_str(), R_OK) != 0) {
    return fail(Status::NotFound("COMMAND " + c.command[0] + " " + named + ": no such file"));
  }
  // Said once per node (under mpirun or srun, by the job's first rank alone).
  if ((script || !c.module.empty()) && (placed->launcher.empty() || placed->job.first_rank == 0)) {
    std::fprintf(stderr, "launch: %s is run by %s -u (the python3 on PATH), as torchrun runs a script%s\n",
                 script ? given[0].c_str() : ("-m " + c.module).c_str(), program.c_str(),
                 script ? " (--no-python: as it is)" : "");
  }
  nlohmann::json report = {{"command", c.command}};
  if (c.tune || c.tune_only) {
    const int cores = std::max<int>(1, static_cast<int>(UsableCpus().size()));
    if (Status tuned = TuneInto(&c, placed.value(), program, env, cores, &report); !tuned.ok()) return fail(tuned);
    if (c.tune_only) {
      if (c.json) std::printf("%s\n", DumpJson(report).c_str());
      return 0;
    }
    placed = Place(c, env);  // in the layout chosen
    if (!placed.ok()) return fail(placed.status());
  }
  const Placement& run = placed.value();
  const bool under_mpi = !run.launcher.empty();
  const Layout layout = PlanCommandLayout(c, run.local_ranks, c.threads, c.pin, run.launcher,
                                              run.job.local_world, env);
  if (int64_t{layout.ranks} * layout.threads > layout.cores && !c.oversubscribe && !under_mpi) {
    return fail(Status::InvalidArgument("--ranks " + std::to_string(layout.ranks) + " x --threads " +
                                        std::to_string(layout.threads) + " threads on " +
                                        std::to_string(layout.cores) + " CPUs: pass --oversubscribe to run it anyway"));
  }
  const Allocator allocator = c.allocator == Allocator::kAuto ? Allocator::kGlibc : c.allocator;
  std::string job = under_mpi ? "; rank " + std::to_string(run.job.first_rank) + " of " + run.launcher + "'s job" : "";
  if (!run.master_addr_from.empty()) {
    job += ", rendezvous at " + run.job.master_addr + ":" + std::to_string(run.job.master_port) + " (" +
           run.master_addr_from + ")";
  }
  std::fprintf(stderr, "launch: %s; allocator %s%s\n", layout.Describe().c_str(), NameOf(allocator), job.c_str());
  if (StartupModuleDir().empty() && c.timeout_s > 0) {
    std::fprintf(stderr, "launch: granary's startup module is not beside this program: steps are not counted and "
                         "a hung rank is not named\n");
  }
  report["layout"] = ParseJson(layout.ToJson());
  report["allocator"] = NameOf(allocator);
  report["attempts"] = nlohmann::json::array();
  StatusOr<LaunchOutcome> last = RunWithRestarts(c, run, layout, allocator, program, env, &report["attempts"]);
  if (!last.ok()) return fail(last.status());
  if (last->stopped_by != 0) {
    std::fprintf(stderr, "launch: stopped by signal %d; the ranks were stopped\n", last->stopped_by);
  }
  report["exit_code"] = last->exit_code;
  if (c.json) std::printf("%s\n", DumpJson(report).c_str());
  std::fflush(stdout);
  return last->exit_code;
}

}  // namespace granary
