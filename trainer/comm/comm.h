// Comm: the collectives data-parallel training needs, over one of two
// backends: c10d's ProcessGroupGloo with a TCPStore rendezvous (several
// machines, or a port named) or a FileStore one (one machine: no port
// opened); or MPI (OpenMPI: shared memory within a machine, its own
// transports between machines), in a process started by mpirun or srun,
// whose collectives run on a thread of their own (mpi_comm.cc). One per
// rank process; calls block (but the *Async ones, waited for later) and must
// be made in the same order on every rank. LibTorch, Gloo and MPI errors are
// caught here and returned as Status.
//
// Over a TCPStore, each rank also beats in the store (a counter, twice a
// second, from a thread of its own), so that when a collective fails (a
// peer's recv timed out, its connection closed) the error can name the ranks
// that have stopped beating, and their nodes: a killed process, a dead
// machine or a dropped link, told apart from a slow peer. A rank that cannot
// reach the store itself says so (its own link, or node 0, is down).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "base/environment.h"
#include "base/status.h"
#include "trainer/config/choices.h"

namespace granary {

struct CommOptions {
  int rank = 0;
  int world = 1;
  std::string host = "127.0.0.1";  // where rank 0 serves the TCPStore
  int port = 0;
  // When set, the ranks (all on this machine) meet through a c10d FileStore
  // at this path instead of a TCPStore, and Gloo uses the loopback device.
  // LibTorch 1.13's TCPStore has no bind address: it would listen on every
  // interface.
  std::string store_file;
  std::string iface;  // Gloo's network interface; "": GLOO_SOCKET_IFNAME, else gloo_device.h's choice
  int timeout_s = 300;
  int ranks_per_node = 0;  // to name a lost rank's node (ranks are numbered node by node); 0: not named
  // What the ranks must agree on (a JSON object: trainer/config's
  // RecipeJson). Over a TCPStore, a rank whose recipe differs from rank 0's
  // ends the rendezvous on every rank, naming the member and both values.
  std::string recipe = "{}";
  Backend backend = Backend::kGloo;  // or kMpi (CommHasMpi); never kAuto (resolved before)
  // From the process's environment (StartedByMpiLauncher and the variables
  // below), so a backend reads no environment of its own.
  bool mpi_job = false;             // an MPI launcher started this process: MPI_Init joins its job
  std::string gloo_socket_ifname;   // GLOO_SOCKET_IFNAME
  bool agent_store = false;         // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent serves the TCPStore
};

// Whether the MPI backend can be used here: the build has it (CMake found
// MPI) and its plugin, with OpenMPI's libraries, loads (mpi_plugin.cc, or
// no_mpi_comm.cc); the line saying why not; and the mpirun the build came
// with ("" without).
bool CommHasMpi();
std::string CommMpiUnavailable();
std::string MpirunPath();

// A collective started and not yet waited for (Comm::AllReduceSumAsync, AllGatherAsync).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  // Blocks until the tensor holds the sum over ranks.
  virtual Status Wait() = 0;
};

class Comm {
 public:
  static StatusOr<std::unique_ptr<Comm>> Create(const CommOptions& options);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const;
  int world() const;

  // Replaces each tensor with the element-wise mean over ranks. The tensors
  // are packed into one contiguous buffer for a single all-reduce.
  Status AllReduceMean(const std::vector<torch::Tensor>& tensors);
  // Sum of `tensor` over ranks, in place.
  Status AllReduceSum(torch::Tensor& tensor);
  // The same, started on Gloo's worker threads; `tensor` must not be touched
  // until Wait() returns. Calls must still come in the same order on every rank.
  StatusOr<std::unique_ptr<PendingCollective>> AllReduceSumAsync(const torch::Tensor& tensor);
  // Every rank's `input` into (*outputs)[rank] (allocated here, like
  // `input`), started on Gloo's threads; neither may be touched until Wait().
  StatusOr<std::unique_ptr<PendingCollective>> AllGatherAsync(const torch::Tensor& input,
                                                              std::vector<torch::Tensor>* outputs);
  // Copies rank 0's values into each tensor on every rank (one broadcast per dtype).
  Status Broadcast(const std::vector<torch::Tensor>& tensors);
  Status Barrier();

 private:
  struct Impl;
  explicit Comm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace granary
