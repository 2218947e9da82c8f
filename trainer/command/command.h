// The `launch` program: train's launcher for any command (a user's own
// PyTorch script). Each rank is the command with torchrun's variables
// (torchrun_env.h), its threads capped and pinned by train's layout
// (launch/layout.h), an allocator preloaded if asked, watched as train's
// ranks are (a rank killed, exiting non-zero, or making no progress is
// named and the others stopped), the whole job started again after a
// failure up to --max-restarts times; --tune measures layouts and
// allocators on the command itself (command_tune.h).
#pragma once

#include <string>
#include <vector>

#include "base/environment.h"
#include "base/status.h"
#include "trainer/config/choices.h"

namespace granary {

struct CommandConfig {
  std::vector<std::string> command;  // COMMAND [ARGS...], as given (a .py is run by python3: TorchrunCommand)
  std::string module;                // -m MODULE: COMMAND is python3 -u -m MODULE [ARGS...]
  bool no_python = false;            // --no-python: a .py COMMAND is run as it is
  int ranks = 1;                     // on this node
  bool ranks_given = false;          // --ranks on the command line (--tune leaves it alone)
  int threads = 0;                   // intra-op threads per rank; 0: the rank's CPUs
  int loader_threads = 1;            // granary.Loader's workers per rank (GRANARY_LOADER_THREADS)
  bool pin = true;
  bool oversubscribe = false;
  Allocator allocator = Allocator::kAuto;  // auto: glibc unless --tune measured another better
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;           // "": 127.0.0.1 on one node
  int master_port = 0;               // 0 on one node: a free port, chosen per start
  std::string iface;                 // GLOO_SOCKET_IFNAME
  int timeout_s = 300;               // a rank without a step for this long is hung; 0: not watched
  int grace_s = 10;
  int max_restarts = 0;
  RankPrefix prefix = RankPrefix::kAuto;   // auto: rank 0 plain, the others "[rank R] "; all; none
  bool json = false;                 // one JSON object, the last line on stdout
  bool tune = false;
  bool tune_only = false;
  double tune_seconds = 6;           // measured seconds per candidate, after the first steps
};

// Flags bounded, before anything starts; names the flag.
Status ValidateCommandConfig(const CommandConfig& config);

// Runs the job; returns the exit status (the first failure's, 128 + signal
// for a signal; 0 when every rank exited 0).
int RunCommand(CommandConfig config, const Environment& env);

}  // namespace granary
