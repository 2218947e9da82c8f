#include "trainer/loop/data_parallel.h"

#include <utility>

#include "trainer/launch/job_place.h"

namespace granary {

StatusOr<DataParallel> DataParallel::Join(const TrainConfig& c, const Environment& env, int rank, Classifier& net,
                                          const std::string& recipe) {
  CommOptions co;
  co.rank = rank;
  co.world = c.World();
  co.iface = c.dist.iface;
  co.timeout_s = c.dist.timeout_s;
  co.host = c.dist.host;
  co.port = c.dist.port;
  co.store_file = c.dist.rendezvous_file;
  co.ranks_per_node = c.dist.ranks;
  co.recipe = recipe;
  co.backend = c.dist.backend;  // resolved by RunTrain: gloo or mpi
  co.mpi_job = StartedByMpiLauncher(env);
  co.gloo_socket_ifname = env.Get("GLOO_SOCKET_IFNAME");
  co.agent_store = env.Get("TORCHELASTIC_USE_AGENT_STORE") == "True";
  DataParallel dp;
  StatusOr<std::unique_ptr<Comm>> comm = Comm::Create(co);
  if (!comm.ok()) return comm.status();
  dp.comm = std::move(comm).value();
  {
    torch::NoGradGuard no_grad;
    GRANARY_RETURN_IF_ERROR(dp.comm->Broadcast(net.parameters()));
  }
  GRANARY_RETURN_IF_ERROR(dp.Reattach(c, net));
  return dp;
}

Status DataParallel::Reattach(const TrainConfig& c, Classifier& net) {
  sync.reset();  // first: its hooks hold the parameters' old gradient accumulators
  const std::vector<torch::Tensor> params = TrainableParameters(net);
  for (const torch::Tensor& p : params) p.mutable_grad() = torch::Tensor();
  buffers = net.buffers();
  GradientCompressionOptions compress;
  compress.method = c.sync.compress;
  compress.matrix_rank = c.sync.powersgd_rank;
  compress.warmup_steps = c.sync.powersgd_warmup;
  compress.seed = c.optim.seed;
  compressed = compress.method != Compression::kNone;
  StatusOr<std::unique_ptr<GradientSync>> made =
      CreateGradientSync(c.sync.method, static_cast<size_t>(c.sync.bucket_mb * (1 << 20)), *comm, compress);
  if (!made.ok()) return made.status();
  sync = std::move(made).value();
  return sync->Attach(params);
}

void DataParallel::Parts(bool apart, StepParts* parts) const {
  // One rank's gradients are already the mean, its buffers already rank 0's:
  // nothing to send. A compression still runs (what it costs in accuracy is
  // what a one-rank run with it measures).
  const bool alone = comm->world() == 1 && !compressed;
  parts->sync = apart || alone ? nullptr : sync.get();
  parts->comm = apart || alone ? nullptr : comm.get();
  parts->buffers = buffers;
}

}  // namespace granary
