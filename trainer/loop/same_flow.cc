#include "trainer/loop/same_flow.h"

#include <torch/torch.h>

namespace granary {

Status CheckSameFlow(Comm& comm, Flow flow, const std::string& where) {
  if (comm.world() < 2) return Status::OK();
  torch::Tensor stops = torch::full({1}, flow == Flow::kStop ? 1.0 : 0.0, torch::kFloat64);
  GRANARY_RETURN_IF_ERROR(comm.AllReduceSum(stops));
  const int stopped = static_cast<int>(stops.item<double>());
  if (stopped == 0 || stopped == comm.world()) return Status::OK();
  return Status::FailedPrecondition(
      "the hooks' flow differs between ranks " + where + ": " + std::to_string(stopped) + " of " +
      std::to_string(comm.world()) + " ranks stopped (this one " + (flow == Flow::kStop ? "did" : "did not") +
      "); a hook must decide to stop from what every rank shares (trainer/loop/hook.h)");
}

}  // namespace granary
