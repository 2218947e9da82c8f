// torchrun's contract with a rank: the variables each process of a job gets
// (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...), so that a script written
// for torchrun (dist.init_process_group from env://) runs unchanged under
// `launch`, on one machine, across nodes, or under the user's mpirun or srun;
// and torchrun's command line, as far as a user who knows it types it.
#pragma once

#include <string>
#include <vector>

#include "base/environment.h"
#include "base/status.h"

namespace granary {

// The job of a launch: its shape and rendezvous, and this node's part.
struct CommandJob {
  int world = 1;        // ranks in all
  int local_world = 1;  // ranks on each node
  int nnodes = 1;
  int node_rank = 0;
  int first_rank = 0;   // the global rank of this node's first local rank started here
  int first_local = 0;  // that rank's LOCAL_RANK (under mpirun: this process's place on its node)
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  int restart = 0;  // TORCHELASTIC_RESTART_COUNT
  int max_restarts = 0;
  std::string run_id = "granary";
};

// Local rank `i`'s variables ("NAME=value"), as torchrun 1.13's agent sets them.
std::vector<std::string> TorchrunVariables(const CommandJob& job, int i);

// COMMAND as torchrun runs it: a first word ending in ".py" by `python3 -u`
// (torchrun's sys.executable -u), or `python3 -u -m MODULE` where `module` is
// given; as it is with `no_python` (torchrun's --no-python) or any other word.
std::vector<std::string> TorchrunCommand(const std::vector<std::string>& command, const std::string& module,
                                         bool no_python);

// What launch says of `flag`, a flag of torchrun's it does not take (one of
// its rendezvous, logging or agent flags): what does that work under launch;
// "" for a word that is no flag of torchrun's.
std::string TorchrunFlagAdvice(const std::string& flag);

// --ranks (torchrun's --nproc-per-node) as typed: a number of ranks (*given
// set), torchrun's "auto" (launch's default: *given cleared, *ranks left
// alone) or "cpu" (one rank per usable CPU, as torchrun counts them);
// InvalidArgument naming the flag for anything else ("gpu": no GPUs here).
Status ParseRanksFlag(const std::string& text, int* ranks, bool* given);

// A TCP port free on this machine now (the kernel's choice), for a
// one-machine job's rendezvous; 0 if none could be had.
int FreePort();

}  // namespace granary
