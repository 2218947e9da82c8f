// The launcher: starts rank processes on this machine and watches them, as
// torchrun does; it knows nothing of models or data. Each rank is `program`
// run with `args`, plus, for train's ranks, "--rank R" and its rendezvous
// ("--port P" or "--rendezvous-file F", below); any other command (the
// `launch` program) gets its rank in its environment instead. Call from the
// main thread before any other thread, LMDB environment or thread pool exists
// in this process.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/environment.h"
#include "base/status.h"
#include "trainer/config/config.h"
#include "trainer/launch/heartbeat.h"
#include "trainer/launch/layout.h"

namespace granary {

// What the ranks are.
enum class RankKind {
  // train's ranks: "--rank R" and the rendezvous passed as flags; a rank
  // says on its heartbeat when it waits for its peers, and says itself why
  // it failed.
  kTrain,
  // Any command (the `launch` program): its rank and rendezvous are in
  // `rank_env` (torchrun's variables). Its heartbeat, where it has one
  // (granary's startup module in a Python rank), counts steps but cannot
  // tell waiting for peers from hanging, so a rank is judged only once it
  // has taken a step (or is stopped), and an exit status is named here.
  kCommand,
};

struct LaunchOptions {
  RankKind kind = RankKind::kTrain;
  std::string name = "train";  // the program that launches, in its messages
  std::string program = "/proc/self/exe";
  std::vector<std::string> args;  // argv, args[0] included
  std::string script;             // kCommand: the Python script the ranks run, if any (its GPU lines are named)
  int ranks = 1;                  // on this node
  int first_rank = 0;             // the global rank of this node's first (node_rank x ranks)
  int node_rank = 0;              // named in failures of a many-node run
  int nnodes = 1;
  // The rendezvous: rank 0's TCPStore port, passed as "--port P"; or 0 (one
  // machine) for a c10d FileStore on a memfd the ranks inherit, passed as
  // "--rendezvous-file /proc/self/fd/N": no port is opened at all, and
  // nothing is left on disk however the run ends.
  int port = 0;
  // Rank r runs on cpus[r] only, when given (one entry per rank).
  std::vector<std::vector<int>> cpus;
  // The launcher's environment, which every rank inherits (this process's
  // unless a caller gives another), and "NAME=value" set in every rank's
  // over it.
  Environment parent = Environment::OfProcess();
  std::vector<std::string> env;
  // kCommand: each local rank's own "NAME=value"s (RANK, LOCAL_RANK, ...),
  // and how its output reaches the launcher's: relayed whole lines (so
  // ranks never split each other's lines), each after the given prefix
  // ("[rank 1] ", or ""); nullopt (or none given): written there directly.
  std::vector<std::vector<std::string>> rank_env;
  std::vector<std::optional<std::string>> rank_prefix;
  // After a rank fails or the launcher is told to stop, the other ranks get
  // SIGTERM, and SIGKILL if they are still running this much later.
  int grace_s = 10;
  // The ranks stop themselves on the stop signal passed on to them (train's,
  // which save a checkpoint of the step they reach first): no SIGTERM after
  // it, only the SIGKILL past the grace.
  bool ranks_stop_on_signal = false;
  // The run's --timeout, when it has more than one rank in all: a rank that
  // shows no sign of life (heartbeat.h) for this long while the others wait
  // for it is named when they give up, and one quiet for a little longer
  // ends the run here even if its peers are on other machines.
  int timeout_s = 0;
  // When >= 0, every rank's stdout (stderr) goes here instead of the launcher's.
  int stdout_fd = -1;
  int stderr_fd = -1;
  // When set (train --backend mpi), the ranks are one MPI job that this
  // mpirun starts (one app context per rank, each with its own arguments
  // and environment) instead of processes forked here. The launcher then
  // watches mpirun, and each rank through the heartbeat board: its process,
  // how it ended, its pulse. Pinning is the ranks' own (their --layout).
  std::string mpirun;
  // When set, called with the board about five times a second while the
  // ranks run; once it returns true they are stopped (SIGTERM, SIGKILL
  // after the grace) and how they end is no failure: a probe that has
  // measured enough.
  std::function<bool(const HeartbeatBoard&)> enough;
};

struct LaunchOutcome {
  // 0 if every rank exited 0; else the first failing rank's exit status
  // (128 + signal if it was killed), or 128 + the signal that stopped the
  // launcher.
  int exit_code = 0;
  // One line on the first failure, e.g. "rank 1 was killed by signal 9
  // (Killed)" or "rank 1 made no progress for 61 s ...", or "" (a rank that
  // exits non-zero has said why itself, and no other rank hung).
  std::string failure;
  // The signal (SIGINT, SIGTERM) that stopped the launcher, or 0.
  int stopped_by = 0;
  // LaunchOptions::enough stopped the ranks.
  bool enough = false;
};

// Runs the ranks and waits for all of them. SIGINT and SIGTERM sent to the
// launcher are forwarded to every rank; if a rank fails, the others are
// stopped; a rank that hangs is named (and, a little past timeout_s,
// stopped); every rank dies with the launcher (PR_SET_PDEATHSIG), even if the
// launcher is killed outright. Returns an error only if a rank cannot start.
StatusOr<LaunchOutcome> LaunchRanks(const LaunchOptions& options);

// How the ranks of `config` laid out as `layout` are started, each with
// `argv` (plus "--layout JSON"); `mpirun`: the mpirun of a run over MPI
// (--backend mpi), unused otherwise; `env`: the launcher's environment.
LaunchOptions RankLaunchOptions(const TrainConfig& config, const Layout& layout, const std::vector<std::string>& argv,
                                const std::string& mpirun, const Environment& env);

}  // namespace granary
