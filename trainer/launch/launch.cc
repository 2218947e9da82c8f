#include "trainer/launch/launch.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "trainer/clock.h"
#include "trainer/launch/error_files.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/launch/mpi_session_dir.h"
#include "trainer/launch/mpirun_job.h"
#include "trainer/launch/output_relay.h"
#include "trainer/launch/rank_processes.h"

namespace granary {

namespace {

using Clock = std::chrono::steady_clock;

// A rank quiet for --timeout plus this long is hung by the launcher's own
// watch; the slack lets a peer on this machine, whose collective gives up
// after --timeout, say so first.
constexpr double kHangSlack_s = 2;

// How long ranks that keep checkpoints have, once told to stop, to finish
// their step and save it before SIGKILL (Slurm's KillWait is 30 s too).
constexpr int kStopSaveGrace_s = 30;

// The signals the launcher handles synchronously (sigtimedwait) while it waits.
sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);  // a closed terminal or ssh session: as SIGTERM
  sigaddset(&set, SIGUSR1);  // what schedulers send before a time limit (PassOnSignal)
  sigaddset(&set, SIGUSR2);
  sigaddset(&set, SIGCHLD);
  return set;
}

// Passes signal `sig`, which the launcher got, on to its ranks; whether it
// stops the run (noted in `outcome`). SIGINT, SIGTERM and SIGHUP (as SIGTERM)
// stop it; so do SIGUSR1 and SIGUSR2 for train's ranks, which save the step
// they reach: schedulers send one before a time limit for that (Slurm's
// --signal=USR1@120, submitit's USR2). A command's ranks get those two as
// they come, to do what their script does with them (Lightning saves and
// requeues on SIGUSR1), and the run goes on.
bool PassOnSignal(const LaunchOptions& o, int sig, const Ranks& ranks, LaunchOutcome* outcome) {
  const bool user = sig == SIGUSR1 || sig == SIGUSR2;
  if (!user && sig != SIGINT && sig != SIGTERM && sig != SIGHUP) return false;
  ranks.SignalAll(sig == SIGHUP ? SIGTERM : sig, o.ranks);  // as a terminal's Ctrl-C would reach them all
  if (user && o.kind == RankKind::kCommand) return false;
  if (outcome->exit_code == 0) outcome->exit_code = 128 + sig;
  if (outcome->stopped_by == 0) outcome->stopped_by = sig;
  return true;
}

// Restores the signal mask it found when it goes out of scope.
class SignalMaskGuard {
 public:
  explicit SignalMaskGuard(const sigset_t& block) { ::pthread_sigmask(SIG_BLOCK, &block, &saved_); }
  ~SignalMaskGuard() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  const sigset_t& saved() const { return saved_; }

 private:
  sigset_t saved_;
};

// A file descriptor closed when it goes out of scope.
struct OwnedFd {
  int fd = -1;
  OwnedFd() = default;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() {
    if (fd >= 0) ::close(fd);
  }
};

// Forks the ranks (under mpirun: mpirun alone, which starts them), each
// exec'd as `o` says, into *ranks; `relays[r]`, where there is one: the
// output of rank r (of mpirun) goes through it. On a failed fork, what was
// started is killed.
Status StartProcesses(const LaunchOptions& o, const HeartbeatBoard& board, const RankErrorFiles* errors,
                      int rendezvous_fd, const std::string& session_dir,
                      const std::vector<std::unique_ptr<OutputRelay>>& relays, const sigset_t& mask, Ranks* ranks) {
  const bool mpi = !o.mpirun.empty();
  const pid_t launcher = ::getpid();
  const std::string program = ProgramPath(o.program);
  ranks->oom_kills = CountOomKills();
  for (int rank = 0; rank < (mpi ? 1 : o.ranks); ++rank) {
    RankExec exec = mpi ? PrepareMpirun(o, board, program, session_dir)
                        : PrepareRank(o, board, errors, rendezvous_fd, rank);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      ranks->SignalAll(SIGKILL, o.ranks);
      ranks->Reap([](int, int) {});
      return Status::IOError("fork", mpi ? "start mpirun" : "start rank " + std::to_string(rank), err);
    }
    if (pid == 0) {
      const OutputRelay* relay = static_cast<size_t>(rank) < relays.size() ? relays[rank].get() : nullptr;
      ExecRank(o, exec, rank, launcher, mask, relay ? relay->child_stdout() : o.stdout_fd,
               relay ? relay->child_stderr() : o.stderr_fd);
    }
    if (o.kind == RankKind::kCommand) {
      ::setpgid(pid, pid);  // as the child does itself: whichever runs first
      ranks->groups.push_back(pid);
    }
    ranks->pids.push_back(pid);
    ++ranks->running;
  }
  return Status::OK();
}

