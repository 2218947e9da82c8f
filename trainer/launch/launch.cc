#include "trainer/clock.h"
#include "trainer/launch/launch.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "trainer/launch/heartbeat.h"
#include "trainer/launch/mpi_session_dir.h"
#include "trainer/launch/output_relay.h"

namespace granary {

namespace {

using Clock = std::chrono::steady_clock;

// A rank quiet for --timeout plus this long is hung by the launcher's own
// watch; the slack lets a peer on this machine, whose collective gives up
// after --timeout, say so first.
constexpr double kHangSlack_s = 2;

// A rank's start (exec, loading LibTorch, the rendezvous) is given at least
// this long before it counts as hung, whatever --timeout says: on a loaded
// machine a start alone can take several seconds.
constexpr double kStartAllowance_s = 10;

// The signals the launcher handles synchronously (sigtimedwait) while it waits.
sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);  // a closed terminal or ssh session: as SIGTERM
  sigaddset(&set, SIGCHLD);
  return set;
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

// What rank `rank` is exec'd with, made before fork (the child of a
// threaded process may only make async-signal-safe calls).
struct RankExec {
  std::vector<std::string> args, env;
  std::vector<char*> argv, envp;
  cpu_set_t cpus;
  bool pinned = false;
};

RankExec PrepareRank(const LaunchOptions& o, const HeartbeatBoard& board, int rendezvous_fd, int rank) {
  RankExec e;
  e.args = o.args;
  e.args.insert(e.args.end(), {"--rank", std::to_string(o.first_rank + rank)});
  if (rendezvous_fd >= 0) {
    e.args.insert(e.args.end(), {"--rendezvous-file", "/proc/self/fd/" + std::to_string(rendezvous_fd)});
  } else {
    e.args.insert(e.args.end(), {"--port", std::to_string(o.port)});
  }
  // The launcher's variables replace the user's of the same name (a stray
  // GRANARY_HEARTBEAT in the user's environment included).
  std::vector<std::string> own = o.env;
  own.push_back(board.Environment(rank));
  for (const std::string& var : o.parent.Entries()) {
    const std::string name = var.substr(0, var.find('=') + 1);
    const bool replaced = std::any_of(own.begin(), own.end(),
                                      [&](const std::string& s) { return s.compare(0, name.size(), name) == 0; });
    if (!replaced) e.env.push_back(var);
  }
  e.env.insert(e.env.end(), own.begin(), own.end());
  for (std::string& a : e.args) e.argv.push_back(a.data());
  e.argv.push_back(nullptr);
  for (std::string& v : e.env) e.envp.push_back(v.data());
  e.envp.push_back(nullptr);
  CPU_ZERO(&e.cpus);
  if (static_cast<size_t>(rank) < o.cpus.size() && !o.cpus[rank].empty()) {
    for (int cpu : o.cpus[rank]) {
      if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &e.cpus);
    }
    e.pinned = true;
  }
  return e;
}

