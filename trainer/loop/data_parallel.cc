#include "trainer/loop/data_parallel.h"

#include <utility>

namespace granary {

StatusOr<DataParallel> DataParallel::Join(const TrainConfig& c, int rank, Classifier& net) {
  CommOptions co;
  co.rank = rank;
  co.world = c.World();
  co.iface = c.dist.iface;
  co.timeout_s = c.dist.timeout_s;
  co.host = c.dist.host;
  co.port = c.dist.port;
  co.store_file = c.dist.rendezvous_file;
  DataParallel dp;
  StatusOr<std::unique_ptr<Comm>> comm = Comm::Create(co);
  if (!comm.ok()) return comm.status();
  dp.comm = std::move(comm).value();
  const std::vector<torch::Tensor> params = net.parameters();
  dp.buffers = net.buffers();
  {
    torch::NoGradGuard no_grad;
    GRANARY_RETURN_IF_ERROR(dp.comm->Broadcast(params));
  }
  StatusOr<std::unique_ptr<GradientSync>> sync =
      CreateGradientSync(c.sync.method, static_cast<size_t>(c.sync.bucket_mb * (1 << 20)), *dp.comm);
  if (!sync.ok()) return sync.status();
  dp.sync = std::move(sync).value();
  GRANARY_RETURN_IF_ERROR(dp.sync->Attach(params));
  return dp;
}

void DataParallel::Parts(bool apart, StepParts* parts) const {
  parts->sync = apart ? nullptr : sync.get();
  parts->comm = apart ? nullptr : comm.get();
  parts->buffers = buffers;
}

}  // namespace granary
