#include "trainer/launch/mpirun_job.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include "trainer/clock.h"

namespace granary {
namespace {

// The OMPI_MCA_* settings of the launcher's environment, as "; settings
// from the environment: A=x, B=y", or "".
std::string OpenMpiSettings(const Environment& env) {
  std::string list;
  for (const std::string& entry : env.Entries()) {
    if (entry.rfind("OMPI_MCA_", 0) == 0) list += (list.empty() ? "" : ", ") + entry;
  }
  return list.empty() ? "" : "; settings from the environment: " + list;
}

// Under mpirun: what a signal that ended a rank says of the job's end, while
// the launcher had stopped nothing; "" if no rank said a signal ended it.
// The rank that said first how it ended tells: one that exited (a failure
// it named itself) made mpirun stop the others; else the first signalled
// rank was sent its signal from outside or crashed. mpirun's own exit status
// tells who sent that: mpirun exits 128 + the signal of a rank that a signal
// ended; when it stopped its ranks itself, it exits 1, whether it was sent
// SIGTERM or OpenMPI gave up starting the job (MPI_Init failed: OpenMPI's
// account, passed through by the relay, may not arrive before mpirun ends):
// then the line names mpirun, and what it did before any rank took a step.
// *signal: the signal, for the exit status (0: mpirun's status stands).
std::string FindSignalledRank(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, pid_t mpirun,
                              int mpirun_status, int* signal) {
  int first = -1, signalled = -1;  // the first to say how it ended; the first signalled
  RankPulse first_p, signalled_p;
  int64_t steps = 0;
  for (int r = 0; r < o.ranks; ++r) {
    const RankPulse p = board.Read(r);
    steps += p.step;
    if (p.ended == RankEnd::kRunning || (p.ended == RankEnd::kSignalled && p.signal <= 0)) continue;
    if (first < 0 || p.ended_ns < first_p.ended_ns) first = r, first_p = p;
    if (p.ended != RankEnd::kSignalled) continue;
    if (signalled < 0 || p.ended_ns < signalled_p.ended_ns) signalled = r, signalled_p = p;
  }
  if (signalled < 0) return "";
  const std::string name = std::to_string(signalled_p.signal) + " (" + ::strsignal(signalled_p.signal) + ")";
  const std::string who = "mpirun (pid " + std::to_string(mpirun) + ") ended the job";
  if (first_p.ended == RankEnd::kExited && mpirun_status != 128 + signalled_p.signal) {
    *signal = 0;
    return who + " after " + RankName(o, first) + " exited, stopping the other ranks with signal " + name;
  }
  if (steps == 0 && mpirun_status != 128 + signalled_p.signal) {
    *signal = 0;
    return who + " before any rank took a step, stopping its ranks with signal " + name + ", and exited " +
           std::to_string(mpirun_status) + "; no reason from OpenMPI arrived" + OpenMpiSettings(o.parent);
  }
  *signal = signalled_p.signal;
  if (mpirun_status != 128 + signalled_p.signal) {
    return who + ", stopping its ranks with signal " + name + ", and exited " + std::to_string(mpirun_status) +
           ": was mpirun sent it?";
  }
  return RankName(o, signalled) + " was killed by signal " + name +
         (signalled_p.signal == SIGKILL ? OutOfMemoryCause(o, ranks.oom_kills) : "") + "; stopping the other ranks";
}

}  // namespace

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

std::string MpirunEndCause(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, pid_t mpirun,
                           int wstatus, double launched_s, int* exit_code, int* vanished, bool* signalled) {
  if (WIFSIGNALED(wstatus)) {
    return "mpirun (pid " + std::to_string(mpirun) + ") was killed by signal " + std::to_string(WTERMSIG(wstatus)) +
           " (" + ::strsignal(WTERMSIG(wstatus)) + "); its ranks end with it";
  }
  const int mpirun_status = WEXITSTATUS(wstatus);
  std::string line;
  if (mpirun_status == 128 + SIGKILL) {  // mpirun passes on a rank's SIGKILL; the others got its SIGTERM
    line = FindVanishedRank(o, board, ranks, vanished);
    if (!line.empty()) return line;
  }
  int signal = 0;
  line = FindSignalledRank(o, board, ranks, mpirun, mpirun_status, &signal);
  if (!line.empty()) {
    *signalled = true;
    if (signal > 0) *exit_code = 128 + signal;
    return line;
  }
  int64_t steps = 0;
  bool said = false;  // a rank said how it ended (one that exited said why itself)
  for (int r = 0; r < o.ranks; ++r) {
    const RankPulse p = board.Read(r);
    steps += p.step;
    said = said || p.ended != RankEnd::kRunning;
  }
  if (steps == 0 && !said) {  // OpenMPI's abort (MPI_Init failing) ends the ranks without their saying how
    *signalled = true;
    return "mpirun (pid " + std::to_string(mpirun) + ") ended the job before any rank took a step, and exited " +
           std::to_string(mpirun_status) + "; no reason from OpenMPI arrived" + OpenMpiSettings(o.parent);
  }
  line = FindVanishedRank(o, board, ranks, vanished);
  if (line.empty() && o.timeout_s > 0) line = FindHungRank(o, board, ranks, 0.9 * o.timeout_s, false, launched_s);
  return line;
}

void FinishMpirunOutput(OutputRelay* relay, bool ended_by_mpi, LaunchOutcome* outcome) {
  relay->Finish(/*drain_s=*/2);
  if (ended_by_mpi && relay->openmpi_told()) {
    outcome->failure = "OpenMPI ended the job, for the reason it gives above";
    outcome->exit_code = 1;  // not the signal its mpirun stopped the ranks with
  }
  if (relay->stdout_error() != 0 && outcome->exit_code == 0) {
    outcome->exit_code = 1;
    outcome->failure = Status::IOError("stdout", "write", relay->stdout_error()).message();
  }
}

std::string MpirunWatch::Check(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks) {
  const pid_t mpirun = ranks.pids[0];
  if (mpirun <= 0) return "";
  bool all_ended = true;
  for (int r = 0; r < o.ranks && all_ended; ++r) all_ended = board.Read(r).ended != RankEnd::kRunning;
  const int state = IsStopped(mpirun) ? kStopped : all_ended ? kLingering : kRunning;
  if (state != state_) state_ = state, since_ = std::chrono::steady_clock::now();
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

std::string MpirunWatch::Vanished(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks,
                                  int* rank) {
  int now = -1;
  std::string line = FindVanishedRank(o, board, ranks, &now);
  if (now != vanished_) vanished_ = now, vanished_since_ = std::chrono::steady_clock::now();
  if (now < 0 || SecondsSince(vanished_since_) < kVanishedGrace_s) return "";
  *rank = now;
  return line;
}

std::string FindVanishedRank(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, int* rank) {
  for (int r = 0; r < o.ranks; ++r) {
    const RankPulse p = board.Read(r);
    if (p.pid > 0 && p.ended == RankEnd::kRunning && ranks.RankPid(r) == 0) {
      *rank = r;
      const std::string oom = OutOfMemoryCause(o, ranks.oom_kills);
      return RankName(o, r) +
             (oom.empty() ? " was killed (its process ended without exiting or being stopped: SIGKILL, the OOM "
                            "killer or a crash)"
                          : " was killed" + oom) +
             "; stopping the other ranks";
    }
  }
  return "";
}

}  // namespace granary
