// The processes of a launch (launch.h): what a rank is exec'd with, the
// child's side of the fork, and how the launcher sees its ranks (the kernel's
// process state, a rank that hangs). Internal to launch/.
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include "base/machine.h"
#include "trainer/launch/error_files.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/launch/launch.h"

namespace granary {

// A rank's start (exec, loading LibTorch, the rendezvous) is given at least
// this long before it counts as hung, whatever --timeout says: on a loaded
// machine a start alone can take several seconds.
inline constexpr double kStartAllowance_s = 10;

// What rank `rank` is exec'd with, made before fork (the child of a
// threaded process may only make async-signal-safe calls).
struct RankExec {
  std::vector<std::string> args, env;
  std::vector<char*> argv, envp;
  cpu_set_t cpus;
  bool pinned = false;
};

// `o`'s rank `rank` (forked here), its heartbeat slot on `board`, its error
// file in `errors` (null: none), and the rendezvous file's descriptor (-1: a
// TCPStore port).
RankExec PrepareRank(const LaunchOptions& o, const HeartbeatBoard& board, const RankErrorFiles* errors,
                     int rendezvous_fd, int rank);

// The program's own path: mpirun cannot run /proc/self/exe (its own).
std::string ProgramPath(const std::string& program);

// Child side of fork: dies with the launcher, then becomes rank `rank`.
// Its stdout and stderr go to `out_fd` and `err_fd` where those are >= 0.
[[noreturn]] void ExecRank(const LaunchOptions& o, RankExec& e, int rank, pid_t launcher, const sigset_t& mask,
                           int out_fd, int err_fd);

// What /proc/PID/stat says of process `pid`: the kernel's state letter
// ('R', 'S', 'T' stopped, 'Z' zombie, ...; 0 if it is gone), its parent, its
// command's name, the CPU time it has used (user and system) and when it
// started (both in clock ticks, the latter since boot).
struct ProcState {
  char state = 0;
  pid_t parent = 0;
  std::string name;
  double cpu_ticks = 0;
  double start_ticks = 0;
};

ProcState ReadProcState(pid_t pid);

// True if the kernel says the process is stopped (SIGSTOP, a debugger).
bool IsStopped(pid_t pid);

// Why a rank killed by SIGKILL was: ": the kernel's out-of-memory killer
// ended it, ... 400 MiB their memory cgroup allows ...: fewer --ranks, ...",
// where the kernel's counts of such kills grew since `before`; "" where not.
std::string OutOfMemoryCause(const LaunchOptions& o, const OomKills& before);

// The processes of a launch: the ranks forked here, or (LaunchOptions::mpirun)
// mpirun alone, whose ranks are its children, known from the board.
struct Ranks {
  std::vector<pid_t> pids;  // forked here; -1 once reaped
  size_t running = 0;
  OomKills oom_kills;  // the kernel's, counted before they started (OutOfMemoryCause)

  // Called on each turn of the launcher's loop (a few a second): a turn long
  // after the last means the launcher was stopped with its ranks (a job
  // suspended: Slurm's scontrol suspend, SIGSTOP to the run's process group,
  // a paused VM), and a rank's silence counts from then at most
  // (QuietSinceResumed), not as a hang once they go on.
  void NoteLauncherTurn() {
    const std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
    if (last_turn_.time_since_epoch().count() != 0 && now - last_turn_ > kLauncherPausedAfter) resumed_ = now;
    last_turn_ = now;
  }
  double QuietSinceResumed(double quiet_s) const {
    if (resumed_.time_since_epoch().count() == 0) return quiet_s;
    return std::min(quiet_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - resumed_).count());
  }
  const HeartbeatBoard* board = nullptr;  // set under mpirun: the ranks' processes are on it
  // RankKind::kCommand: each rank leads a process group of its own (what it
  // starts is signalled with it), here by their leaders' pids.
  std::vector<pid_t> groups;

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
      // A stopped rank (its group's leader) acts on `sig` once continued; one
      // that runs is sent no SIGCONT, which it would take for the end of a
      // stop (trainer/comm/stopped.h).
      const pid_t target = groups.empty() ? p : -p;
      if (::kill(target, sig) == 0 && sig != SIGKILL && IsStopped(p)) ::kill(target, SIGCONT);
    }
  }
  // kCommand, once the ranks have ended: what they left running is killed.
  void KillLeftovers() const {
    for (pid_t leader : groups) ::kill(-leader, SIGKILL);
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

 private:
  static constexpr std::chrono::seconds kLauncherPausedAfter{3};
  std::chrono::steady_clock::time_point last_turn_{}, resumed_{};
};

// The rank's name in a failure line: "rank 3", or "rank 3 on node 1".
std::string RankName(const LaunchOptions& o, int rank);

// True if `pid` has ended (a zombie not yet reaped, or gone).
bool IsGone(pid_t pid);

// A line naming a running rank that has been quiet for at least `quiet_s`
// (one that never attached to the board: since the launch, `launched_s` ago):
// one that was not waiting for its peers (a stopped rank never is, even if it
// was stopped inside a wait), else, if `waiting_too`, one that was; or "".
std::string FindHungRank(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, double quiet_s,
                         bool waiting_too, double launched_s);

// How much longer than --timeout a command's rank quiet inside torch is
// given (FindQuietCommandRank): the peer it may wait for, hung in its own
// code, shows it by a sign of life sampled once a second, so on a loaded
// machine that peer's quiet time can lag the waiting rank's by a second or
// two; with this slack the peer crosses the bound first and is named.
inline constexpr double kWaitingSlack_s = 2;

// RankKind::kCommand's FindHungRank: a line naming the running ranks quiet
// for at least `quiet_s` (`quiet_s` + kWaitingSlack_s for one quiet inside
// torch) since their last step or sign of life (before its first step
// too: a rendezvous whose peer is gone): a
// stopped rank first; else, of the quiet ranks in their own code if some
// are (those quiet inside torch, as its pulse's `waiting` says, may wait
// for them), the one rank behind the others, else all of them; or "".
std::string FindQuietCommandRank(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks,
                                 double quiet_s);

}  // namespace granary