// What mpirun is exec'd with to start every rank of `o` as one MPI job: per
// rank an app context of one process, its arguments and environment
// (-x NAME=value) as PrepareRank gives them, the heartbeat board by path.
// `session_dir`: where OpenMPI keeps its shared-memory segments and session
// files for this job ("" to leave them where OpenMPI puts them).
RankExec PrepareMpirun(const LaunchOptions& o, const HeartbeatBoard& board, const std::string& program,
                       const std::string& session_dir) {
  RankExec e;
  // Not --quiet: OpenMPI's own account of a failure passes, summed up, through the relay (MpirunStderrFilter).
  e.args = {o.mpirun, "--bind-to", "none", "--oversubscribe"};
  if (::geteuid() == 0) e.args.push_back("--allow-run-as-root");  // the user chose to run as root
  // One machine: the ranks meet through shared memory only (OpenMPI's TCP
  // transport would listen on every interface) and mpirun talks to them on
  // the loopback device, unless the user's environment chose (OMPI_MCA_*).
  // (mpirun itself still listens on every interface for PMIx tools.)
  // plm isolated: a one-machine job starts no remote shell, so none need be installed (ssh).
  std::vector<std::pair<std::string, std::string>> mca = {
      {"btl", "self,vader"}, {"oob_tcp_if_include", "lo"}, {"plm", "isolated"}};
  if (!session_dir.empty()) {
    mca.insert(mca.end(), {{"btl_vader_backing_directory", session_dir}, {"orte_tmpdir_base", session_dir}});
  }
  for (const auto& [name, value] : mca) {
    if (!o.parent.Has("OMPI_MCA_" + name)) {
      e.args.insert(e.args.end(), {"--mca", name, value});
    }
  }
  for (int rank = 0; rank < o.ranks; ++rank) {
    if (rank > 0) e.args.push_back(":");
    e.args.insert(e.args.end(), {"-np", "1"});
    std::vector<std::string> env = o.env;
    env.push_back(board.Environment(rank, /*by_path=*/true));
    for (const std::string& var : env) e.args.insert(e.args.end(), {"-x", var});
    e.args.push_back(program);
    e.args.insert(e.args.end(), o.args.begin() + 1, o.args.end());
    e.args.insert(e.args.end(), {"--rank", std::to_string(o.first_rank + rank)});
  }
  for (std::string& a : e.args) e.argv.push_back(a.data());
  e.argv.push_back(nullptr);
  e.env = o.parent.Entries();
  for (std::string& v : e.env) e.envp.push_back(v.data());
  e.envp.push_back(nullptr);
  CPU_ZERO(&e.cpus);
  return e;
}

// The program's own path: mpirun cannot run /proc/self/exe (its own).
std::string ProgramPath(const std::string& program) {
  if (program != "/proc/self/exe") return program;
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : program;
}

// Child side of fork: dies with the launcher, then becomes rank `rank`.
// Its stdout and stderr go to `out_fd` and `err_fd` where those are >= 0.
[[noreturn]] void ExecRank(const LaunchOptions& o, RankExec& e, int rank, pid_t launcher, const sigset_t& mask,
                           int out_fd, int err_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(128 + SIGKILL);  // the launcher died before the prctl
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  if (out_fd >= 0) ::dup2(out_fd, STDOUT_FILENO);
  if (err_fd >= 0) ::dup2(err_fd, STDERR_FILENO);
  if (e.pinned && ::sched_setaffinity(0, sizeof(e.cpus), &e.cpus) != 0) {
    std::fprintf(stderr, "train: rank %d: cannot pin to its CPUs: %s\n", rank, std::strerror(errno));
    ::_exit(127);
  }
  const char* program = o.mpirun.empty() ? o.program.c_str() : o.mpirun.c_str();
  ::execve(program, e.argv.data(), e.envp.data());
  if (!o.mpirun.empty()) {
    std::fprintf(stderr, "train: cannot start mpirun (%s): %s; --backend mpi needs OpenMPI's mpirun (openmpi-bin)\n",
                 program, std::strerror(errno));
  } else {
    std::fprintf(stderr, "train: rank %d: exec %s failed: %s\n", rank, program, std::strerror(errno));
  }
  ::_exit(127);
}

// The kernel's state letter of process `pid` ('R', 'S', 'T' stopped, 'Z'
// zombie, ...) and its parent; state 0 if it is gone.
struct ProcState {
  char state = 0;
  pid_t parent = 0;
};

ProcState ReadProcState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  ProcState p;
  const size_t end = line.rfind(") ");  // the name in parentheses may hold anything
  if (end == std::string::npos || end + 2 >= line.size()) return p;
  p.state = line[end + 2];
  p.parent = static_cast<pid_t>(std::atol(line.c_str() + end + 4));
  return p;
}

// The processes of a launch: the ranks forked here, or (LaunchOptions::mpirun)
// mpirun alone, whose ranks are its children, known from the board.
struct Ranks {
  std::vector<pid_t> pids;  // forked here; -1 once reaped
  size_t running = 0;
  const HeartbeatBoard* board = nullptr;  // set under mpirun: the ranks' processes are on it

