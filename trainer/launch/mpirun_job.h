// The ranks of a launch as one MPI job that train's own mpirun starts
// (LaunchOptions::mpirun): what mpirun is exec'd with, how the launcher
// watches it, and why it ended the job. Internal to launch/.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

#include "trainer/launch/heartbeat.h"
#include "trainer/launch/launch.h"
#include "trainer/launch/output_relay.h"
#include "trainer/launch/rank_processes.h"

namespace granary {

// What mpirun is exec'd with to start every rank of `o` as one MPI job: per
// rank an app context of one process, its arguments and environment
// (-x NAME=value) as PrepareRank gives them, the heartbeat board by path.
// `session_dir`: where OpenMPI keeps its shared-memory segments and session
// files for this job ("" to leave them where OpenMPI puts them).
RankExec PrepareMpirun(const LaunchOptions& o, const HeartbeatBoard& board, const std::string& program,
                       const std::string& session_dir);

// Under mpirun: the first rank whose process is gone without having said how
// it ended (killed by SIGKILL or the OOM killer, or crashed), named, its
// index in *rank; "" if none.
std::string FindVanishedRank(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, int* rank);

// Under mpirun: mpirun itself stopped (SIGSTOP, a debugger), or still
// running after every rank has ended. Either way the ranks' output and exit
// wait on it; for --timeout, and the run is ended, naming mpirun.
class MpirunWatch {
 public:
  // A line naming mpirun's state if it has lasted --timeout, else "".
  std::string Check(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks);
  // FindVanishedRank's line once a rank has been gone kVanishedGrace_s
  // while mpirun still runs, else "". mpirun ends the job itself within
  // about a second of a rank's end, and its exit status then tells a rank
  // killed by SIGKILL from one that left through OpenMPI's own abort
  // (MPI_Init failing), which also ends a process without its saying how.
  std::string Vanished(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, int* rank);

 private:
  static constexpr int kRunning = 0, kStopped = 1, kLingering = 2;
  static constexpr double kVanishedGrace_s = 3;
  int state_ = kRunning;
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
  int vanished_ = -1;  // the rank seen gone, and since when
  std::chrono::steady_clock::time_point vanished_since_;
};

// Why mpirun ended the job, once it has: mpirun killed itself, a rank
// killed by SIGKILL (gone without saying how, mpirun exiting 137), a rank a
// signal ended (*exit_code then keeps that signal, as over Gloo), a job
// ended before any rank took a step (OpenMPI failing to start it), a rank
// that vanished, or one that hung; "" if none. *vanished and *signalled say
// which finder named it.
std::string MpirunEndCause(const LaunchOptions& o, const HeartbeatBoard& board, const Ranks& ranks, pid_t mpirun,
                           int wstatus, double launched_s, int* exit_code, int* vanished, bool* signalled);

// Once mpirun has ended: the rest of its output relayed; a job that OpenMPI
// said it aborted (ranks that `ended_by_mpi` vanished or were signalled
// after OpenMPI said what went wrong, as in MPI_Init) is said to be ended by
// OpenMPI, not killed, and exits 1; a stdout that could not be written fails the run.
void FinishMpirunOutput(OutputRelay* relay, bool ended_by_mpi, LaunchOutcome* outcome);

}  // namespace granary
