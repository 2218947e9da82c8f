#include "trainer/comm/after_backward_sync.h"

#include <chrono>

#include "trainer/clock.h"
#include "trainer/comm/comm.h"

namespace granary {

Status AfterBackwardSync::Attach(const std::vector<torch::Tensor>& params) {
  params_ = params;
  return Status::OK();
}

Status AfterBackwardSync::FinishStep() {
  grads_.clear();
  for (const torch::Tensor& p : params_) grads_.push_back(p.grad());
  const auto start = std::chrono::steady_clock::now();
  Status s = comm_.AllReduceMean(grads_);
  blocked_seconds_ += SecondsSince(start);
  return s;
}

}  // namespace granary