  bool under_mpirun() const { return board != nullptr; }
  // Rank r's process while it runs (0: not known yet, or gone). Under mpirun
  // only a child of mpirun that is not a zombie counts: a rank's pid is never
  // signalled once another process may have it.
  pid_t RankPid(int r) const {
    if (!under_mpirun()) return pids[r] > 0 ? pids[r] : 0;
    const pid_t pid = board->Read(r).pid;
    if (pid <= 0 || pids[0] <= 0) return 0;
    const ProcState p = ReadProcState(pid);
    return p.parent == pids[0] && p.state != 'Z' && p.state != 0 ? pid : 0;
  }
  // Whether rank r may still be running (under mpirun: mpirun runs and the
  // rank has not started yet or still runs).
  bool Alive(int r) const {
    if (!under_mpirun()) return pids[r] > 0;
    return pids[0] > 0 && (board->Read(r).pid <= 0 || RankPid(r) > 0);
  }
  // A stopped rank (SIGSTOP, a debugger) acts on `sig` once continued.
  // Under mpirun the ranks are signalled themselves, and mpirun, which ends
  // the job when they end, only with SIGKILL or while no rank has started
  // (signalled while it aborts a job, mpirun 4.1 can crash in its finalize).
  void SignalAll(int sig, int ranks) const {
    std::vector<pid_t> targets;
    if (under_mpirun()) {
      for (int r = 0; r < ranks; ++r) {
        if (const pid_t p = RankPid(r); p > 0) targets.push_back(p);
      }
    }
    if (targets.empty() || sig == SIGKILL) {
      for (pid_t p : pids) {
        if (p > 0) targets.push_back(p);
      }
    }
    for (pid_t p : targets) {
      if (::kill(p, sig) == 0 && sig != SIGKILL) ::kill(p, SIGCONT);
    }
  }
  // Reaps every process forked here that has exited; calls on_exit(index, wait status).
  template <typename F>
  void Reap(F on_exit) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (pids[r] <= 0) continue;
      int wstatus = 0;
      const pid_t done = ::waitpid(pids[r], &wstatus, WNOHANG);
      if (done == 0 || (done < 0 && errno == EINTR)) continue;  // still running
      if (done < 0) wstatus = 255 << 8;  // not our child any more: its status is lost, count it as failed
      pids[r] = -1;
      --running;
      on_exit(static_cast<int>(r), wstatus);
    }
  }
};

// The rank's name in a failure line: "rank 3", or "rank 3 on node 1".
std::string RankName(const LaunchOptions& o, int rank) {
  return "rank " + std::to_string(o.first_rank + rank) +
         (o.nnodes > 1 ? " on node " + std::to_string(o.node_rank) : "");
}

// True if `pid` has ended (a zombie not yet reaped, or gone).
bool IsGone(pid_t pid) {
  const char state = pid > 0 ? ReadProcState(pid).state : 0;
  return state == 0 || state == 'Z';
}

// True if the kernel says the process is stopped (SIGSTOP, a debugger).
bool IsStopped(pid_t pid) {
  const char state = pid > 0 ? ReadProcState(pid).state : 0;
  return state == 'T' || state == 't';
}

// A line naming a running rank that has been quiet for at least `quiet_s`
// (one that never attached to the board: since the launch, `launched_s` ago):
// one that was not waiting for its peers (a stopped rank never is, even if it
// was stopped inside a wait), else, if `waiting_too`, one that was; or "".
std::string FindHungRank(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, double quiet_s,
                         bool waiting_too, double launched_s) {
  std::string waiting_line;
  for (int r = 0; r < o.ranks; ++r) {
    if (!ranks.Alive(r)) continue;
    const RankPulse p = board.Read(r);
    const double quiet = p.started ? p.quiet_s : launched_s;
    if (quiet < (p.started ? quiet_s : std::max(quiet_s, kStartAllowance_s))) continue;
    const bool stopped = IsStopped(ranks.RankPid(r));
    const std::string name = RankName(o, r);
    const std::string seconds = std::to_string(static_cast<long>(quiet)) + " s";
    if (!p.started) {
      return name + " did not start in " + seconds + (stopped ? " (its process is stopped)" : "") +
             " while its peers waited for it; stopping the run";
    }
    if (p.waiting && !stopped) {
      if (waiting_too && waiting_line.empty()) {
        waiting_line = name + " waited " + seconds + " for the other ranks, past --timeout; stopping the run";
      }
      continue;
    }
    return name + " made no progress for " + seconds + " (after " + std::to_string(p.step) + " steps" +
           (stopped ? "; its process is stopped" : "") + ") while its peers waited for it; stopping the run";
  }
  return waiting_line;
}