// The relays the ranks' output goes through, one per rank (null where a
// rank writes to the launcher's own output), or mpirun's alone: its output
// passes through the launcher (output_relay.h), as does that of a rank
// relayed in whole lines (LaunchOptions::rank_prefix).
StatusOr<std::vector<std::unique_ptr<OutputRelay>>> MakeRelays(const LaunchOptions& o) {
  const int out = o.stdout_fd >= 0 ? o.stdout_fd : STDOUT_FILENO;
  const int err = o.stderr_fd >= 0 ? o.stderr_fd : STDERR_FILENO;
  std::vector<std::unique_ptr<OutputRelay>> relays;
  if (!o.mpirun.empty()) {
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<OutputRelay> made, OutputRelay::Create(out, err, /*mpirun=*/true));
    relays.push_back(std::move(made));
    return relays;
  }
  for (const std::optional<std::string>& prefix : o.rank_prefix) {
    relays.emplace_back();
    if (!prefix) continue;
    GRANARY_ASSIGN_OR_RETURN(relays.back(), OutputRelay::Create(out, err, /*mpirun=*/false, *prefix));
  }
  return relays;
}

// The value of `name` in local rank `rank`'s own variables (rank_env), or "".
std::string RankVariable(const LaunchOptions& o, int rank, const std::string& name) {
  if (static_cast<size_t>(rank) >= o.rank_env.size()) return "";
  for (const std::string& var : o.rank_env[rank]) {
    if (var.compare(0, name.size() + 1, name + "=") == 0) return var.substr(name.size() + 1);
  }
  return "";
}

// A line on how rank `rank`, forked here, ended with `wstatus` (not 0): killed
// by a signal, or, for a command, its exit status and the exception it
// recorded in its error file, if any; "" for a train rank that exited (it
// said why itself).
std::string RankExitLine(const LaunchOptions& o, int rank, int wstatus, const RankErrorFiles* errors,
                         const OomKills& oom_kills) {
  const std::string others = o.ranks > 1 ? "; stopping the other ranks" : "";
  if (WIFSIGNALED(wstatus)) {
    return RankName(o, rank) + " was killed by signal " + std::to_string(WTERMSIG(wstatus)) + " (" +
           ::strsignal(WTERMSIG(wstatus)) + ")" +
           (WTERMSIG(wstatus) == SIGKILL ? OutOfMemoryCause(o, oom_kills) : "") + others;
  }
  if (o.kind == RankKind::kCommand) {
    const std::string recorded = errors != nullptr ? errors->Message(rank) : "";
    std::string advice = CpuAdvice(recorded);
    if (const std::string lines = advice.empty() ? "" : GpuLines(o.script); !lines.empty()) {
      advice += "; its lines written for GPUs, each of which fails here in turn: " + lines;
    }
    if (advice.empty()) advice = RendezvousAdvice(recorded, o.first_rank + rank, RankVariable(o, rank, "MASTER_PORT"));
    if (advice.empty()) advice = MissingModuleAdvice(recorded, o.program, o.parent.Get("PATH"));
    return RankName(o, rank) + " exited with status " + std::to_string(WEXITSTATUS(wstatus)) +
           (recorded.empty() ? "" : " (" + recorded + ")") + (advice.empty() ? "" : ": " + advice) + others;
  }
  return "";
}

