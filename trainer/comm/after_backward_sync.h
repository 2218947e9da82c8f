// The simplest GradientSync: after backward has finished, every gradient is
// packed into one flat buffer and all-reduced at once. Nothing overlaps with
// backward; one collective per step.
#pragma once

#include <vector>

#include "trainer/comm/gradient_sync.h"

namespace granary {

class AfterBackwardSync : public GradientSync {
 public:
  explicit AfterBackwardSync(Comm& comm) : comm_(comm) {}
  Status Attach(const std::vector<torch::Tensor>& params) override;
  Status FinishStep() override;
  double blocked_seconds() const override { return blocked_seconds_; }

 private:
  Comm& comm_;
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> grads_;  // reused between steps
  double blocked_seconds_ = 0;
};

}  // namespace granary