// Under mpirun: the rank that said first that a signal ended it (a stop
// signal from outside, or a crash), while the launcher had stopped nothing;
// "" if none. mpirun's own exit status tells who sent it: mpirun exits 128 +
// the signal of a rank that a signal ended, and 1 when it was itself sent
// SIGTERM and stopped its ranks with it: then the line names mpirun.
// *signal: the signal, for the exit status.
std::string FindSignalledRank(const LaunchOptions& o, const HeartbeatBoard& board, pid_t mpirun, int mpirun_status,
                              int* signal) {
  int first = -1;
  RankPulse p0;
  for (int r = 0; r < o.ranks; ++r) {
    const RankPulse p = board.Read(r);
    if (p.ended != RankEnd::kSignalled || p.signal <= 0) continue;
    if (first < 0 || p.ended_ns < p0.ended_ns) first = r, p0 = p;
  }
  if (first < 0) return "";
  *signal = p0.signal;
  const std::string name = std::to_string(p0.signal) + " (" + ::strsignal(p0.signal) + ")";
  if (mpirun_status != 128 + p0.signal) {
    return "mpirun (pid " + std::to_string(mpirun) + ") ended the job, stopping its ranks with signal " + name +
           ", and exited " + std::to_string(mpirun_status) + ": was mpirun sent it?";
  }
  return RankName(o, first) + " was killed by signal " + name + "; stopping the other ranks";
}

// Under mpirun: the first rank whose process is gone without having said how
// it ended (killed by SIGKILL or the OOM killer, or crashed), named, its
// index in *rank; "" if none.
std::string FindVanishedRank(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, int* rank) {
  for (int r = 0; r < o.ranks; ++r) {
    const RankPulse p = board.Read(r);
    if (p.pid > 0 && p.ended == RankEnd::kRunning && ranks.RankPid(r) == 0) {
      *rank = r;
      return RankName(o, r) +
             " was killed (its process ended without exiting or being stopped: SIGKILL, the OOM killer or a crash); "
             "stopping the other ranks";
    }
  }
  return "";
}

// Under mpirun: mpirun itself stopped (SIGSTOP, a debugger), or still
// running after every rank has ended. Either way the ranks' output and exit
// wait on it; for --timeout, and the run is ended, naming mpirun.
class MpirunWatch {
 public:
  // A line naming mpirun's state if it has lasted --timeout, else "".
  std::string Check(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks) {
    const pid_t mpirun = ranks.pids[0];
    if (mpirun <= 0) return "";
    bool all_ended = true;
    for (int r = 0; r < o.ranks && all_ended; ++r) all_ended = board.Read(r).ended != RankEnd::kRunning;
    const int state = IsStopped(mpirun) ? kStopped : all_ended ? kLingering : kRunning;
    if (state != state_) state_ = state, since_ = Clock::now();
    const double held_s = SecondsSince(since_);
    if (state_ == kRunning || held_s < o.timeout_s) return "";
    const std::string seconds = std::to_string(static_cast<long>(held_s)) + " s";
    const std::string who = "mpirun (pid " + std::to_string(mpirun) + ")";
    if (state_ == kStopped) {
      return who + " has been stopped for " + seconds + " (SIGSTOP or a debugger), past --timeout: the ranks' " +
             "output and exits wait on it; stopping the run";
    }
    return who + " has not ended " + seconds + " after every rank ended, past --timeout; stopping it";
  }

 private:
  static constexpr int kRunning = 0, kStopped = 1, kLingering = 2;
  int state_ = kRunning;
  Clock::time_point since_ = Clock::now();
};