// A command's rank that ended with status 0 while its peers still ran (a
// script's stopping rule that one rank reached alone, an exit in one
// branch): the others' next collective fails or waits without it, and
// their failure is what ends the job. Named beside that failure.
class EarlyEnd {
 public:
  void Note(const LaunchOptions& o, int rank, const RankPulse& pulse, size_t still_running) {
    if (o.kind != RankKind::kCommand || !what_.empty() || still_running == 0) return;
    what_ = RankName(o, rank) + " ended with status 0 at step " + std::to_string(pulse.step);
    at_ = Clock::now();
  }
  // `failure` (a line on a rank, "...; stopping the ...") with ", 0.2 s
  // after rank 1 ended with status 0 at step 5 (...)" before its end.
  std::string Beside(std::string failure) const {
    if (what_.empty() || failure.empty()) return failure;
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.1f", SecondsSince(at_));
    const std::string after = std::string(", ") + seconds + " s after " + what_ +
                              " (a rank that ends before its peers leaves their collectives without it)";
    const size_t end = failure.rfind("; stopping the ");
    return failure.insert(end == std::string::npos ? failure.size() : end, after);
  }

 private:
  std::string what_;
  Clock::time_point at_;
};

// Once every rank has ended: the relays' rest written (under mpirun, as
// FinishMpirunOutput says), a stdout that could not be written failing the run.
void FinishRelays(const LaunchOptions& o, const std::vector<std::unique_ptr<OutputRelay>>& relays,
                  bool ended_by_mpi, LaunchOutcome* outcome) {
  if (!o.mpirun.empty()) {
    FinishMpirunOutput(relays[0].get(), ended_by_mpi, outcome);
    return;
  }
  for (const std::unique_ptr<OutputRelay>& relay : relays) {
    if (!relay) continue;
    relay->Finish(/*drain_s=*/2);  // a process the rank left behind may hold its pipe
    if (relay->stdout_error() != 0 && outcome->exit_code == 0) {
      outcome->exit_code = 1;
      outcome->failure = std::string("stdout: write failed: ") + std::strerror(relay->stdout_error());
    }
  }
}

// A line naming a rank that hangs past --timeout, by the rule of the ranks'
// kind (FindHungRank, FindQuietCommandRank), or "".
std::string FindHang(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, double launched_s) {
  return o.kind == RankKind::kCommand
             ? FindQuietCommandRank(o, board, ranks, o.timeout_s)
             : FindHungRank(o, board, ranks, o.timeout_s + kHangSlack_s, true, launched_s);
}

// Reaps the ranks that have ended and passes each to on_exit(rank, wait
// status), the first to end first. Ranks end together when one fails and
// its peers then fail for want of it, and on a loaded machine they are
// reaped together, or the peer first: Python's finalization can close a
// rank's sockets, failing its peers, before its process is gone. So ranks
// are ordered by when they said they began to end (train's ranks, Python
// ranks through launch's startup module); one a signal ended without
// saying so (SIGKILL) first, the rest after, in rank order. An end is held
// while a rank that said it began to end before it is still exiting, for
// at most kEndOrderWait_s.
class EndOrder {
 public:
  template <typename F>
  void Reap(Ranks& ranks, const HeartbeatBoard& board, F on_exit) {
    ranks.Reap([&](int rank, int wstatus) {
      const RankPulse p = board.Read(rank);
      const int64_t order = p.ended != RankEnd::kRunning ? p.ended_ns
                            : WIFSIGNALED(wstatus)       ? std::numeric_limits<int64_t>::min()
                                                         : std::numeric_limits<int64_t>::max();
      if (held_.empty()) held_since_ = Clock::now();
      held_.push_back({rank, wstatus, order});
    });
    std::stable_sort(held_.begin(), held_.end(), [](const Ended& a, const Ended& b) { return a.order < b.order; });
    while (!held_.empty()) {
      const Ended first = held_.front();
      if (SecondsSince(held_since_) < kEndOrderWait_s && EarlierStillExiting(ranks, board, first.order)) return;
      held_.erase(held_.begin());
      on_exit(first.rank, first.wstatus);
    }
  }