// Why mpirun ended the job, once it has: mpirun killed itself, a rank a
// signal ended (*exit_code then keeps that signal, as over Gloo), a rank
// that vanished, or one that hung; "" if none. *vanished and *signalled say
// which finder named it.
std::string MpirunEndCause(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, pid_t mpirun,
                           int wstatus, double launched_s, int* exit_code, int* vanished, bool* signalled) {
  if (WIFSIGNALED(wstatus)) {
    return "mpirun (pid " + std::to_string(mpirun) + ") was killed by signal " + std::to_string(WTERMSIG(wstatus)) +
           " (" + ::strsignal(WTERMSIG(wstatus)) + "); its ranks end with it";
  }
  int signal = 0;
  std::string line = FindSignalledRank(o, board, mpirun, WEXITSTATUS(wstatus), &signal);
  if (!line.empty()) {
    *signalled = true;
    *exit_code = 128 + signal;
    return line;
  }
  line = FindVanishedRank(o, board, ranks, vanished);
  if (line.empty() && o.timeout_s > 0) line = FindHungRank(o, board, ranks, 0.9 * o.timeout_s, false, launched_s);
  return line;
}

// Once mpirun has ended: the rest of its output relayed; a job that OpenMPI
// said it aborted (ranks that `ended_by_mpi` vanished or were signalled
// after OpenMPI said what went wrong, as in MPI_Init) is said to be ended by
// OpenMPI, not killed; a stdout that could not be written fails the run.
void FinishMpirunOutput(OutputRelay* relay, bool ended_by_mpi, LaunchOutcome* outcome) {
  relay->Finish(/*drain_s=*/2);
  if (ended_by_mpi && relay->openmpi_told()) outcome->failure = "OpenMPI ended the job, for the reason it gives above";
  if (relay->stdout_error() != 0 && outcome->exit_code == 0) {
    outcome->exit_code = 1;
    outcome->failure = Status::IOError("stdout", "write", relay->stdout_error()).message();
  }
}

// Forks the ranks (under mpirun: mpirun alone, which starts them), each
// exec'd as `o` says, into *ranks; `relay`: mpirun's output goes through it.
// On a failed fork, what was started is killed.
Status StartProcesses(const LaunchOptions& o, const HeartbeatBoard& board, int rendezvous_fd,
                      const std::string& session_dir, const OutputRelay* relay, const sigset_t& mask, Ranks* ranks) {
  const bool mpi = !o.mpirun.empty();
  const pid_t launcher = ::getpid();
  const std::string program = ProgramPath(o.program);
  for (int rank = 0; rank < (mpi ? 1 : o.ranks); ++rank) {
    RankExec exec = mpi ? PrepareMpirun(o, board, program, session_dir) : PrepareRank(o, board, rendezvous_fd, rank);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      ranks->SignalAll(SIGKILL, o.ranks);
      ranks->Reap([](int, int) {});
      return Status::IOError("fork", mpi ? "start mpirun" : "start rank " + std::to_string(rank), err);
    }
    if (pid == 0) {
      ExecRank(o, exec, rank, launcher, mask, relay ? relay->child_stdout() : o.stdout_fd,
               relay ? relay->child_stderr() : o.stderr_fd);
    }
    ranks->pids.push_back(pid);
    ++ranks->running;
  }
  return Status::OK();
}

}  // namespace