 private:
  static constexpr double kEndOrderWait_s = 2;
  struct Ended {
    int rank, wstatus;
    int64_t order;
  };
  // Whether a rank not yet reaped said it began to end before `order`.
  static bool EarlierStillExiting(const Ranks& ranks, const HeartbeatBoard& board, int64_t order) {
    if (ranks.under_mpirun()) return false;  // one process, mpirun
    for (int r = 0; r < static_cast<int>(ranks.pids.size()); ++r) {
      if (!ranks.Alive(r)) continue;
      const RankPulse p = board.Read(r);
      if (p.ended != RankEnd::kRunning && p.ended_ns < order) return true;
    }
    return false;
  }
  std::vector<Ended> held_;
  Clock::time_point held_since_;
};

// The file train's ranks on one machine meet through when no port is named
// (a FileStore), into *fd; inherited by the ranks (no CLOEXEC). None otherwise.
Status MakeRendezvousFile(const LaunchOptions& o, OwnedFd* fd) {
  if (o.port != 0 || o.kind != RankKind::kTrain) return Status::OK();
  fd->fd = ::memfd_create("granary-rendezvous", 0);
  if (fd->fd < 0) return Status::IOError("memfd", "create the rendezvous file", errno);
  return Status::OK();
}

// torchrun's error files for a command's ranks forked here; none for train's
// ranks (they say why they failed themselves) or under mpirun.
StatusOr<std::optional<RankErrorFiles>> MakeErrorFiles(const LaunchOptions& o) {
  if (o.kind != RankKind::kCommand || !o.mpirun.empty()) return std::optional<RankErrorFiles>();
  GRANARY_ASSIGN_OR_RETURN(RankErrorFiles made, RankErrorFiles::Create(o.ranks));
  return std::optional<RankErrorFiles>(std::move(made));
}

// The next of `watched` to arrive within a tick of the launcher's watch, or -1.
int NextSignal(const sigset_t& watched) {
  const timespec tick{0, 200 * 1000 * 1000};
  siginfo_t info;
  return ::sigtimedwait(&watched, &info, &tick);
}

}  // namespace

StatusOr<LaunchOutcome> LaunchRanks(const LaunchOptions& o) {
  const sigset_t watched = WatchedSignals();
  SignalMaskGuard guard(watched);  // from here, these signals wait for sigtimedwait
  StatusOr<HeartbeatBoard> board = HeartbeatBoard::Create(o.ranks);
  if (!board.ok()) return board.status();
  OwnedFd rendezvous;
  GRANARY_RETURN_IF_ERROR(MakeRendezvousFile(o, &rendezvous));
  Ranks ranks;
  const bool mpi = !o.mpirun.empty();
  GRANARY_ASSIGN_OR_RETURN(const std::optional<RankErrorFiles> errors, MakeErrorFiles(o));
  const RankErrorFiles* error_files = errors ? &*errors : nullptr;
  if (mpi) ranks.board = &board.value();
  // mpirun's shared memory and session files lie in a folder of the launcher's.
  MpiSessionDir session;
  if (mpi) GRANARY_RETURN_IF_ERROR(session.Create(o.ranks, o.parent));
  GRANARY_ASSIGN_OR_RETURN(const std::vector<std::unique_ptr<OutputRelay>> relays, MakeRelays(o));
  GRANARY_RETURN_IF_ERROR(
      StartProcesses(o, board.value(), error_files, rendezvous.fd, session.path(), relays, guard.saved(), &ranks));
  for (const std::unique_ptr<OutputRelay>& relay : relays) {
    if (relay) relay->Start();
  }

  const Clock::time_point launched = Clock::now();
  LaunchOutcome outcome;
  bool stopping = false;      // the other ranks were told to stop
  Clock::time_point kill_at;  // when those still running get SIGKILL
  auto stop_all = [&](bool signalled_already = false) {
    if (stopping) return;
    stopping = true;
    if (!signalled_already) ranks.SignalAll(SIGTERM, o.ranks);
    kill_at = Clock::now() + std::chrono::seconds(o.grace_s);
  };
  MpirunWatch mpirun_watch;
  EndOrder end_order;
  const pid_t mpirun_pid = mpi ? ranks.pids[0] : 0;
  EarlyEnd early_end;
  int vanished = -1;       // the rank FindVanishedRank named, if it named one
  bool signalled = false;  // FindSignalledRank named the failure
  while (ranks.running > 0) {
    ranks.NoteLauncherTurn();
    // A rank killed outright that mpirun has not ended the job for (it
    // would, and only say so in its own words); not while mpirun itself is
    // gone, whose ranks die with it.
    if (mpi && !stopping && !IsGone(ranks.pids[0])) {
      outcome.failure = mpirun_watch.Vanished(o, board.value(), ranks, &vanished);
      if (!outcome.failure.empty()) {
        outcome.exit_code = 128 + SIGKILL;
        stop_all();
      }
    }
    if (mpi && !stopping && o.timeout_s > 0) {  // mpirun itself stopped, or not ending
      outcome.failure = mpirun_watch.Check(o, board.value(), ranks);
      if (!outcome.failure.empty()) {
        outcome.exit_code = 1;
        stop_all();
        ::kill(ranks.pids[0], SIGCONT);  // a stopped mpirun cannot end the job
      }
    }
    if (!stopping && o.enough && o.enough(board.value())) {
      outcome.enough = true;
      stop_all();
    }
    end_order.Reap(ranks, board.value(), [&](int rank, int wstatus) {
      const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
      if (code == 0 && !stopping) early_end.Note(o, rank, board.value().Read(rank), ranks.running);
      if (code == 0 || outcome.exit_code != 0 || outcome.enough) return;
      outcome.exit_code = code;
      if (mpi && !stopping) {  // mpirun ended the job
        outcome.failure = MpirunEndCause(o, board.value(), ranks, mpirun_pid, wstatus, SecondsSince(launched),
                                         &outcome.exit_code, &vanished, &signalled);
      } else if (!stopping) {
        outcome.failure = early_end.Beside(RankExitLine(o, rank, wstatus, error_files, ranks.oom_kills));
        if (outcome.failure.empty() && o.timeout_s > 0) {
          // It gave up (said why itself); was it waiting for a rank that hung?
          outcome.failure =
              FindHungRank(o, board.value(), ranks, 0.9 * o.timeout_s, false, SecondsSince(launched));
        }
      }
      stop_all();
    });
    if (ranks.running == 0) break;
    if (!stopping && o.timeout_s > 0) {
      outcome.failure = early_end.Beside(FindHang(o, board.value(), ranks, SecondsSince(launched)));
      if (!outcome.failure.empty()) {
        outcome.exit_code = 1;
        stop_all();
      }
    }
    if (stopping && Clock::now() >= kill_at) ranks.SignalAll(SIGKILL, o.ranks);
    if (PassOnSignal(o, NextSignal(watched), ranks, &outcome)) stop_all(/*signalled_already=*/o.ranks_stop_on_signal);
  }
  ranks.KillLeftovers();
  FinishRelays(o, relays, vanished >= 0 || signalled, &outcome);
  return outcome;
}

LaunchOptions RankLaunchOptions(const TrainConfig& config, const Layout& layout, const std::vector<std::string>& argv,
                                const std::string& mpirun, const Environment& env) {
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
  if (!config.checkpoint.dir.empty()) {  // a stop signal: the ranks save the step they reach, then end
    launch.ranks_stop_on_signal = true;
    launch.grace_s = kStopSaveGrace_s;
  }
  if (config.dist.backend == Backend::kMpi) launch.mpirun = mpirun;
  // c10d logs through glog to stderr what the rank's own line says again (a
  // rendezvous that timed out, ...); a GLOG_minloglevel of the user's wins.
  launch.parent = env;
  if (!env.Has("GLOG_minloglevel")) launch.env.push_back("GLOG_minloglevel=3");
  return launch;
}

}  // namespace granary