StatusOr<LaunchOutcome> LaunchRanks(const LaunchOptions& o) {
  const sigset_t watched = WatchedSignals();
  SignalMaskGuard guard(watched);  // from here, these signals wait for sigtimedwait
  StatusOr<HeartbeatBoard> board = HeartbeatBoard::Create(o.ranks);
  if (!board.ok()) return board.status();
  OwnedFd rendezvous;  // inherited by the ranks (no CLOEXEC)
  if (o.port == 0) {
    rendezvous.fd = ::memfd_create("granary-rendezvous", 0);
    if (rendezvous.fd < 0) return Status::IOError("memfd", "create the rendezvous file", errno);
  }
  Ranks ranks;
  const bool mpi = !o.mpirun.empty();
  if (mpi) ranks.board = &board.value();
  // mpirun's output passes through the launcher (output_relay.h), and its
  // shared memory and session files lie in a folder of the launcher's.
  std::unique_ptr<OutputRelay> relay;
  MpiSessionDir session;
  if (mpi) {
    session.Create();
    const int out = o.stdout_fd >= 0 ? o.stdout_fd : STDOUT_FILENO;
    const int err = o.stderr_fd >= 0 ? o.stderr_fd : STDERR_FILENO;
    GRANARY_ASSIGN_OR_RETURN(std::unique_ptr<OutputRelay> made, OutputRelay::Create(out, err, /*mpirun=*/true));
    relay = std::move(made);
  }
  GRANARY_RETURN_IF_ERROR(
      StartProcesses(o, board.value(), rendezvous.fd, session.path(), relay.get(), guard.saved(), &ranks));
  if (relay) relay->Start();

  const Clock::time_point launched = Clock::now();
  LaunchOutcome outcome;
  bool stopping = false;      // the other ranks were told to stop
  Clock::time_point kill_at;  // when those still running get SIGKILL
  auto stop_all = [&] {
    if (stopping) return;
    stopping = true;
    ranks.SignalAll(SIGTERM, o.ranks);
    kill_at = Clock::now() + std::chrono::seconds(o.grace_s);
  };
  MpirunWatch mpirun_watch;
  const pid_t mpirun_pid = mpi ? ranks.pids[0] : 0;
  int vanished = -1;       // the rank FindVanishedRank named, if it named one
  bool signalled = false;  // FindSignalledRank named the failure
  while (ranks.running > 0) {
    // A rank killed outright (mpirun would only say so in its own words); not
    // while mpirun itself is gone, whose ranks die with it.
    if (mpi && !stopping && !IsGone(ranks.pids[0])) {
      outcome.failure = FindVanishedRank(o, board.value(), ranks, &vanished);
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
    ranks.Reap([&](int rank, int wstatus) {
      const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
      if (code == 0 || outcome.exit_code != 0) return;
      outcome.exit_code = code;
      if (mpi && !stopping) {  // mpirun ended the job
        outcome.failure = MpirunEndCause(o, board.value(), ranks, mpirun_pid, wstatus, SecondsSince(launched),
                                         &outcome.exit_code, &vanished, &signalled);
      } else if (WIFSIGNALED(wstatus) && !stopping) {
        outcome.failure = RankName(o, rank) + " was killed by signal " + std::to_string(WTERMSIG(wstatus)) + " (" +
                          ::strsignal(WTERMSIG(wstatus)) + "); stopping the other ranks";
      } else if (!stopping && o.timeout_s > 0) {
        // It gave up (said why itself); was it waiting for a rank that hung?
        outcome.failure = FindHungRank(o, board.value(), ranks, 0.9 * o.timeout_s, false, SecondsSince(launched));
      }
      stop_all();
    });
    if (ranks.running == 0) break;
    if (!stopping && o.timeout_s > 0) {
      outcome.failure =
          FindHungRank(o, board.value(), ranks, o.timeout_s + kHangSlack_s, true, SecondsSince(launched));
      if (!outcome.failure.empty()) {
        outcome.exit_code = 1;
        stop_all();
      }
    }
    if (stopping && Clock::now() >= kill_at) ranks.SignalAll(SIGKILL, o.ranks);
    const timespec tick{0, 200 * 1000 * 1000};
    siginfo_t info;
    const int sig = ::sigtimedwait(&watched, &info, &tick);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      if (outcome.exit_code == 0) outcome.exit_code = 128 + sig;
      if (outcome.stopped_by == 0) outcome.stopped_by = sig;
      ranks.SignalAll(sig == SIGHUP ? SIGTERM : sig, o.ranks);  // as a terminal's Ctrl-C would reach them all
      stop_all();
    }
  }
  if (relay) FinishMpirunOutput(relay.get(), vanished >= 0 || signalled, &outcome);
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
  if (config.dist.backend == "mpi") launch.mpirun = mpirun;
  // c10d logs through glog to stderr what the rank's own line says again (a
  // rendezvous that timed out, ...); a GLOG_minloglevel of the user's wins.
  launch.parent = env;
  if (!env.Has("GLOG_minloglevel")) launch.env.push_back("GLOG_minloglevel=3");
  return launch;
}

}  // namespace granary
